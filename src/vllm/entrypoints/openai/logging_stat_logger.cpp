#include "logging_stat_logger.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace vllm::openai {
namespace {

std::string Fixed(double value, const char* format) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string RequestLine(const FinishedRequestStats& r) {
  std::string line = "request " + r.request_id + " finished (" + r.finish_reason + "): " +
                     std::to_string(r.num_prompt_tokens) + " prompt + " + std::to_string(r.num_generation_tokens) +
                     " output tokens";
  if (r.scheduled) line += ", queue " + Fixed(r.queue_time_s, "%.3f") + " s";
  line += ", TTFT " + (r.got_first_token ? Fixed(r.time_to_first_token_s, "%.3f") + " s" : std::string("-"));
  line += ", e2e " + Fixed(r.e2e_latency_s, "%.3f") + " s";
  if (!r.user.empty()) {
    line += ", user " + nlohmann::json(r.user).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return line;
}

}  // namespace

LoggingStatLogger::LoggingStatLogger(Sink sink, bool log_requests, bool log_stats, std::chrono::milliseconds interval)
    : sink_(std::move(sink)), log_requests_(log_requests), log_stats_(log_stats), interval_(interval) {}

void LoggingStatLogger::Record(const EngineStats& stats, const IterationStats& iteration) {
  if (log_requests_) {
    for (const FinishedRequestStats& r : iteration.finished_requests) sink_(RequestLine(r));
  }
  if (!log_stats_) return;
  num_prompt_tokens_ += iteration.num_prompt_tokens;
  num_generation_tokens_ += iteration.num_generation_tokens;
  worked_ = worked_ || iteration.stepped;
  const auto now = std::chrono::steady_clock::now();
  if (now - interval_start_ >= interval_) LogStats(stats, now);
}

std::string LoggingStatLogger::SpecDecodingLine(const SpecDecodingStats& now, const SpecDecodingStats& before) {
  // vLLM's SpecDecodingLogging line over the interval.
  const int64_t drafts = now.num_drafts - before.num_drafts;
  const int64_t drafted = now.num_draft_tokens - before.num_draft_tokens;
  const int64_t accepted = now.num_accepted_tokens - before.num_accepted_tokens;
  std::string line = "SpecDecoding metrics: Mean acceptance length: " +
                     Fixed(drafts > 0 ? 1.0 + static_cast<double>(accepted) / static_cast<double>(drafts) : 0, "%.2f") +
                     ", Accepted: " + std::to_string(accepted) + " tokens, Drafted: " + std::to_string(drafted) +
                     " tokens, Per-position acceptance rate: ";
  for (size_t pos = 0; pos < now.num_accepted_tokens_per_pos.size(); ++pos) {
    const int64_t earlier = pos < before.num_accepted_tokens_per_pos.size() ? before.num_accepted_tokens_per_pos[pos] : 0;
    line += (pos ? ", " : "") +
            Fixed(drafts > 0 ? static_cast<double>(now.num_accepted_tokens_per_pos[pos] - earlier) / drafts : 0, "%.3f");
  }
  return line + ", Avg Draft acceptance rate: " +
         Fixed(drafted > 0 ? 100.0 * static_cast<double>(accepted) / static_cast<double>(drafted) : 0, "%.1f") + "%";
}

void LoggingStatLogger::LogStats(const EngineStats& stats, std::chrono::steady_clock::time_point now) {
  const double seconds = std::max(1e-9, std::chrono::duration<double>(now - interval_start_).count());
  if (worked_) {
    std::string line = "Avg prompt throughput: " + Fixed(static_cast<double>(num_prompt_tokens_) / seconds, "%.1f") +
                       " tokens/s, Avg generation throughput: " +
                       Fixed(static_cast<double>(num_generation_tokens_) / seconds, "%.1f") +
                       " tokens/s, Running: " + std::to_string(stats.num_running) +
                       " reqs, Waiting: " + std::to_string(stats.num_waiting) +
                       " reqs, KV cache usage: " + Fixed(100 * stats.kv_cache_usage, "%.1f") + "%";
    if (stats.prefix_caching) {
      const int64_t queries = stats.prefix_cache_queries - prefix_cache_queries_;
      const int64_t hits = stats.prefix_cache_hits - prefix_cache_hits_;
      line += ", Prefix cache hit rate: " +
              Fixed(queries > 0 ? 100.0 * static_cast<double>(hits) / static_cast<double>(queries) : 0, "%.1f") + "%";
    }
    sink_(line);
    if (stats.speculative_decoding) sink_(SpecDecodingLine(stats.spec_decoding, spec_decoding_));
  }
  interval_start_ = now;
  spec_decoding_ = stats.spec_decoding;
  num_prompt_tokens_ = num_generation_tokens_ = 0;
  worked_ = false;
  prefix_cache_queries_ = stats.prefix_cache_queries;
  prefix_cache_hits_ = stats.prefix_cache_hits;
}

}  // namespace vllm::openai
