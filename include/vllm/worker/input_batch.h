// The worker's own view of requests: its per-request state, kept from one
// SchedulerOutput to the next, and one step's batch built from it.
//
// CachedRequestState (vLLM's name) is created from NewRequestData, updated from
// CachedRequestData (tokens appended, blocks appended, num_computed_tokens) and
// freed on finished_req_ids; nothing in it points into the scheduler. A step's
// InputBatch lists, in batch order, which requests compute which of their tokens:
//
//   request history  | t0 t1 ... t[c-1] | t[c] ... t[c+n-1] | t[c+n] ...
//                      in the cache       this step (n = num_scheduled_tokens)
//   c = state.num_computed_tokens; samples when c + n == history length.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vllm/core/request.h"
#include "vllm/core/scheduler_output.h"

namespace vllm {

struct CachedRequestState {
  // The worker's copy of the request: prompt, sampling parameters, EOS ids and the
  // token history the sampler reads (its scheduling fields are not used here).
  Request request;
  std::vector<int32_t> block_ids;  // its block table
  int32_t state_slot = -1;         // recurrent-state slot, -1 when the model has none
  int64_t num_computed_tokens = 0; // tokens in the cache before the current step
};

struct BatchRequest {
  const CachedRequestState* state = nullptr;  // the runner's, valid for this step
  int64_t num_scheduled_tokens = 0;
  // The recurrent state starts from zero this step (a new request, or one resumed
  // after preemption); attention needs no such flag (its cache is addressed by position).
  bool is_new_sequence = false;
  // Speculative decoding: drafts verified this step, computed after the last known
  // token at the next positions (counted in num_scheduled_tokens).
  std::vector<int32_t> draft_token_ids;

  const std::string& req_id() const { return state->request.req_id; }
  int64_t num_draft_tokens() const { return static_cast<int64_t>(draft_token_ids.size()); }
  // The known tokens computed this step (the drafts come after them).
  int64_t num_known_scheduled_tokens() const { return num_scheduled_tokens - num_draft_tokens(); }
  const Request& request() const { return state->request; }
  int64_t num_computed_tokens() const { return state->num_computed_tokens; }
  const std::vector<int32_t>& block_ids() const { return state->block_ids; }
  int32_t state_slot() const { return state->state_slot; }
  // The known tokens computed this step.
  std::span<const int32_t> token_ids() const {
    return std::span<const int32_t>(state->request.all_token_ids())
        .subspan(static_cast<size_t>(state->num_computed_tokens), static_cast<size_t>(num_known_scheduled_tokens()));
  }
  // This chunk ends at the request's last known token: a new token is sampled.
  bool samples() const { return num_computed_tokens() + num_known_scheduled_tokens() == state->request.num_tokens(); }
};

struct InputBatch {
  std::vector<BatchRequest> requests;  // batch order (scheduler_output.h)
  int64_t num_decodes = 0;             // leading requests with exactly one token this step
  // The step's state snapshot copies (scheduler_output.h): loads before the forward,
  // saves after it.
  std::vector<StateSnapshotCopy> state_snapshot_loads, state_snapshot_saves;

  bool empty() const { return requests.empty(); }
  int64_t size() const { return static_cast<int64_t>(requests.size()); }
};

}  // namespace vllm
