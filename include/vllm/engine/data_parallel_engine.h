// Data parallelism in one process (vLLM's --data-parallel-size on one host): D engine
// replicas, each a whole model with its own engine loop (AsyncLLMEngine), caches and
// CPU thread pool (or its own GPU), behind one EngineClient for the server.
//
//   AddRequests(group)  -> the replica with the fewest requests in flight (sent and
//                          not yet finished; ties: the lower index), the whole group
//   Abort / AbortAll    -> every replica (a replica ignores ids it does not hold)
//   stats(), the StatLogger -> summed over the replicas (kv_cache_usage weighted by
//                          their pages), so /metrics and the log lines read as one engine
//
// A replica that fails a step fails its own requests (AsyncLLMEngine's rule); the
// others go on. Replicas share nothing but the process: C++ threads run their steps
// in parallel (no interpreter lock), each on its own pool (vt::SetNumThreadsForThisThread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "vllm/engine/async_llm_engine.h"

namespace vllm {

// The sum of replicas' statistics (counts added, kv_cache_usage weighted by pages,
// per-position acceptance added position by position).
EngineStats SumEngineStats(const std::vector<EngineStats>& replicas);

class DataParallelEngine final : public EngineClient {
 public:
  // Starts a loop per replica, each running its CPU kernels on cpu_threads_per_replica
  // threads of its own (0: the process's pool). `stat_logger` (may be null) must
  // outlive this object. Throws std::invalid_argument for no replica or replicas of
  // different models (vocabularies or lengths).
  // `on_engine_dead`: as AsyncLLMEngine's, for any replica (called with its index in
  // the message).
  DataParallelEngine(std::vector<std::unique_ptr<LLMEngine>> replicas, StatLogger* stat_logger,
                     int cpu_threads_per_replica, std::function<void(const std::string&)> on_engine_dead = {});
  ~DataParallelEngine() override;

  void AddRequests(std::vector<NewRequest> requests, std::shared_ptr<OutputQueue> queue) override;
  void Abort(std::vector<std::string> request_ids) override;
  void AbortAll() override;
  const Tokenizer* tokenizer() const override { return replicas_.front()->tokenizer(); }
  const EngineConfig& config() const override { return replicas_.front()->config(); }
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t vocab_size() const override { return replicas_.front()->vocab_size(); }
  EngineStats stats() const override;
  void Shutdown() override;

  int64_t num_replicas() const { return static_cast<int64_t>(replicas_.size()); }
  // Requests sent to replica i and not yet finished (what the balancer compares).
  int64_t num_in_flight(size_t replica) const;

 private:
  // Each replica's logger: records its finished requests and hands the summed
  // statistics to the server's logger (one replica at a time).
  class ReplicaStatLogger;

  std::vector<std::unique_ptr<ReplicaStatLogger>> loggers_;  // before replicas_: outlives their loops
  std::vector<std::unique_ptr<AsyncLLMEngine>> replicas_;
  StatLogger* stat_logger_;
  int64_t max_model_len_ = 0;
  mutable std::mutex mutex_;
  std::vector<int64_t> sent_;              // requests sent to replica i; guarded by mutex_
  std::vector<int64_t> finished_;          // of those, finished; guarded by mutex_
  std::vector<EngineStats> latest_stats_;  // each replica's last recorded; guarded by mutex_
};

}  // namespace vllm
