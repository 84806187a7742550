// The server's log lines about requests and load (vLLM's LoggingStatLogger and request
// logging), written through a sink (stderr by default):
//   request cmpl-1f0c...-0 finished (length): 12 prompt + 16 output tokens, queue 0.001 s,
//     TTFT 0.052 s, e2e 0.310 s, user "alice"
//   Avg prompt throughput: 120.0 tokens/s, Avg generation throughput: 55.3 tokens/s,
//     Running: 3 reqs, Waiting: 0 reqs, KV cache usage: 4.2%, Prefix cache hit rate: 37.5%
// A request whose client left ends "(abort)". The second line comes at most once per
// interval, and only for an interval in which the engine worked.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "vllm/engine/async_llm_engine.h"

namespace vllm::openai {

class LoggingStatLogger : public StatLogger {
 public:
  using Sink = std::function<void(const std::string&)>;
  // `log_requests`: a line per finished request; `log_stats`: the throughput line every `interval`.
  LoggingStatLogger(Sink sink, bool log_requests, bool log_stats, std::chrono::milliseconds interval);

  void Record(const EngineStats& scheduler_stats, const IterationStats& iteration_stats) override;

 private:
  void LogStats(const EngineStats& stats, std::chrono::steady_clock::time_point now);
  static std::string SpecDecodingLine(const SpecDecodingStats& now, const SpecDecodingStats& before);

  Sink sink_;
  bool log_requests_;
  bool log_stats_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point interval_start_ = std::chrono::steady_clock::now();
  int64_t num_prompt_tokens_ = 0;      // in this interval
  int64_t num_generation_tokens_ = 0;  // in this interval
  bool worked_ = false;                // an engine step ran in this interval
  int64_t prefix_cache_queries_ = 0;   // cumulative, at the interval's start
  int64_t prefix_cache_hits_ = 0;
  SpecDecodingStats spec_decoding_;  // at the interval's start
};

}  // namespace vllm::openai
