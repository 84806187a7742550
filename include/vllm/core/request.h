// A request and its lifecycle, in vLLM v1's terms.
//
//   WAITING --schedule--> RUNNING --stop/length/abort--> FINISHED_*
//      ^                     |
//      +---- PREEMPTED <-----+  (pages ran out: everything is freed and the
//                               request is recomputed later from its tokens)
//
// num_tokens() = prompt + output tokens so far; num_computed_tokens counts those
// whose KV (and recurrent state) the model has processed. Each step schedules a
// chunk of the difference; there is no separate prefill/decode phase.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vllm/sample/sampling_params.h"

namespace vllm {

enum class RequestStatus {
  kWaiting,
  kRunning,
  kPreempted,
  kFinishedStopped,  // EOS, a stop token or a stop string
  kFinishedLength,   // max_tokens, or the model's context length
  kFinishedAborted,
};

const char* RequestStatusName(RequestStatus status);
bool IsFinished(RequestStatus status);
// vLLM's finish_reason strings: "stop", "length", "abort" ("" while unfinished).
const char* FinishReason(RequestStatus status);

using BlockHash = uint64_t;

struct StructuredOutputRequest;  // engine/structured_output_manager.h

class Request {
 public:
  Request(std::string req_id, std::vector<int32_t> prompt_token_ids, SamplingParams sampling_params,
          std::vector<int32_t> eos_token_ids, int64_t arrival_order);

  const std::string req_id;
  const std::vector<int32_t> prompt_token_ids;
  const SamplingParams sampling_params;
  const std::vector<int32_t> eos_token_ids;  // empty when ignore_eos
  const int64_t arrival_order;               // admission order; the newest is preempted first

  RequestStatus status = RequestStatus::kWaiting;
  int64_t num_computed_tokens = 0;
  int64_t num_preemptions = 0;
  // How many of its tokens the worker has been sent (SchedulerOutput); 0 until it is
  // first scheduled, when it goes across whole as NewRequestData.
  int64_t num_sent_tokens = 0;
  // Hashes of the request's full blocks (prefix caching), extended as tokens arrive.
  std::vector<BlockHash> block_hashes;
  // Its grammar matcher when sampling_params.structured_outputs is set (the engine's;
  // the worker's copy of the request has none).
  std::shared_ptr<StructuredOutputRequest> structured_output_request;
  // Speculative decoding: draft tokens proposed after its last step, verified by the
  // next one (vLLM's spec_token_ids). Not part of its history until accepted.
  std::vector<int32_t> spec_token_ids;

  const std::vector<int32_t>& all_token_ids() const { return all_token_ids_; }
  const std::vector<int32_t>& output_token_ids() const { return output_token_ids_; }
  int64_t num_tokens() const { return static_cast<int64_t>(all_token_ids_.size()); }
  int64_t num_prompt_tokens() const { return static_cast<int64_t>(prompt_token_ids.size()); }
  int64_t num_output_tokens() const { return static_cast<int64_t>(output_token_ids_.size()); }

  void AppendOutputToken(int32_t token_id);

 private:
  std::vector<int32_t> all_token_ids_;
  std::vector<int32_t> output_token_ids_;
};

}  // namespace vllm
