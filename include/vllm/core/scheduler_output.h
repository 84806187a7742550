// SchedulerOutput: the only contract from the scheduler to the worker.
//
// One engine step computes, for each scheduled request, a chunk of its tokens:
// positions [num_computed_tokens, num_computed_tokens + token_ids.size()). Decodes
// (one token) come first, then prompt chunks. The model runner turns this into
// batch metadata (positions, slot_mapping, block tables, ...); nothing else
// flows from the scheduler to the worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vllm/core/request.h"

namespace vllm {

struct ScheduledRequest {
  std::string req_id;
  const Request* request = nullptr;  // read-only: sampling params and token history
  std::vector<int32_t> token_ids;    // the tokens computed this step
  int64_t num_computed_tokens = 0;   // tokens already in the cache before this step
  std::vector<int32_t> block_ids;    // the request's whole block table
  int32_t state_slot = -1;           // recurrent-state slot, -1 when the model has none
  // True when the recurrent state must start from zero (a new or recomputed
  // sequence); attention needs no such flag (its cache is addressed by position).
  bool is_new_sequence = false;
  // True when this chunk ends at the request's last known token: a new token is sampled.
  bool samples = false;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  int64_t total_num_scheduled_tokens = 0;
  int64_t num_decodes = 0;  // the first num_decodes entries are single-token decodes
  std::vector<std::string> preempted_req_ids;

  bool empty() const { return scheduled.empty(); }
};

}  // namespace vllm
