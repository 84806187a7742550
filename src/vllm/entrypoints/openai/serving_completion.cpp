#include "serving_completion.h"

#include <algorithm>
#include <utility>

#include "request_fields.h"
#include "structured_outputs_request.h"

namespace vllm::openai {
namespace {

using nlohmann::json;

struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // what echo returns: the prompt as sent, or its ids decoded
};

struct CompletionRequest {
  std::string request_id;
  std::string model;
  int64_t created = 0;
  StreamOptions stream;
  bool echo = false;
  bool return_token_ids = false;       // vLLM's extra: prompt_token_ids and token_ids in the choices
  bool return_tokens_as_token_ids = false;  // logprobs name tokens "token_id:N"
  std::string user;                    // OpenAI's user: shown in the request's log line
  std::optional<int> logprobs;         // top-K of OpenAI's legacy logprobs
  std::optional<int> prompt_logprobs;  // vLLM's prompt_logprobs field, as asked for
  // Per choice: prompt p's n choices are choices p n .. p n + n - 1 (OpenAI's index),
  // each its own engine request (as vLLM's parallel sampling fans a request out).
  int64_t n = 1;
  // Candidates a prompt's n choices are picked from (ReadBestOf); with best_of > n the
  // prompts and params below hold best_of candidates a prompt until PickBestOf.
  int64_t best_of = 1;
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;  // per choice (max_tokens depends on the prompt's length)
  // Usage counts a prompt once, however many choices it has.
  bool CountsPrompt(size_t choice) const { return choice % static_cast<size_t>(n) == 0; }
};

int64_t CodePoints(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xc0) != 0x80;
  return n;
}

std::string DecodePrompt(const Tokenizer* tokenizer, const std::vector<int32_t>& ids) {
  if (tokenizer == nullptr) return "";
  std::vector<int32_t> known;
  for (int32_t id : ids) {
    if (tokenizer->HasToken(id)) known.push_back(id);
  }
  return tokenizer->Decode(known);
}

std::vector<int32_t> ReadIds(const json& ids, int64_t vocab_size) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0 || ids[i].get<int64_t>() >= vocab_size) {
      BadRequest("prompt token " + std::to_string(i) + " is " + ids[i].dump() + ", not a token id in [0, " +
                     std::to_string(vocab_size) + ")",
                 "prompt");
    }
    out.push_back(ids[i].get<int32_t>());
  }
  return out;
}

// "prompt": a string, a list of token ids, a list of strings or a list of id lists,
// each cut to its last `truncate_prompt_tokens` tokens (echo then returns what is kept).
std::vector<Prompt> ReadPrompts(const json& body, const ServingContext& context, bool add_special_tokens,
                                std::optional<int64_t> truncate_prompt_tokens) {
  if (!body.contains("prompt") || body["prompt"].is_null()) BadRequest("'prompt' is required", "prompt");
  const json& prompt = body["prompt"];
  const int64_t vocab = context.engine().vocab_size();
  auto from_text = [&](const json& text) {
    return Prompt{context.Encode(text.get<std::string>(), add_special_tokens, "prompt"), text.get<std::string>()};
  };
  auto from_ids = [&](const json& ids) {
    std::vector<int32_t> read = ReadIds(ids, vocab);
    return Prompt{read, DecodePrompt(context.engine().tokenizer(), read)};
  };
  auto all = [&](bool (json::*is_type)() const noexcept) {
    return std::all_of(prompt.begin(), prompt.end(), [&](const json& p) { return (p.*is_type)(); });
  };
  std::vector<Prompt> prompts;
  if (prompt.is_string()) {
    prompts.push_back(from_text(prompt));
  } else if (prompt.is_array() && !prompt.empty() && all(&json::is_number)) {
    prompts.push_back(from_ids(prompt));
  } else if (prompt.is_array() && !prompt.empty() && all(&json::is_string)) {
    for (const json& p : prompt) prompts.push_back(from_text(p));
  } else if (prompt.is_array() && !prompt.empty() && all(&json::is_array)) {
    for (const json& p : prompt) prompts.push_back(from_ids(p));
  } else {
    BadRequest("'prompt' must be a string, a list of token ids, or a non-empty list of strings or of token id lists",
               "prompt");
  }
  for (Prompt& p : prompts) {
    if (p.ids.empty()) BadRequest("the prompt is empty: send at least one token", "prompt");
    const size_t num_sent = p.ids.size();
    context.TruncatePrompt(p.ids, truncate_prompt_tokens);
    if (p.ids.size() < num_sent) p.text = DecodePrompt(context.engine().tokenizer(), p.ids);
  }
  return prompts;
}

CompletionRequest ReadRequest(const std::string& text, const ServingContext& context) {
  const json body = ParseBody(text);
  CheckRequestFields(body, Endpoint::kCompletion);
  CompletionRequest request;
  request.model = context.CheckModel(body);
  request.request_id = RequestIdOf(body, "cmpl-");
  request.created = UnixTimeSeconds();
  request.stream = ReadStreamOptions(body);
  request.user = OptionalString(body, "user").value_or("");
  request.echo = OptionalBool(body, "echo").value_or(false);
  request.return_token_ids = OptionalBool(body, "return_token_ids").value_or(false);
  if (const auto k = OptionalInt(body, "logprobs")) request.logprobs = CheckLogprobsCount(*k, "logprobs");
  RequestSampling sampling = ReadSampling(body, context.sampling_defaults());
  // A stream sends what each output adds; a single response uses only the last (as vLLM).
  sampling.params.output_kind = request.stream.stream ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
  sampling.params.bad_words_token_ids = context.BadWordsTokenIds(sampling.bad_words);
  request.return_tokens_as_token_ids = sampling.return_tokens_as_token_ids;
  request.prompt_logprobs = sampling.params.prompt_logprobs;
  // Echoed prompts carry their logprobs too (vLLM asks the engine for prompt logprobs).
  if (request.echo && request.logprobs) {
    sampling.params.prompt_logprobs = std::max(request.logprobs.value(), request.prompt_logprobs.value_or(0));
  }
  sampling.params.logprobs = request.logprobs;
  sampling.params.structured_outputs = ReadStructuredOutputs(ParseOrderedBody(text)).params;
  request.prompts = ReadPrompts(body, context, OptionalBool(body, "add_special_tokens").value_or(true),
                                sampling.truncate_prompt_tokens);
  // Without max_tokens: the generation config's, else OpenAI's 16 (an explicit null: all that fits).
  std::optional<int64_t> fallback_max_tokens = sampling.default_max_tokens;
  if (!fallback_max_tokens && !body.contains("max_tokens")) fallback_max_tokens = 16;
  request.n = ReadChoiceCount(body);
  request.best_of = ReadBestOf(body, request.n, request.stream.stream);
  std::vector<Prompt> choices;
  for (const Prompt& prompt : request.prompts) {
    SamplingParams params = sampling.params;
    params.max_tokens = context.ResolveMaxTokens(static_cast<int64_t>(prompt.ids.size()), sampling.max_tokens,
                                                 fallback_max_tokens, "prompt");
    ValidateSampling(params, context.engine().vocab_size());
    for (int64_t j = 0; j < request.best_of; ++j) {
      request.params.push_back(CandidateParams(params, j, request.n, request.best_of));
      choices.push_back(prompt);
    }
  }
  request.prompts = std::move(choices);
  return request;
}

// OpenAI's legacy logprobs object {tokens, token_logprobs, top_logprobs, text_offset},
// built token by token; Take() hands out what was added since the last call.
class CompletionLogprobs {
 public:
  CompletionLogprobs(const Tokenizer* tokenizer, int num_top) : tokenizer_(tokenizer), num_top_(num_top) {}

  // `entry` null: the first prompt token, which has no logprob.
  void Add(int32_t id, const TokenLogprobs* entry) {
    const std::string text = TokenText(tokenizer_, id);
    tokens_.push_back(text);
    text_offset_.push_back(offset_);
    offset_ += CodePoints(text);
    if (entry == nullptr) {
      token_logprobs_.push_back(nullptr);
      top_logprobs_.push_back(nullptr);
      return;
    }
    const float logprob = LogprobOf(*entry, id);
    token_logprobs_.push_back(logprob);
    json top = json::object();
    for (size_t i = 0; i < entry->size() && i < static_cast<size_t>(num_top_); ++i) {
      const std::string key = TokenText(tokenizer_, (*entry)[i].first);
      if (!top.contains(key)) top[key] = (*entry)[i].second;  // equal texts: keep the likelier
    }
    if (!top.contains(text)) top[text] = logprob;
    top_logprobs_.push_back(std::move(top));
  }

  json Take() {
    json out = {{"tokens", std::move(tokens_)},
                {"token_logprobs", std::move(token_logprobs_)},
                {"top_logprobs", std::move(top_logprobs_)},
                {"text_offset", std::move(text_offset_)}};
    tokens_ = token_logprobs_ = top_logprobs_ = text_offset_ = json::array();
    return out;
  }

 private:
  const Tokenizer* tokenizer_;
  int num_top_;
  int64_t offset_ = 0;
  json tokens_ = json::array(), token_logprobs_ = json::array(), top_logprobs_ = json::array(),
       text_offset_ = json::array();
};

void AddPromptLogprobs(CompletionLogprobs& logprobs, const RequestOutput& output) {
  for (size_t p = 0; p < output.prompt_token_ids.size(); ++p) {
    const bool known = p < output.prompt_logprobs.size() && output.prompt_logprobs[p].has_value();
    logprobs.Add(output.prompt_token_ids[p], known ? &*output.prompt_logprobs[p] : nullptr);
  }
}

json ChunkBase(const CompletionRequest& request) {
  return {{"id", request.request_id},
          {"object", "text_completion"},
          {"created", request.created},
          {"model", request.model}};
}

json ResponseJson(const CompletionRequest& request, const std::vector<RequestOutput>& outputs,
                  const Tokenizer* tokenizer) {
  json response = ChunkBase(request);
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RequestOutput& out = outputs[i];
    json logprobs = nullptr;
    if (request.logprobs) {
      CompletionLogprobs builder(request.return_tokens_as_token_ids ? nullptr : tokenizer, *request.logprobs);
      if (request.echo) AddPromptLogprobs(builder, out);
      for (size_t t = 0; t < out.token_ids.size(); ++t) builder.Add(out.token_ids[t], &out.logprobs.at(t));
      logprobs = builder.Take();
    }
    choices.push_back(
        {{"index", i},
         {"text", (request.echo ? request.prompts[i].text : "") + out.text},
         {"logprobs", std::move(logprobs)},
         {"finish_reason", out.finish_reason},
         {"stop_reason", StopReasonJson(out, request.params[i])},
         {"prompt_logprobs",
          request.prompt_logprobs ? PromptLogprobsJson(tokenizer, out, *request.prompt_logprobs) : json(nullptr)}});
    if (request.return_token_ids) {
      choices.back()["prompt_token_ids"] = out.prompt_token_ids;
      choices.back()["token_ids"] = out.token_ids;
    }
    if (request.CountsPrompt(i)) prompt_tokens += static_cast<int64_t>(out.prompt_token_ids.size());
    completion_tokens += static_cast<int64_t>(out.token_ids.size());
  }
  response["choices"] = std::move(choices);
  response["usage"] = UsageJson(prompt_tokens, completion_tokens);
  return response;
}

// One text_completion chunk per engine output that adds text or tokens; the last
// chunk of each choice carries its finish_reason.
class CompletionStream : public EventStream {
 public:
  CompletionStream(CompletionRequest request, std::unique_ptr<RequestGroup> group, const Tokenizer* tokenizer)
      : request_(std::move(request)), group_(std::move(group)) {
    for (size_t i = 0; i < request_.prompts.size(); ++i) {
      choices_.push_back({0, request_.echo,
                          CompletionLogprobs(request_.return_tokens_as_token_ids ? nullptr : tokenizer,
                                             request_.logprobs.value_or(0))});
    }
  }

  bool Next(std::chrono::milliseconds timeout, std::string& events) override {
    if (done_) return false;
    try {
      // Everything ready goes out in one write: a writer that fell behind catches up.
      for (auto output = group_->Next(timeout); output; output = group_->Next(std::chrono::milliseconds(0))) {
        AddChunk(*output, events);
      }
    } catch (const OpenAIError& e) {
      events += SseEvent(e.ToJson()) + kSseDone;
      done_ = true;
      return false;
    }
    if (!group_->finished()) return true;
    if (request_.stream.include_usage) {
      json usage = ChunkBase(request_);
      usage["choices"] = json::array();
      usage["usage"] = UsageJson(prompt_tokens_, completion_tokens_);
      events += SseEvent(usage);
    }
    events += kSseDone;
    done_ = true;
    return false;
  }

 private:
  struct Choice {
    size_t num_tokens_sent = 0;
    bool echo_pending = false;
    CompletionLogprobs logprobs;
    bool sent_any = false;
  };

  // `output` is a delta (RequestOutputKind::kDelta): its tokens, logprobs and text
  // are new; the first one of a request also holds the prompt and its logprobs.
  void AddChunk(const RequestOutput& output, std::string& events) {
    const size_t index = group_->IndexOf(output.request_id);
    Choice& choice = choices_[index];
    std::string text = output.new_text;
    json logprobs = nullptr;
    if (request_.logprobs) {
      if (choice.echo_pending) AddPromptLogprobs(choice.logprobs, output);
      for (size_t t = 0; t < output.token_ids.size(); ++t) choice.logprobs.Add(output.token_ids[t], &output.logprobs.at(t));
      logprobs = choice.logprobs.Take();
    }
    const bool first_chunk = choice.echo_pending || !choice.sent_any;
    if (choice.echo_pending) text = request_.prompts[index].text + text;
    const std::vector<int32_t>& new_ids = output.token_ids;
    choice.echo_pending = false;
    choice.num_tokens_sent += output.token_ids.size();
    if (output.finished) {
      if (request_.CountsPrompt(index)) prompt_tokens_ += static_cast<int64_t>(request_.prompts[index].ids.size());
      completion_tokens_ += static_cast<int64_t>(choice.num_tokens_sent);
    }
    // As vLLM: every step that produced tokens is a chunk, even when its text is empty
    // (a token ending inside a character, a held-back stop-string prefix, a skipped
    // special token), so a client's time to first token is the first token's; only a
    // step with neither text nor tokens is skipped.
    if (text.empty() && !output.finished && new_ids.empty()) return;
    json item = {{"index", index},
                 {"text", text},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", output.finished ? json(output.finish_reason) : json(nullptr)},
                 {"stop_reason", output.finished ? StopReasonJson(output, request_.params[index]) : json(nullptr)}};
    if (request_.return_token_ids) {
      if (first_chunk) item["prompt_token_ids"] = request_.prompts[index].ids;
      item["token_ids"] = new_ids;
    }
    choice.sent_any = true;
    json chunk = ChunkBase(request_);
    chunk["choices"] = json::array({std::move(item)});
    if (request_.stream.include_usage && request_.stream.continuous_usage_stats) {
      chunk["usage"] = UsageJson(static_cast<int64_t>(request_.prompts[index].ids.size()),
                                 static_cast<int64_t>(choice.num_tokens_sent));
    }
    events += SseEvent(chunk);
  }

  CompletionRequest request_;
  std::unique_ptr<RequestGroup> group_;
  std::vector<Choice> choices_;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  bool done_ = false;
};

// With best_of > n: each prompt's n best candidates become its choices (outputs,
// prompts and params narrowed alike, in ranking order).
std::vector<RequestOutput> PickBestOf(CompletionRequest& request, const std::vector<RequestOutput>& candidates) {
  if (request.best_of == request.n) return candidates;
  std::vector<RequestOutput> outputs;
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (size_t first = 0; first < candidates.size(); first += static_cast<size_t>(request.best_of)) {
    for (size_t i : BestCandidates(candidates, first, request.best_of, request.n)) {
      outputs.push_back(candidates[i]);
      prompts.push_back(request.prompts[i]);
      params.push_back(request.params[i]);
    }
  }
  request.prompts = std::move(prompts);
  request.params = std::move(params);
  return outputs;
}

}  // namespace

ApiResponse ServingCompletion::Create(const std::string& body, const ClientGone& client_gone) const {
  CompletionRequest request = ReadRequest(body, context_);
  std::vector<EngineClient::NewRequest> engine_requests;
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    engine_requests.push_back(
        {request.request_id + "-" + std::to_string(i), request.prompts[i].ids, request.params[i], request.user});
  }
  auto group = std::make_unique<RequestGroup>(context_.engine(), std::move(engine_requests));
  const Tokenizer* tokenizer = context_.engine().tokenizer();
  if (request.stream.stream) {
    return {200, nullptr, std::make_shared<CompletionStream>(std::move(request), std::move(group), tokenizer)};
  }
  const std::vector<RequestOutput> outputs = PickBestOf(request, group->WaitAll(client_gone));
  return {200, ResponseJson(request, outputs, tokenizer), nullptr};
}

EngineRequestsOfBody ReadCompletionBody(const std::string& body, const ServingContext& context) {
  const CompletionRequest request = ReadRequest(body, context);
  EngineRequestsOfBody out;
  for (const Prompt& prompt : request.prompts) out.prompt_ids.push_back(prompt.ids);
  out.params = request.params;
  return out;
}

}  // namespace vllm::openai
