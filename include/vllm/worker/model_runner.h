// The model runner: SchedulerOutput -> batch metadata -> ModelRegistry::Forward
// -> sampler. It owns the caches and keeps no per-request state of its own
// besides the sampler's generators.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/scheduler_output.h"
#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"
#include "vllm/sample/sampler.h"

namespace vllm {

// Prompt logprobs computed in one step for one request: entries[i] scores prompt
// token first_position + i (given the tokens before it); the top-K plus that token.
struct PromptLogprobsChunk {
  int64_t first_position = 1;
  std::vector<TokenLogprobs> entries;
};

struct RunnerOutput {
  std::unordered_map<std::string, SampleResult> sampled;  // requests that sampled this step
  std::unordered_map<std::string, PromptLogprobsChunk> prompt_logprobs;
};

class ModelRunner {
 public:
  ModelRunner(const Model& model, ModelCaches caches, int64_t block_size, uint64_t seed);

  RunnerOutput Execute(const SchedulerOutput& output);
  // Builds the batch (host metadata uploaded to the model's device); public for tests.
  ForwardBatch PrepareBatch(const SchedulerOutput& output) const;
  void ReleaseRequest(const std::string& req_id) { sampler_.Release(req_id); }
  const ModelCaches& caches() const { return caches_; }

 private:
  void ResetStateSlots(const SchedulerOutput& output) const;

  const Model& model_;
  ModelCaches caches_;
  int64_t block_size_;
  Sampler sampler_;
};

}  // namespace vllm
