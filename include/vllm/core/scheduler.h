// The scheduler: one token budget per step, continuous batching, chunked prefill,
// preemption by recompute (vLLM v1's policy, FCFS).
//
// schedule() runs three phases:
//   1. running decodes (one token each),
//   2. running prompt chunks that continue an earlier chunk,
//   3. waiting requests (new or preempted), admitted while the budget, max_num_seqs
//      and free memory allow (with prefix-cache hits when enabled); on a hybrid
//      model with prefix caching, one whose prompt a running request is still
//      computing is skipped until that one's state snapshot can be shared.
// For hybrid models with prefix caching, a prompt chunk ends at the request's next
// state checkpoint (kv_cache_manager.h), and the output lists the state snapshots
// to restore before the step and to save after it.
// When pages run out in phases 1-2, the newest running request not yet scheduled
// this step is preempted (pages and state slot freed, recomputed later); waiting
// requests never preempt. The output names each scheduled request whole the first
// time and by its deltas afterwards (scheduler_output.h). update_from_output()
// appends sampled tokens and applies the stop rules (max_tokens, EOS, stop token
// ids, max_model_len); the requests that finish are named in the next output's
// finished_req_ids.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/kv_cache_manager.h"
#include "vllm/core/request.h"
#include "vllm/core/scheduler_output.h"

namespace vllm {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // the token budget of one step
  int64_t max_num_seqs = 256;
  int64_t max_model_len = 4096;
  bool enable_chunked_prefill = true;
  // Speculative decoding: KV slots allocated past each scheduled chunk for the
  // drafter's positions (vLLM's num_lookahead_tokens; num_speculative_tokens).
  int64_t num_lookahead_tokens = 0;
};

// Speculative decoding counters, cumulative (vLLM's SpecDecodingStats).
struct SpecDecodingStats {
  int64_t num_drafts = 0;           // requests that verified drafts, summed over steps
  int64_t num_draft_tokens = 0;     // draft tokens verified
  int64_t num_accepted_tokens = 0;  // of those, accepted
  std::vector<int64_t> num_accepted_tokens_per_pos;  // [i]: drafts accepted at position i
};

// What one step did to a request, for the engine's outputs.
struct RequestUpdate {
  std::string req_id;
  std::vector<int32_t> new_token_ids;
  RequestStatus status = RequestStatus::kRunning;
  bool finished() const { return IsFinished(status); }
};

class Scheduler {
 public:
  // `hash_block_tokens`: the prefix cache's block hash (kv_cache_manager.h).
  Scheduler(const SchedulerConfig& config, const KVCacheConfig& cache_config,
            BlockHashFn hash_block_tokens = HashBlockTokens);

  // Takes ownership. Throws std::invalid_argument when the request can never run
  // (prompt at or beyond max_model_len, or more pages than the whole cache has).
  void add_request(std::unique_ptr<Request> request);
  SchedulerOutput schedule();
  std::vector<RequestUpdate> update_from_output(const SchedulerOutput& output,
                                                const std::unordered_map<std::string, int32_t>& sampled_token_ids);
  // With speculative decoding: each request's tokens of the step, in order (the
  // accepted drafts, then the token sampled after them; one token without drafts).
  // A request's computed tokens drop by its rejected drafts; its tokens are appended
  // up to the first that stops it.
  std::vector<RequestUpdate> update_from_sampled_tokens(
      const SchedulerOutput& output, const std::unordered_map<std::string, std::vector<int32_t>>& sampled_token_ids);
  // The drafter's proposals for running requests' next steps (vLLM's
  // update_draft_token_ids); ids that finished meanwhile are ignored.
  void update_draft_token_ids(const std::unordered_map<std::string, std::vector<int32_t>>& draft_token_ids);
  const SpecDecodingStats& spec_decoding_stats() const { return spec_stats_; }
  // Ends requests early (abort, or a stop string found by the detokenizer) and
  // frees everything they hold. Unknown or already finished ids are ignored.
  void finish_requests(const std::vector<std::string>& req_ids, RequestStatus status);

  bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const Request* get_request(const std::string& req_id) const;
  const KVCacheManager& kv_cache_manager() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  struct StepState;
  void ScheduleRunning(StepState& step, bool decodes);
  void ScheduleWaiting(StepState& step);
  // Admits a waiting request with its prefix-cache hit; false (it stays waiting)
  // when the token budget or memory is short.
  bool TryAdmit(StepState& step, Request& request);
  // Parallel samples of a prompt (n > 1, best_of) on a hybrid model: whether the
  // waiting request should wait for a running one with the same prompt that has not
  // reached the prompt's last block boundary yet. Its state snapshot there is
  // found only from the step after it is taken; waiting for it saves recomputing
  // the prompt, at the cost of starting a step or more later. No deadlock: the
  // request waited for is running, so each step schedules it before admitting any
  // (preempted, it is waiting and no longer waited for).
  bool WaitsForSibling(const Request& request) const;
  // num_new tokens after num_computed, cut at the request's next state checkpoint.
  int64_t ChunkSize(const Request& request, int64_t num_computed, int64_t num_new) const;
  // How many of the request's draft tokens fit this step (budget, max_tokens,
  // max_model_len); the rest are dropped.
  int64_t NumDraftsToVerify(const Request& request, int64_t token_budget) const;
  // KV slots past a chunk of num_new tokens for the drafter (SchedulerConfig).
  int64_t Lookahead(const Request& request, int64_t num_new) const;
  // Preempts the newest running request not yet scheduled this step (possibly `current`).
  Request* PreemptNewest(StepState& step, Request* current);
  // Adds the request to the step's output (whole the first time, else its deltas)
  // and charges the budget; new_block_ids are the blocks allocate_slots appended.
  void RecordScheduled(StepState& step, Request& request, int64_t num_new_tokens, std::vector<int32_t> new_block_ids,
                       bool admitted);
  // The tokens the worker has not been sent yet; marks them sent.
  static std::vector<int32_t> TakeUnsentTokens(Request& request);
  std::optional<RequestStatus> CheckStop(const Request& request, int32_t token) const;
  void Free(Request& request, RequestStatus status);

  SchedulerConfig config_;
  KVCacheManager kv_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order
  std::vector<std::string> finished_req_ids_;  // since the last schedule(), for the worker
  int64_t num_preemptions_ = 0;
  SpecDecodingStats spec_stats_;
};

}  // namespace vllm
