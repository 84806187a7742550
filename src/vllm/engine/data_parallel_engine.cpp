#include "vllm/engine/data_parallel_engine.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vllm {

EngineStats SumEngineStats(const std::vector<EngineStats>& replicas) {
  EngineStats sum = replicas.at(0);
  double used_blocks = sum.kv_cache_usage * static_cast<double>(sum.num_kv_blocks);
  for (size_t i = 1; i < replicas.size(); ++i) {
    const EngineStats& r = replicas[i];
    sum.num_running += r.num_running;
    sum.num_waiting += r.num_waiting;
    sum.num_preemptions += r.num_preemptions;
    used_blocks += r.kv_cache_usage * static_cast<double>(r.num_kv_blocks);
    sum.num_kv_blocks += r.num_kv_blocks;
    sum.num_state_slots += r.num_state_slots;
    sum.max_model_len = std::min(sum.max_model_len, r.max_model_len);
    sum.prefix_cache_queries += r.prefix_cache_queries;
    sum.prefix_cache_hits += r.prefix_cache_hits;
    sum.num_state_snapshots += r.num_state_snapshots;
    sum.num_state_snapshots_used += r.num_state_snapshots_used;
    sum.num_tokens_computed += r.num_tokens_computed;
    sum.spec_decoding.num_drafts += r.spec_decoding.num_drafts;
    sum.spec_decoding.num_draft_tokens += r.spec_decoding.num_draft_tokens;
    sum.spec_decoding.num_accepted_tokens += r.spec_decoding.num_accepted_tokens;
    std::vector<int64_t>& per_pos = sum.spec_decoding.num_accepted_tokens_per_pos;
    const std::vector<int64_t>& theirs = r.spec_decoding.num_accepted_tokens_per_pos;
    if (per_pos.size() < theirs.size()) per_pos.resize(theirs.size(), 0);
    for (size_t p = 0; p < theirs.size(); ++p) per_pos[p] += theirs[p];
    sum.structured_outputs.num_bitmask_steps += r.structured_outputs.num_bitmask_steps;
    sum.structured_outputs.num_bitmask_rows += r.structured_outputs.num_bitmask_rows;
    sum.structured_outputs.bitmask_seconds += r.structured_outputs.bitmask_seconds;
    sum.structured_outputs.bitmask_wait_seconds += r.structured_outputs.bitmask_wait_seconds;
    sum.structured_outputs.num_accepted_tokens += r.structured_outputs.num_accepted_tokens;
    sum.structured_outputs.accept_seconds += r.structured_outputs.accept_seconds;
  }
  sum.kv_cache_usage = sum.num_kv_blocks > 0 ? used_blocks / static_cast<double>(sum.num_kv_blocks) : 0;
  return sum;
}

class DataParallelEngine::ReplicaStatLogger final : public StatLogger {
 public:
  ReplicaStatLogger(DataParallelEngine& owner, size_t index) : owner_(owner), index_(index) {}
  void Record(const EngineStats& stats, const IterationStats& iteration) override {
    std::lock_guard lock(owner_.mutex_);
    owner_.finished_[index_] += static_cast<int64_t>(iteration.finished_requests.size());
    owner_.latest_stats_[index_] = stats;
    if (owner_.stat_logger_) owner_.stat_logger_->Record(SumEngineStats(owner_.latest_stats_), iteration);
  }

 private:
  DataParallelEngine& owner_;
  size_t index_;
};

DataParallelEngine::DataParallelEngine(std::vector<std::unique_ptr<LLMEngine>> replicas, StatLogger* stat_logger,
                                       int cpu_threads_per_replica,
                                       std::function<void(const std::string&)> on_engine_dead)
    : stat_logger_(stat_logger) {
  if (replicas.empty()) throw std::invalid_argument("data parallel: no engine replica");
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i]->model_config().vocab_size != replicas[0]->model_config().vocab_size) {
      throw std::invalid_argument("data parallel: replica " + std::to_string(i) + " runs another model than replica 0");
    }
  }
  sent_.assign(replicas.size(), 0);
  finished_.assign(replicas.size(), 0);
  for (const auto& r : replicas) latest_stats_.push_back(r->stats());
  max_model_len_ = SumEngineStats(latest_stats_).max_model_len;  // the shortest replica's
  for (size_t i = 0; i < replicas.size(); ++i) {
    loggers_.push_back(std::make_unique<ReplicaStatLogger>(*this, i));
    std::function<void(const std::string&)> on_dead;
    if (on_engine_dead) {
      on_dead = [on_engine_dead, i](const std::string& why) {
        on_engine_dead("data-parallel replica " + std::to_string(i) + ": " + why);
      };
    }
    replicas_.push_back(std::make_unique<AsyncLLMEngine>(std::move(replicas[i]), loggers_.back().get(),
                                                         cpu_threads_per_replica, std::move(on_dead)));
  }
}

DataParallelEngine::~DataParallelEngine() { Shutdown(); }

void DataParallelEngine::AddRequests(std::vector<NewRequest> requests, std::shared_ptr<OutputQueue> queue) {
  size_t best = 0;
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 1; i < replicas_.size(); ++i) {
      if (sent_[i] - finished_[i] < sent_[best] - finished_[best]) best = i;
    }
    sent_[best] += static_cast<int64_t>(requests.size());
  }
  const auto count = static_cast<int64_t>(requests.size());
  try {
    replicas_[best]->AddRequests(std::move(requests), std::move(queue));
  } catch (...) {
    std::lock_guard lock(mutex_);
    sent_[best] -= count;  // rejected: none of them runs there
    throw;
  }
}

void DataParallelEngine::Abort(std::vector<std::string> request_ids) {
  for (const auto& replica : replicas_) replica->Abort(request_ids);
}

void DataParallelEngine::AbortAll() {
  for (const auto& replica : replicas_) replica->AbortAll();
}

EngineStats DataParallelEngine::stats() const {
  std::vector<EngineStats> all;
  for (const auto& replica : replicas_) all.push_back(replica->stats());
  return SumEngineStats(all);
}

int64_t DataParallelEngine::num_in_flight(size_t replica) const {
  std::lock_guard lock(mutex_);
  return sent_.at(replica) - finished_.at(replica);
}

void DataParallelEngine::Shutdown() {
  for (const auto& replica : replicas_) replica->Shutdown();
}

}  // namespace vllm
