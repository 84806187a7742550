#include "output_processor.h"

#include <algorithm>

namespace vllm {

void OutputProcessor::AddRequest(const std::string& id, const std::vector<int32_t>& prompt_ids,
                                 const SamplingParams& params) {
  State& s = states_[id];
  s.output.request_id = id;
  s.output.prompt_token_ids = prompt_ids;
  s.params = params;
  for (const std::string& stop : params.stop) s.longest_stop = std::max(s.longest_stop, stop.size());
  if (params.prompt_logprobs) s.output.prompt_logprobs.resize(prompt_ids.size());
  if (tokenizer_) {
    s.detokenizer = std::make_unique<IncrementalDetokenizer>(*tokenizer_, params.skip_special_tokens, prompt_ids);
  }
}

void OutputProcessor::AddPromptLogprobs(const std::string& id, const PromptLogprobsChunk& chunk) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  auto& slots = it->second.output.prompt_logprobs;
  for (size_t i = 0; i < chunk.entries.size(); ++i) {
    const size_t pos = static_cast<size_t>(chunk.first_position) + i;
    // A recomputed (preempted) prompt reports the same positions again: keep the first.
    if (pos < slots.size() && !slots[pos]) slots[pos] = chunk.entries[i];
  }
}

std::optional<std::string> OutputProcessor::FindStop(State& s) const {
  if (s.params.stop.empty()) return std::nullopt;
  std::string& text = s.output.text;
  // Only the text that can contain a new match: the new part plus the longest stop - 1.
  const size_t from = s.reported_text > s.longest_stop ? s.reported_text - s.longest_stop + 1 : 0;
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& stop : s.params.stop) {
    size_t at = text.find(stop, from);
    if (at != std::string::npos && at < best) {
      best = at;
      which = &stop;
    }
  }
  if (which == nullptr) return std::nullopt;
  text.resize(s.params.include_stop_str_in_output ? best + which->size() : best);
  return *which;
}

std::optional<std::string> OutputProcessor::AddTokens(const std::string& id, const std::vector<int32_t>& token_ids,
                                                      const TokenLogprobs* logprobs) {
  State& s = states_.at(id);
  s.output.token_ids.insert(s.output.token_ids.end(), token_ids.begin(), token_ids.end());
  if (logprobs) s.output.logprobs.push_back(*logprobs);
  if (!s.detokenizer) return std::nullopt;
  s.output.text += s.detokenizer->Add(token_ids);
  std::optional<std::string> stop = FindStop(s);
  if (stop) s.output.stop_reason = *stop;
  return stop;
}

void OutputProcessor::ReportNew(State& s, RequestOutput& out, bool finished) {
  out.new_token_ids.assign(s.output.token_ids.begin() + s.reported_tokens, s.output.token_ids.end());
  const std::string& text = s.output.text;
  const size_t from = std::min(s.reported_text, text.size());
  size_t end = text.size();
  if (!finished && s.longest_stop > 1) {
    end = text.size() > s.longest_stop - 1 ? text.size() - (s.longest_stop - 1) : 0;
    end = std::max(end, from);
    while (end > from && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  out.new_text = text.substr(from, end - from);
  s.reported_tokens = s.output.token_ids.size();
  s.reported_text = std::max(s.reported_text, end);
}

RequestOutput OutputProcessor::Report(State& s, bool finished) {
  RequestOutput out;
  out.request_id = s.output.request_id;
  switch (s.params.output_kind) {
    case RequestOutputKind::kCumulative:
      out = s.output;
      ReportNew(s, out, finished);
      out.text.resize(s.reported_text);  // without the held-back bytes
      return out;
    case RequestOutputKind::kDelta: {
      const auto& tokens = s.output.token_ids;
      out.token_ids.assign(tokens.begin() + static_cast<ptrdiff_t>(s.reported_tokens), tokens.end());
      const auto& logprobs = s.output.logprobs;
      const size_t from = std::min(s.reported_tokens, logprobs.size());
      out.logprobs.assign(logprobs.begin() + static_cast<ptrdiff_t>(from), logprobs.end());
      if (!s.prompt_reported) {
        out.prompt_token_ids = s.output.prompt_token_ids;
        out.prompt_logprobs = s.output.prompt_logprobs;
        s.prompt_reported = true;
      }
      ReportNew(s, out, finished);
      out.text = out.new_text;
      return out;
    }
    case RequestOutputKind::kFinalOnly:
      break;
  }
  ReportNew(s, out, finished);  // the new_* fields only
  return out;
}

RequestOutput OutputProcessor::Snapshot(const std::string& id) { return Report(states_.at(id), false); }

RequestOutput OutputProcessor::Finish(const std::string& id, const std::string& finish_reason) {
  State& s = states_.at(id);
  // Held-back bytes of an unfinished character are flushed unless a stop string cut the text.
  if (s.detokenizer && s.output.stop_reason.empty()) s.output.text += s.detokenizer->Finish();
  RequestOutput out;
  if (s.params.output_kind == RequestOutputKind::kDelta) {
    out = Report(s, true);
    out.stop_reason = s.output.stop_reason;
  } else {
    ReportNew(s, s.output, true);
    out = std::move(s.output);  // complete (kCumulative, kFinalOnly); the state is forgotten right after
  }
  out.finished = true;
  out.finish_reason = finish_reason;
  states_.erase(id);
  return out;
}

void OutputProcessor::Abort(const std::string& id) { states_.erase(id); }

}  // namespace vllm
