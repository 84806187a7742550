// Runs a model the way the engine does, for end-to-end model tests:
//
//   LoadModel -> ModelRegistry::Create -> AllocateCaches -> Scheduler + ModelRunner
//
// GenerateGreedy submits prompts to a real Scheduler (token budget, chunked
// prefill, continuous batching), runs every step through ModelRunner::ExecuteModel
// (ModelRegistry::Forward) and SampleTokens (greedy), and records the logits the
// model computed at every prompt position and for every generated token, so a test
// can compare them with HF's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vllm/core/scheduler.h"
#include "vllm/worker/model_runner.h"

#include "vllm/core/block_pool.h"
#include "vllm/model_executor/model.h"
#include "vllm/model_loader/model_loader.h"
#include "vt/device.h"
#include "vt/dtype.h"

namespace vllm::testing {

struct HarnessOptions {
  vt::Device device = vt::kCpu;
  vt::DType activation_dtype = vt::DType::kF32;  // also the KV cache dtype
  int64_t block_size = 16;
  int64_t max_num_batched_tokens = 4096;  // the scheduler's token budget per step
  int64_t max_num_seqs = 16;
  int64_t num_blocks = 0;  // KV pages incl. the null block; 0 = enough for all requests at once
  // Ask for prompt logprobs, so the runner computes logits at every prompt
  // position; false: only the rows that sample (what a plain request computes).
  bool prompt_logits = true;
  bool enable_prefix_caching = false;
  BlockHashFn block_hash = HashBlockTokens;  // the prefix cache's block hash (tests inject colliding ones)
  // Hybrid models with prefix caching: recurrent-state snapshots and their interval.
  int32_t num_state_snapshots = 0;
  int32_t state_checkpoint_interval = 512;
  // Per prompt, the step before which it is submitted (empty: all before step 0).
  // A request that arrives later can hit the prefix cache of earlier ones.
  std::vector<int64_t> arrival_steps;
  // Per prompt (empty: prompt_logits for every prompt): whether it asks for prompt
  // logprobs (such requests skip the prefix-cache lookup, as in vLLM).
  std::vector<bool> prompt_logits_per_prompt;
  // Per prompt, the step before which it is aborted (empty or -1: never); an aborted
  // request keeps the outputs it had.
  std::vector<int64_t> abort_steps;
};

// The model of `loaded` on options.device with options.activation_dtype.
std::unique_ptr<Model> CreateModel(const LoadedModel& loaded, const HarnessOptions& options);

struct RequestTrace {
  std::vector<int32_t> prompt_ids;
  // [prompt_len, vocab]: row p = the logits computed at position p (NaN if never computed).
  std::vector<float> prompt_logits;
  // [max_tokens, vocab]: row i = the logits output token i was sampled from.
  std::vector<float> decode_logits;
  std::vector<int32_t> output_ids;
  std::vector<int64_t> chunk_sizes;  // tokens scheduled for this request, step by step
  // The sizes of the chunks that computed prompt tokens (the first num_prompt tokens).
  std::vector<int64_t> PromptChunkSizes() const;
};

struct GenerateStats {
  int64_t num_steps = 0;
  int64_t num_mixed_steps = 0;  // steps holding decodes and prompt chunks together
  int64_t max_seqs_in_step = 0;
  int64_t num_preemptions = 0;
  int64_t num_tokens_computed = 0;  // tokens the model runner forwarded (prefix hits are not)
  int64_t prefix_cache_hits = 0;    // tokens found in the prefix cache
};

struct GenerateResult {
  std::vector<RequestTrace> requests;  // in prompt order
  GenerateStats stats;
};

// A scheduler and a model runner kept across runs, so that a later run finds the
// prefix cache of earlier ones (the next turn of a chat). Pages: options.num_blocks,
// or enough for max_num_seqs sequences of max_model_len tokens.
class GreedySession {
 public:
  GreedySession(const Model& model, const HarnessOptions& options, int64_t max_model_len);
  // GenerateGreedy's run in this session (request ids continue across runs).
  GenerateResult Run(const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens);
  const Scheduler& scheduler() const { return scheduler_; }

 private:
  const Model& model_;
  HarnessOptions options_;
  Scheduler scheduler_;
  ModelRunner runner_;
  int64_t next_request_ = 0;
};

// Greedy generation of max_tokens tokens (EOS ignored) for every prompt, submitted
// in the given order (at once, or at options.arrival_steps); runs until every
// request has finished.
GenerateResult GenerateGreedy(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                              int64_t max_tokens, const HarnessOptions& options);

}  // namespace vllm::testing
