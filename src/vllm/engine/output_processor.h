// Turns per-step token updates into RequestOutputs: incremental detokenization,
// stop strings (which end a request early), and the accumulation of logprobs and
// prompt logprobs (deduplicated when a preempted request recomputes its prompt).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/request.h"
#include "vllm/engine/request_output.h"
#include "vllm/tokenizer/detokenizer.h"
#include "vllm/worker/model_runner.h"

namespace vllm {

class OutputProcessor {
 public:
  explicit OutputProcessor(std::optional<Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}

  void AddRequest(const std::string& request_id, const std::vector<int32_t>& prompt_ids,
                  const SamplingParams& params);
  // Records prompt logprobs computed this step (before tokens are processed).
  void AddPromptLogprobs(const std::string& request_id, const PromptLogprobsChunk& chunk);
  // New tokens for a request. Returns the stop string that ended it, if any (the
  // caller then finishes the request in the scheduler).
  std::optional<std::string> AddTokens(const std::string& request_id, const std::vector<int32_t>& token_ids,
                                       const TokenLogprobs* logprobs);
  // Marks the request finished and returns its output; forgets it afterwards.
  RequestOutput Finish(const std::string& request_id, const std::string& finish_reason);
  // The request's output so far (new_* fields: what arrived since the last call).
  RequestOutput Snapshot(const std::string& request_id);
  // Forgets the request without building its output (nothing when it is unknown).
  void Abort(const std::string& request_id);
  bool Has(const std::string& request_id) const { return states_.count(request_id) > 0; }

 private:
  struct State {
    RequestOutput output;
    SamplingParams params;
    std::unique_ptr<IncrementalDetokenizer> detokenizer;
    size_t reported_tokens = 0;
    size_t reported_text = 0;
    bool prompt_reported = false;  // kDelta: the prompt went out with the first output
    size_t longest_stop = 0;  // bytes of the longest of params.stop
  };
  std::optional<std::string> FindStop(State& state) const;
  // Sets out's new_* fields (what arrived since the last report) and marks them
  // reported. Until the request finishes, the text's last (longest stop - 1) bytes
  // stay back: they may be the start of a stop string that the next token completes
  // (as vLLM's stop buffer), and a stream cannot take back what it sent.
  void ReportNew(State& state, RequestOutput& out, bool finished);
  // What the request's params.output_kind says an output holds now (the
  // finished/finish_reason/stop_reason fields are the caller's).
  RequestOutput Report(State& state, bool finished);

  std::optional<Tokenizer> tokenizer_;
  std::unordered_map<std::string, State> states_;
};

}  // namespace vllm
