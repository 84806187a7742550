#include "vllm/core/request.h"

namespace vllm {

const char* RequestStatusName(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kFinishedStopped: return "finished_stopped";
    case RequestStatus::kFinishedLength: return "finished_length";
    case RequestStatus::kFinishedAborted: return "finished_aborted";
  }
  return "unknown";
}

bool IsFinished(RequestStatus status) {
  return status == RequestStatus::kFinishedStopped || status == RequestStatus::kFinishedLength ||
         status == RequestStatus::kFinishedAborted;
}

const char* FinishReason(RequestStatus status) {
  switch (status) {
    case RequestStatus::kFinishedStopped: return "stop";
    case RequestStatus::kFinishedLength: return "length";
    case RequestStatus::kFinishedAborted: return "abort";
    default: return "";
  }
}

Request::Request(std::string id, std::vector<int32_t> prompt, SamplingParams params, std::vector<int32_t> eos,
                 int64_t arrival)
    : req_id(std::move(id)),
      prompt_token_ids(std::move(prompt)),
      sampling_params(std::move(params)),
      eos_token_ids(std::move(eos)),
      arrival_order(arrival),
      all_token_ids_(prompt_token_ids) {}

void Request::AppendOutputToken(int32_t token_id) {
  output_token_ids_.push_back(token_id);
  all_token_ids_.push_back(token_id);
}

}  // namespace vllm
