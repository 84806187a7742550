#include "engine_harness.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "vllm/core/scheduler.h"
#include "vllm/model_executor/models/model_registry.h"
#include "vllm/worker/cache_engine.h"
#include "vllm/worker/model_runner.h"

namespace vllm::testing {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Copies the logits rows ExecuteModel gave each scheduled request into its trace.
void RecordLogits(const StepLogits& step, int64_t vocab, const std::unordered_map<std::string, size_t>& index,
                  std::vector<RequestTrace>& traces) {
  const float* logits = step.logits.data_ptr<float>();
  for (size_t b = 0; b < step.batch.requests.size(); ++b) {
    const BatchRequest& s = step.batch.requests[b];
    RequestTrace& trace = traces[index.at(s.req_id())];
    trace.chunk_sizes.push_back(s.num_scheduled_tokens);
    const LogitsRows& rows = step.rows[b];
    const int64_t prompt_len = static_cast<int64_t>(trace.prompt_ids.size());
    const int64_t max_tokens = static_cast<int64_t>(trace.decode_logits.size()) / vocab;
    for (int64_t i = 0; i < rows.num_rows; ++i) {
      const float* row = logits + (rows.first_row + i) * vocab;
      const int64_t pos = rows.first_position + i;
      if (pos < prompt_len) std::copy(row, row + vocab, trace.prompt_logits.begin() + pos * vocab);
      const int64_t decode = pos - (prompt_len - 1);
      if (decode >= 0 && decode < max_tokens) std::copy(row, row + vocab, trace.decode_logits.begin() + decode * vocab);
    }
  }
}

// One engine step: forward, record, sample, feed the tokens back.
void RunStep(ModelRunner& runner, Scheduler& scheduler, const SchedulerOutput& output, int64_t vocab,
             const std::unordered_map<std::string, size_t>& index, GenerateResult& result) {
  const StepLogits step = runner.ExecuteModel(output);
  RecordLogits(step, vocab, index, result.requests);
  const RunnerOutput ran = runner.SampleTokens(step);
  std::unordered_map<std::string, int32_t> sampled;
  for (const auto& [id, sample] : ran.sampled) sampled[id] = sample.token_id;
  for (const RequestUpdate& update : scheduler.update_from_output(output, sampled)) {
    std::vector<int32_t>& ids = result.requests[index.at(update.req_id)].output_ids;
    ids.insert(ids.end(), update.new_token_ids.begin(), update.new_token_ids.end());
  }
  GenerateStats& stats = result.stats;
  ++stats.num_steps;
  if (step.batch.num_decodes > 0 && step.batch.size() > step.batch.num_decodes) ++stats.num_mixed_steps;
  stats.max_seqs_in_step = std::max(stats.max_seqs_in_step, step.batch.size());
}

}  // namespace

std::vector<int64_t> RequestTrace::PromptChunkSizes() const {
  std::vector<int64_t> sizes;
  int64_t done = 0;
  for (size_t i = 0; i < chunk_sizes.size() && done < static_cast<int64_t>(prompt_ids.size()); ++i) {
    sizes.push_back(chunk_sizes[i]);
    done += chunk_sizes[i];
  }
  return sizes;
}

std::unique_ptr<Model> CreateModel(const LoadedModel& loaded, const HarnessOptions& options) {
  return ModelRegistry::Create(loaded, ModelOptions{options.device, options.activation_dtype});
}

namespace {

int64_t SessionBlocks(const HarnessOptions& options, int64_t max_model_len) {
  if (options.num_blocks > 0) return options.num_blocks;
  return 1 + options.max_num_seqs * CeilDiv(max_model_len, options.block_size);
}

int64_t SessionSlots(const Model& model, const HarnessOptions& options) {
  return HasRecurrentLayers(model.cache_spec()) ? options.max_num_seqs : 0;
}

}  // namespace

GreedySession::GreedySession(const Model& model, const HarnessOptions& options, int64_t max_model_len)
    : model_(model),
      options_(options),
      scheduler_({.max_num_batched_tokens = options.max_num_batched_tokens,
                  .max_num_seqs = options.max_num_seqs,
                  .max_model_len = max_model_len,
                  .enable_chunked_prefill = true},
                 {.block_size = static_cast<int32_t>(options.block_size),
                  .num_blocks = static_cast<int32_t>(SessionBlocks(options, max_model_len)),
                  .num_state_slots = static_cast<int32_t>(SessionSlots(model, options)),
                  .enable_prefix_caching = options.enable_prefix_caching,
                  .num_state_snapshots = options.num_state_snapshots,
                  .state_checkpoint_interval = options.state_checkpoint_interval},
                 options.block_hash),
      runner_(model,
              AllocateCaches(model.cache_spec(), SessionBlocks(options, max_model_len), options.block_size,
                             SessionSlots(model, options), options.activation_dtype, options.device,
                             options.num_state_snapshots),
              options.block_size, /*seed=*/0) {}

GenerateResult GreedySession::Run(const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens) {
  const int64_t vocab = model_.vocab_size();
  const int64_t computed_before = runner_.num_tokens_computed();
  const int64_t hits_before = scheduler_.kv_cache_manager().prefix_cache_hits();
  GenerateResult result;
  std::unordered_map<std::string, size_t> index;
  std::vector<std::string> ids;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestTrace trace;
    trace.prompt_ids = prompts[i];
    trace.prompt_logits.assign(prompts[i].size() * vocab, nan);
    trace.decode_logits.assign(max_tokens * vocab, nan);
    result.requests.push_back(std::move(trace));
    ids.push_back("req" + std::to_string(next_request_++));
    index[ids.back()] = i;
  }
  const int64_t preemptions_before = scheduler_.num_preemptions();
  size_t num_submitted = 0;
  for (int64_t step = 0; num_submitted < prompts.size() || scheduler_.has_unfinished_requests(); ++step) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int64_t arrival = options_.arrival_steps.empty() ? 0 : options_.arrival_steps.at(i);
      if (arrival != step) continue;
      SamplingParams params;
      params.temperature = 0;
      params.max_tokens = max_tokens;
      params.ignore_eos = true;
      const bool prompt_logits =
          options_.prompt_logits_per_prompt.empty() ? options_.prompt_logits : options_.prompt_logits_per_prompt.at(i);
      if (prompt_logits) params.prompt_logprobs = 0;
      scheduler_.add_request(
          std::make_unique<Request>(ids[i], prompts[i], params, std::vector<int32_t>{}, static_cast<int64_t>(i)));
      ++num_submitted;
    }
    for (size_t i = 0; i < options_.abort_steps.size(); ++i) {
      if (options_.abort_steps[i] == step) scheduler_.finish_requests({ids[i]}, RequestStatus::kFinishedAborted);
    }
    if (!scheduler_.has_unfinished_requests()) continue;  // waiting for a later arrival
    const SchedulerOutput output = scheduler_.schedule();
    if (output.empty()) throw std::logic_error("GenerateGreedy: the scheduler scheduled nothing");
    RunStep(runner_, scheduler_, output, vocab, index, result);
  }
  result.stats.num_preemptions = scheduler_.num_preemptions() - preemptions_before;
  result.stats.num_tokens_computed = runner_.num_tokens_computed() - computed_before;
  result.stats.prefix_cache_hits = scheduler_.kv_cache_manager().prefix_cache_hits() - hits_before;
  return result;
}

GenerateResult GenerateGreedy(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                              int64_t max_tokens, const HarnessOptions& options) {
  int64_t longest = 0, num_blocks = options.num_blocks;
  if (num_blocks == 0) {
    num_blocks = 1;
    for (const auto& p : prompts) num_blocks += CeilDiv(static_cast<int64_t>(p.size()) + max_tokens, options.block_size);
  }
  for (const auto& p : prompts) longest = std::max(longest, static_cast<int64_t>(p.size()));
  HarnessOptions sized = options;
  sized.num_blocks = num_blocks;
  sized.max_num_seqs = std::min(options.max_num_seqs, static_cast<int64_t>(prompts.size()));
  GreedySession session(model, sized, longest + max_tokens + 1);
  return session.Run(prompts, max_tokens);
}

}  // namespace vllm::testing
