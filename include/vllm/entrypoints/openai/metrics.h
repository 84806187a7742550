// GET /metrics: the engine's statistics in Prometheus' text format, under vLLM's metric
// names, each labelled with model_name:
//   gauges      vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc (0..1)
//   counters    vllm:num_preemptions_total, vllm:prompt_tokens_total, vllm:generation_tokens_total,
//               vllm:request_success_total{finished_reason="stop|length|abort|error"}
//   histograms  vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds,
//               vllm:e2e_request_latency_seconds, vllm:request_prompt_tokens,
//               vllm:request_generation_tokens
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
  explicit PrometheusStatLogger(const std::string& model_name);

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
  mutable std::mutex mutex_;
  EngineStats scheduler_stats_;
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
  std::map<std::string, int64_t> request_success_total_;  // by finished_reason
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram e2e_request_latency_;
  Histogram request_prompt_tokens_;
  Histogram request_generation_tokens_;
};

}  // namespace vllm::openai
