// The model runner: SchedulerOutput -> batch metadata -> ModelRegistry::Forward
// -> sampler. It owns the caches and keeps no per-request state of its own
// besides the sampler's generators.
//
// One step is two phases, as in vLLM v1: ExecuteModel (state resets, batch,
// forward; returns the step's logits) and SampleTokens (sampler and prompt
// logprobs from those logits). Execute runs both, or the forward and a greedy
// argmax on the device when that is all the step's requests need.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/scheduler_output.h"
#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"
#include "vllm/sample/sampler.h"
#include "vllm/worker/decode_graphs.h"

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

// Which logits rows one scheduled request got: rows [first_row, first_row + num_rows)
// hold the logits computed at positions [first_position, first_position + num_rows)
// (each row predicts the token after its position). num_rows is q_len when the
// request wants prompt logprobs for this chunk, 1 when it only samples, else 0.
struct LogitsRows {
  int64_t first_row = 0;
  int64_t num_rows = 0;
  int64_t first_position = 0;
};

struct StepLogits {
  vt::Tensor logits;             // [N, vocab] f32 on the CPU
  std::vector<LogitsRows> rows;  // one per SchedulerOutput::scheduled entry, same order
};

class ModelRunner {
 public:
  // With `decode_graphs`, plain-greedy decode batches run as device graphs
  // (decode_graphs.h); the model's device must support them.
  ModelRunner(const Model& model, ModelCaches caches, int64_t block_size, uint64_t seed,
              std::optional<DecodeGraphOptions> decode_graphs = std::nullopt);
  ModelRunner(const ModelRunner&) = delete;  // the decode graphs hold the caches' addresses
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Both phases of one step. When every sampling request is plain greedy
  // (Sampler::IsPlainGreedy) and none scores its prompt, the tokens are one
  // vt::Argmax over the logits on the model's device and only they are copied
  // back (a GPU then never sends the [N, vocab] logits to the host).
  RunnerOutput Execute(const SchedulerOutput& output);
  // Zeroes the state slots of new sequences, builds the batch and runs the model.
  StepLogits ExecuteModel(const SchedulerOutput& output);
  // Samples (and scores prompt tokens) from ExecuteModel's logits of the same output.
  RunnerOutput SampleTokens(const SchedulerOutput& output, const StepLogits& logits);

  // Builds the batch (host metadata uploaded to the model's device); public for tests.
  ForwardBatch PrepareBatch(const SchedulerOutput& output) const;
  // The logits rows each scheduled request gets (PrepareBatch's logits_indices order).
  static std::vector<LogitsRows> PlanLogitsRows(const SchedulerOutput& output);
  void ReleaseRequest(const std::string& req_id) { sampler_.Release(req_id); }
  const ModelCaches& caches() const { return caches_; }

 private:
  void ResetStateSlots(const SchedulerOutput& output) const;
  // State resets, batch and forward: the step's [N, vocab] f32 logits on the model's device.
  vt::Tensor Forward(const SchedulerOutput& output, const std::vector<LogitsRows>& rows);
  static bool SamplesByArgmaxOnly(const SchedulerOutput& output);
  RunnerOutput ExecuteGreedy(const SchedulerOutput& output);
  // nullopt when the batch's graph could not be captured (the step then runs eagerly).
  std::optional<RunnerOutput> ExecuteGreedyGraph(const SchedulerOutput& output);
  // PrepareBatch with the logits rows already planned (PlanLogitsRows(output)).
  ForwardBatch PrepareBatch(const SchedulerOutput& output, const std::vector<LogitsRows>& plan) const;

  const Model& model_;
  ModelCaches caches_;
  int64_t block_size_;
  Sampler sampler_;
  std::unique_ptr<DecodeGraphs> decode_graphs_;  // null: every step runs eagerly
};

}  // namespace vllm
