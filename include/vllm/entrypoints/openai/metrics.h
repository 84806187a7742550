// GET /metrics: the engine's statistics in Prometheus' text format, under vLLM's metric
// names, each labelled with model_name:
//   gauges      vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc (0..1),
//               vllm:state_snapshot_usage_perc (0..1: a hybrid model's pool of recurrent-state
//               snapshots; not a vLLM metric), vllm:cache_config_info (1, the cache configuration as labels)
//   counters    vllm:num_preemptions_total, vllm:prompt_tokens_total, vllm:generation_tokens_total,
//               vllm:request_success_total{finished_reason="stop|length|abort|error"},
//               vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total (tokens)
//   histograms  vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds,
//               vllm:e2e_request_latency_seconds, vllm:request_queue_time_seconds,
//               vllm:request_prefill_time_seconds, vllm:request_decode_time_seconds,
//               vllm:request_inference_time_seconds, vllm:request_prompt_tokens,
//               vllm:request_generation_tokens, vllm:iteration_tokens_total
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "vllm/engine/async_llm_engine.h"

namespace vllm::openai {

class PrometheusStatLogger : public StatLogger {
 public:
  // `cache_config`: the engine's stats at start (block size, blocks, prefix caching)
  // for vllm:cache_config_info; `max_num_batched_tokens` bounds the iteration buckets.
  PrometheusStatLogger(const std::string& model_name, const EngineStats& cache_config,
                       int64_t max_num_batched_tokens);

  // Called by the engine loop after every turn.
  void Record(const EngineStats& scheduler_stats, const IterationStats& iteration_stats) override;
  // The exposition text (Content-Type text/plain; version=0.0.4).
  std::string Render() const;

 private:
  struct Histogram {
    std::vector<double> bounds;  // upper bounds of the buckets, ascending; +Inf is implied
    std::vector<uint64_t> counts;
    double sum = 0;
    uint64_t count = 0;

    explicit Histogram(std::vector<double> upper_bounds);
    void Observe(double value);
  };
  void RenderHistogram(std::string& out, const char* name, const char* help, const Histogram& histogram) const;

  std::string labels_;  // model_name="..."
  std::string cache_config_labels_;
  mutable std::mutex mutex_;
  EngineStats scheduler_stats_;
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
  std::map<std::string, int64_t> request_success_total_;  // by finished_reason
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram e2e_request_latency_;
  Histogram request_queue_time_;
  Histogram request_prefill_time_;
  Histogram request_decode_time_;
  Histogram request_inference_time_;
  Histogram iteration_tokens_;
  Histogram request_prompt_tokens_;
  Histogram request_generation_tokens_;
};

}  // namespace vllm::openai
