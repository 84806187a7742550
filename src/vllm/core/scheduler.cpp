#include "vllm/core/scheduler.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace vllm {

struct Scheduler::StepState {
  SchedulerOutput output;
  int64_t token_budget = 0;
  std::unordered_set<const Request*> scheduled;
  bool preempted_any = false;
};

Scheduler::Scheduler(const SchedulerConfig& config, const KVCacheConfig& cache_config, BlockHashFn hash_block_tokens)
    : config_(config), kv_(cache_config, hash_block_tokens) {
  if (config.max_num_batched_tokens < 1 || config.max_num_seqs < 1 || config.max_model_len < 1) {
    throw std::invalid_argument("max_num_batched_tokens, max_num_seqs and max_model_len must be >= 1");
  }
  if (!config.enable_chunked_prefill && config.max_num_batched_tokens < config.max_model_len) {
    throw std::invalid_argument("without chunked prefill, max_num_batched_tokens (" +
                                std::to_string(config.max_num_batched_tokens) + ") must be >= max_model_len (" +
                                std::to_string(config.max_model_len) + ")");
  }
}

void Scheduler::add_request(std::unique_ptr<Request> request) {
  const std::string& id = request->req_id;
  if (requests_.count(id)) throw std::invalid_argument("request id '" + id + "' is already in use");
  if (request->num_prompt_tokens() < 1) throw std::invalid_argument("request '" + id + "' has an empty prompt");
  if (request->num_prompt_tokens() >= config_.max_model_len) {
    throw std::invalid_argument("request '" + id + "': prompt of " + std::to_string(request->num_prompt_tokens()) +
                                " tokens is too long for max_model_len " + std::to_string(config_.max_model_len) +
                                " (the prompt plus at least one generated token must fit)");
  }
  const int64_t max_len =
      std::min(request->num_prompt_tokens() + request->sampling_params.max_tokens, config_.max_model_len);
  const int64_t bs = kv_.config().block_size;
  const int64_t needed = (max_len + bs - 1) / bs, usable = kv_.config().num_blocks - 1;
  if (needed > usable) {
    throw std::invalid_argument("request '" + id + "' may need " + std::to_string(needed) +
                                " KV cache blocks but the cache has " + std::to_string(usable) +
                                "; lower max_tokens or give the cache more blocks (--num-gpu-blocks-override)");
  }
  request->status = RequestStatus::kWaiting;
  waiting_.push_back(request.get());
  requests_.emplace(id, std::move(request));
}

std::vector<int32_t> Scheduler::TakeUnsentTokens(Request& r) {
  const std::vector<int32_t>& all = r.all_token_ids();
  std::vector<int32_t> unsent(all.begin() + r.num_sent_tokens, all.end());
  r.num_sent_tokens = r.num_tokens();
  return unsent;
}

void Scheduler::RecordScheduled(StepState& step, Request& r, int64_t num_new_tokens, std::vector<int32_t> new_block_ids,
                                bool admitted) {
  SchedulerOutput& out = step.output;
  if (r.num_sent_tokens == 0) {
    out.scheduled_new_reqs.push_back({.req_id = r.req_id,
                                      .prompt_token_ids = TakeUnsentTokens(r),
                                      .sampling_params = r.sampling_params,
                                      .eos_token_ids = r.eos_token_ids,
                                      .block_ids = std::move(new_block_ids),
                                      .state_slot = kv_.get_state_slot(r.req_id).value_or(-1),
                                      .num_computed_tokens = r.num_computed_tokens});
  } else {
    // An admitted request that was sent before was preempted: its table is all new.
    out.scheduled_cached_reqs.push_back({.req_id = r.req_id,
                                         .resumed_from_preemption = admitted,
                                         .new_token_ids = TakeUnsentTokens(r),
                                         .new_block_ids = std::move(new_block_ids),
                                         .state_slot = admitted ? kv_.get_state_slot(r.req_id).value_or(-1) : -1,
                                         .num_computed_tokens = r.num_computed_tokens});
  }
  if (!r.spec_token_ids.empty()) {
    // No state snapshot: the step's end state is known only once the drafts are
    // verified (the runner rolls it back to the last accepted one).
    out.scheduled_spec_decode_tokens[r.req_id] = r.spec_token_ids;
  } else if (std::optional<int32_t> snapshot = kv_.take_state_snapshot(r, r.num_computed_tokens + num_new_tokens)) {
    out.state_snapshot_saves.push_back({.state_slot = *kv_.get_state_slot(r.req_id), .snapshot = *snapshot});
  }
  out.num_scheduled_tokens[r.req_id] = num_new_tokens;
  step.scheduled.insert(&r);
  step.token_budget -= num_new_tokens;
}

Request* Scheduler::PreemptNewest(StepState& step, Request* current) {
  Request* victim = current;
  for (Request* r : running_) {
    if (!step.scheduled.count(r) && r->arrival_order > victim->arrival_order) victim = r;
  }
  kv_.free(*victim);
  victim->status = RequestStatus::kPreempted;
  victim->num_computed_tokens = 0;
  victim->spec_token_ids.clear();
  ++victim->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.push_front(victim);
  step.output.preempted_req_ids.push_back(victim->req_id);
  step.preempted_any = true;
  return victim;
}

int64_t Scheduler::ChunkSize(const Request& r, int64_t num_computed, int64_t num_new) const {
  const std::optional<int64_t> checkpoint = kv_.next_state_checkpoint(r, num_computed);
  return checkpoint ? std::min(num_new, *checkpoint - num_computed) : num_new;
}

int64_t Scheduler::NumDraftsToVerify(const Request& r, int64_t token_budget) const {
  // The step computes 1 + d tokens and may append d + 1: the request must stay within
  // max_tokens and max_model_len with all of them.
  const int64_t by_budget = token_budget - 1;
  const int64_t by_max_tokens = r.sampling_params.max_tokens - r.num_output_tokens() - 1;
  const int64_t by_model_len = config_.max_model_len - r.num_tokens() - 1;
  const int64_t n = std::min({static_cast<int64_t>(r.spec_token_ids.size()), by_budget, by_max_tokens, by_model_len});
  return std::max<int64_t>(n, 0);
}

int64_t Scheduler::Lookahead(const Request& r, int64_t num_new) const {
  // The drafter writes its KV at up to num_lookahead_tokens positions past the step's
  // chunk; never past max_model_len (it then drafts fewer).
  const int64_t end = r.num_computed_tokens + num_new;
  return std::clamp<int64_t>(config_.max_model_len - end, 0, config_.num_lookahead_tokens);
}

void Scheduler::ScheduleRunning(StepState& step, bool decodes) {
  // Iterate over a snapshot: preemption removes entries from running_.
  std::vector<Request*> candidates = running_;
  for (Request* r : candidates) {
    if (step.token_budget <= 0) return;
    if (r->status != RequestStatus::kRunning || step.scheduled.count(r)) continue;
    const int64_t remaining = r->num_tokens() - r->num_computed_tokens;
    if ((remaining == 1) != decodes || remaining < 1) continue;
    r->spec_token_ids.resize(decodes ? NumDraftsToVerify(*r, step.token_budget) : 0);
    const int64_t num_new = decodes ? 1 + static_cast<int64_t>(r->spec_token_ids.size())
                                    : ChunkSize(*r, r->num_computed_tokens, std::min(remaining, step.token_budget));
    std::optional<std::vector<int32_t>> new_blocks;
    while (!(new_blocks = kv_.allocate_slots(*r, num_new + Lookahead(*r, num_new)))) {
      if (PreemptNewest(step, r) == r) break;
    }
    if (!new_blocks) continue;
    RecordScheduled(step, *r, num_new, std::move(*new_blocks), /*admitted=*/false);
  }
}

bool Scheduler::WaitsForSibling(const Request& r) const {
  // Only a hybrid model's hit needs a snapshot, found from the step after it is
  // taken; the snapshot at the prompt's last boundary is taken only where chunks end
  // at checkpoints. An attention-only sibling shares the blocks within the step.
  if (!kv_.has_state_snapshots() || !config_.enable_chunked_prefill || r.num_output_tokens() > 0 ||
      r.sampling_params.prompt_logprobs) {
    return false;
  }
  const int64_t checkpoint = kv_.LastBoundaryBefore(r.num_prompt_tokens());
  if (checkpoint == 0) return false;
  // Cheap: running_ holds at most max_num_seqs requests, the computed-tokens test
  // leaves those still in their prompt, and == compares the sizes first.
  for (const Request* q : running_) {
    if (q->num_computed_tokens < checkpoint && q->num_output_tokens() == 0 &&
        q->prompt_token_ids == r.prompt_token_ids) {
      return true;
    }
  }
  return false;
}

bool Scheduler::TryAdmit(StepState& step, Request& r) {
  const ComputedBlocks hit = kv_.get_computed_blocks(r);
  const int64_t remaining = r.num_tokens() - hit.num_tokens;
  int64_t num_new = remaining;
  if (num_new > step.token_budget) {
    if (!config_.enable_chunked_prefill) return false;
    num_new = step.token_budget;
  }
  if (config_.enable_chunked_prefill) num_new = ChunkSize(r, hit.num_tokens, num_new);
  r.spec_token_ids.clear();
  std::optional<std::vector<int32_t>> block_ids =
      kv_.allocate_slots(r, num_new + Lookahead(r, hit.num_tokens + num_new - r.num_computed_tokens), hit.block_ids,
                         hit.num_tokens);
  if (!block_ids) return false;
  r.num_computed_tokens = hit.num_tokens;
  if (hit.state_snapshot >= 0) {
    step.output.state_snapshot_loads.push_back(
        {.state_slot = *kv_.get_state_slot(r.req_id), .snapshot = hit.state_snapshot});
  }
  r.status = RequestStatus::kRunning;
  running_.push_back(&r);
  RecordScheduled(step, r, num_new, std::move(*block_ids), /*admitted=*/true);
  return true;
}

void Scheduler::ScheduleWaiting(StepState& step) {
  // Deferred siblings keep their place at the head of the queue (vLLM's skipped
  // waiting requests); the first request that does not fit stops admission.
  std::deque<Request*> deferred;
  while (!waiting_.empty() && step.token_budget > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Request* r = waiting_.front();
    if (WaitsForSibling(*r)) {
      deferred.push_back(r);
    } else if (!TryAdmit(step, *r)) {
      break;
    }
    waiting_.pop_front();
  }
  waiting_.insert(waiting_.begin(), deferred.begin(), deferred.end());
}

SchedulerOutput Scheduler::schedule() {
  StepState step;
  step.token_budget = config_.max_num_batched_tokens;
  step.output.finished_req_ids = std::move(finished_req_ids_);
  finished_req_ids_.clear();
  kv_.commit_state_snapshots();  // the previous step wrote them
  ScheduleRunning(step, /*decodes=*/true);
  ScheduleRunning(step, /*decodes=*/false);
  // Like vLLM: no admissions in a step that had to preempt (memory is short).
  if (!step.preempted_any) ScheduleWaiting(step);
  step.output.total_num_scheduled_tokens = config_.max_num_batched_tokens - step.token_budget;
  return std::move(step.output);
}

std::optional<RequestStatus> Scheduler::CheckStop(const Request& r, int32_t token) const {
  // vLLM's order: the length cap wins when the last allowed token is also a stop token.
  const SamplingParams& p = r.sampling_params;
  if (r.num_output_tokens() >= p.max_tokens || r.num_tokens() >= config_.max_model_len) {
    return RequestStatus::kFinishedLength;
  }
  if (r.num_output_tokens() < p.min_tokens) return std::nullopt;
  auto contains = [token](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if ((!p.ignore_eos && contains(r.eos_token_ids)) || contains(p.stop_token_ids)) {
    return RequestStatus::kFinishedStopped;
  }
  return std::nullopt;
}

std::vector<RequestUpdate> Scheduler::update_from_output(
    const SchedulerOutput& output, const std::unordered_map<std::string, int32_t>& sampled_token_ids) {
  std::unordered_map<std::string, std::vector<int32_t>> tokens;
  for (const auto& [id, token] : sampled_token_ids) tokens[id] = {token};
  return update_from_sampled_tokens(output, tokens);
}

std::vector<RequestUpdate> Scheduler::update_from_sampled_tokens(
    const SchedulerOutput& output, const std::unordered_map<std::string, std::vector<int32_t>>& sampled_token_ids) {
  std::vector<RequestUpdate> updates;
  for (std::string_view id : output.req_ids_in_batch_order()) {
    auto it = requests_.find(std::string(id));
    if (it == requests_.end()) continue;  // aborted during the step
    Request& r = *it->second;
    if (r.status != RequestStatus::kRunning) continue;
    auto drafts = output.scheduled_spec_decode_tokens.find(r.req_id);
    const int64_t num_drafts =
        drafts == output.scheduled_spec_decode_tokens.end() ? 0 : static_cast<int64_t>(drafts->second.size());
    r.num_computed_tokens += output.num_scheduled_tokens.at(r.req_id) - num_drafts;
    r.spec_token_ids.clear();
    if (r.num_computed_tokens < r.num_tokens()) continue;  // a prompt chunk short of the end samples nothing
    auto sampled = sampled_token_ids.find(r.req_id);
    if (sampled == sampled_token_ids.end() || sampled->second.empty() ||
        static_cast<int64_t>(sampled->second.size()) > num_drafts + 1) {
      throw std::logic_error("update_from_output: request '" + r.req_id + "' needs 1 to " +
                             std::to_string(num_drafts + 1) + " sampled tokens, got " +
                             std::to_string(sampled == sampled_token_ids.end() ? 0 : sampled->second.size()));
    }
    const std::vector<int32_t>& tokens = sampled->second;
    const int64_t num_accepted = static_cast<int64_t>(tokens.size()) - 1;
    if (num_drafts > 0) {
      // The accepted drafts' KV (and, after the runner's rollback, state) is computed.
      r.num_computed_tokens += num_accepted;
      ++spec_stats_.num_drafts;
      spec_stats_.num_draft_tokens += num_drafts;
      spec_stats_.num_accepted_tokens += num_accepted;
      if (static_cast<int64_t>(spec_stats_.num_accepted_tokens_per_pos.size()) < num_drafts) {
        spec_stats_.num_accepted_tokens_per_pos.resize(num_drafts, 0);
      }
      for (int64_t i = 0; i < num_accepted; ++i) ++spec_stats_.num_accepted_tokens_per_pos[i];
    }
    RequestUpdate update{r.req_id, {}, RequestStatus::kRunning};
    for (int32_t token : tokens) {
      r.AppendOutputToken(token);
      update.new_token_ids.push_back(token);
      if (auto stop = CheckStop(r, token)) {
        update.status = *stop;
        break;
      }
    }
    if (update.finished()) {
      Free(r, update.status);
      requests_.erase(it);
    }
    updates.push_back(std::move(update));
  }
  return updates;
}

void Scheduler::update_draft_token_ids(const std::unordered_map<std::string, std::vector<int32_t>>& draft_token_ids) {
  for (const auto& [id, drafts] : draft_token_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second->status != RequestStatus::kRunning) continue;
    it->second->spec_token_ids = drafts;
  }
}

void Scheduler::Free(Request& r, RequestStatus status) {
  kv_.free(r);
  if (r.num_sent_tokens > 0) finished_req_ids_.push_back(r.req_id);  // the worker holds state of it
  r.status = status;
  running_.erase(std::remove(running_.begin(), running_.end(), &r), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), &r), waiting_.end());
}

void Scheduler::finish_requests(const std::vector<std::string>& req_ids, RequestStatus status) {
  for (const std::string& id : req_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Free(*it->second, status);
    requests_.erase(it);
  }
}

const Request* Scheduler::get_request(const std::string& req_id) const {
  auto it = requests_.find(req_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

}  // namespace vllm
