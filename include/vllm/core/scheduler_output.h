// SchedulerOutput: the only contract from the scheduler to the worker, as vLLM
// v1's (vllm/v1/core/sched/output.py). It is a value: nothing in it points into
// the scheduler's state.
//
// A request crosses in full once, the first time it is scheduled (NewRequestData);
// the worker keeps its own copy of it (token history, block table, state slot).
// Later steps send only what changed (CachedRequestData): the tokens appended
// since it was last sent, the blocks added to its table and its
// num_computed_tokens. A request resumed after preemption gets its new block
// table and state slot whole. Requests that finished or were aborted since the
// previous step are named in finished_req_ids: the worker frees its state of them
// (before adding the step's new requests, so an id can be reused at once).
//
// Hybrid models with prefix caching also get the step's recurrent-state copies:
// state_snapshot_loads fill the slots of new sequences that start on a prefix hit
// (instead of zeroing them) before the forward; state_snapshot_saves copy slots
// into snapshots after it (state_snapshot_pool.h).
//
// Batch order: scheduled_cached_reqs, then scheduled_new_reqs, each in the order
// the scheduler took them (decodes, then prompt chunks, then admissions). Each of
// them computes num_scheduled_tokens.at(req_id) tokens of its history, starting at
// its num_computed_tokens; it samples when that reaches its last known token (its
// scheduled_spec_decode_tokens, when it has any, come after that token).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vllm/sample/sampling_params.h"

namespace vllm {

struct NewRequestData {
  std::string req_id;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling_params;
  std::vector<int32_t> eos_token_ids;  // empty when ignore_eos
  std::vector<int32_t> block_ids;      // its whole block table
  int32_t state_slot = -1;             // recurrent-state slot, -1 when the model has none
  int64_t num_computed_tokens = 0;     // tokens already in the cache (prefix-cache hits)
};

struct CachedRequestData {
  std::string req_id;
  // Preempted since it was last scheduled: new_block_ids is then its whole new
  // block table, state_slot its new slot, and its recurrent state restarts from zero.
  bool resumed_from_preemption = false;
  std::vector<int32_t> new_token_ids;  // tokens appended since it was last sent (sampled ones)
  std::vector<int32_t> new_block_ids;  // blocks appended to its table (all of them when resumed)
  int32_t state_slot = -1;             // when resumed: the slot taken again (-1: the model has none)
  int64_t num_computed_tokens = 0;
};

// One copy between a request's state slot and a state snapshot.
struct StateSnapshotCopy {
  int32_t state_slot = -1;
  int32_t snapshot = -1;
};

struct SchedulerOutput {
  std::vector<NewRequestData> scheduled_new_reqs;
  std::vector<CachedRequestData> scheduled_cached_reqs;
  std::unordered_map<std::string, int64_t> num_scheduled_tokens;  // req_id -> tokens computed this step
  int64_t total_num_scheduled_tokens = 0;
  std::vector<std::string> preempted_req_ids;  // preempted during this schedule()
  std::vector<std::string> finished_req_ids;   // finished since the previous schedule()
  std::vector<StateSnapshotCopy> state_snapshot_loads;  // snapshot -> slot, before the forward
  std::vector<StateSnapshotCopy> state_snapshot_saves;  // slot -> snapshot, after the forward
  // Constrained decoding (structured_output_manager.h): row i of grammar_bitmask
  // ([rows, grammar_bitmask_words] uint32, token_bitmask layout) holds the tokens the
  // request structured_output_request_ids maps to i may sample this step.
  std::unordered_map<std::string, int32_t> structured_output_request_ids;
  std::vector<uint32_t> grammar_bitmask;
  int32_t grammar_bitmask_words = 0;
  // Set while grammar_bitmask (already sized) is being filled by other threads (a
  // GPU engine's manager fills it while the forward runs): call it before reading
  // the words; it returns once they are written (again: at once). Empty: filled.
  std::function<void()> await_grammar_bitmask;
  // Speculative decoding (vLLM's name): the draft tokens each request verifies this
  // step. They follow its last known token in the batch and are counted in its
  // num_scheduled_tokens; the step samples a token at the last known token and at
  // every draft (1 + drafts rows).
  std::unordered_map<std::string, std::vector<int32_t>> scheduled_spec_decode_tokens;

  bool empty() const { return num_scheduled_tokens.empty(); }
  // The scheduled requests' ids in batch order (views into this output).
  std::vector<std::string_view> req_ids_in_batch_order() const;
};

}  // namespace vllm
