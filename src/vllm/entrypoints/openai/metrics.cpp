#include "vllm/entrypoints/openai/metrics.h"

#include <cstdio>
#include <tuple>

namespace vllm::openai {
namespace {

// Label values escape backslash, double quote and newline (Prometheus' text format).
std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.10g", value);
  return text;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name + "{" + labels + "} " + Number(value) + "\n";
}

// 1, 2, 5, 10, 20, 50, ... up to `max` (vLLM's buckets for token counts).
std::vector<double> OneTwoFiveBuckets(int64_t max) {
  std::vector<double> bounds;
  for (double scale = 1;; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale > static_cast<double>(max)) return bounds;
      bounds.push_back(m * scale);
    }
  }
}

}  // namespace

PrometheusStatLogger::Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void PrometheusStatLogger::Histogram::Observe(double value) {
  size_t bucket = 0;
  while (bucket < bounds.size() && value > bounds[bucket]) ++bucket;
  ++counts[bucket];
  sum += value;
  ++count;
}

// Bucket bounds are vLLM's, so dashboards made for vLLM read these unchanged.
// vLLM's buckets of the request phase histograms.
std::vector<double> PhaseBuckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
          960.0, 1920.0, 7680.0};
}

// 1, 8, 16, 32, ... up to `max` (vLLM's iteration_tokens_total buckets).
std::vector<double> IterationBuckets(int64_t max) {
  std::vector<double> bounds = {1};
  for (double b = 8; b <= static_cast<double>(max); b *= 2) bounds.push_back(b);
  return bounds;
}

PrometheusStatLogger::PrometheusStatLogger(const std::string& model_name, const EngineStats& cache_config,
                                           int64_t max_num_batched_tokens)
    : labels_("model_name=\"" + EscapeLabel(model_name) + "\""),
      cache_config_labels_("block_size=\"" + std::to_string(cache_config.block_size) + "\",enable_prefix_caching=\"" +
                           (cache_config.prefix_caching ? "True" : "False") + "\",num_gpu_blocks=\"" +
                           std::to_string(cache_config.num_kv_blocks) + "\""),
      time_to_first_token_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                            1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      inter_token_latency_(
          {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_request_latency_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      request_queue_time_(PhaseBuckets()),
      request_prefill_time_(PhaseBuckets()),
      request_decode_time_(PhaseBuckets()),
      request_inference_time_(PhaseBuckets()),
      iteration_tokens_(IterationBuckets(max_num_batched_tokens)),
      request_prompt_tokens_(OneTwoFiveBuckets(1 << 20)),
      request_generation_tokens_(OneTwoFiveBuckets(1 << 20)) {
  for (const char* reason : {"stop", "length", "abort", "error"}) request_success_total_[reason] = 0;
}

void PrometheusStatLogger::Record(const EngineStats& scheduler_stats, const IterationStats& iteration) {
  std::lock_guard lock(mutex_);
  scheduler_stats_ = scheduler_stats;
  prompt_tokens_total_ += iteration.num_prompt_tokens;
  generation_tokens_total_ += iteration.num_generation_tokens;
  for (double s : iteration.time_to_first_tokens_s) time_to_first_token_.Observe(s);
  for (double s : iteration.inter_token_latencies_s) inter_token_latency_.Observe(s);
  if (iteration.stepped) {
    iteration_tokens_.Observe(static_cast<double>(iteration.num_prompt_tokens + iteration.num_generation_tokens));
  }
  for (const FinishedRequestStats& finished : iteration.finished_requests) {
    ++request_success_total_[finished.finish_reason];
    e2e_request_latency_.Observe(finished.e2e_latency_s);
    if (finished.scheduled) {
      request_queue_time_.Observe(finished.queue_time_s);
      request_inference_time_.Observe(finished.inference_time_s);
    }
    if (finished.got_first_token) {
      request_prefill_time_.Observe(finished.prefill_time_s);
      request_decode_time_.Observe(finished.decode_time_s);
    }
    request_prompt_tokens_.Observe(static_cast<double>(finished.num_prompt_tokens));
    request_generation_tokens_.Observe(static_cast<double>(finished.num_generation_tokens));
  }
}

void PrometheusStatLogger::RenderHistogram(std::string& out, const char* name, const char* help,
                                           const Histogram& histogram) const {
  Header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= histogram.bounds.size(); ++b) {
    cumulative += histogram.counts[b];
    const std::string le = b < histogram.bounds.size() ? Number(histogram.bounds[b]) : "+Inf";
    Sample(out, std::string(name) + "_bucket", "le=\"" + le + "\"," + labels_, static_cast<double>(cumulative));
  }
  Sample(out, std::string(name) + "_sum", labels_, histogram.sum);
  Sample(out, std::string(name) + "_count", labels_, static_cast<double>(histogram.count));
}

std::string PrometheusStatLogger::Render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  Header(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  Sample(out, "vllm:num_requests_running", labels_, static_cast<double>(scheduler_stats_.num_running));
  Header(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  Sample(out, "vllm:num_requests_waiting", labels_, static_cast<double>(scheduler_stats_.num_waiting));
  Header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  Sample(out, "vllm:kv_cache_usage_perc", labels_, scheduler_stats_.kv_cache_usage);
  // Not in vLLM (its hybrid prefix caching keeps states in enlarged KV blocks): the
  // pool of recurrent-state snapshots of a hybrid model (0 when it has none).
  const int64_t snapshots = scheduler_stats_.num_state_snapshots;
  Header(out, "vllm:state_snapshot_usage_perc", "gauge",
         "Recurrent-state snapshot pool usage of a hybrid model's prefix cache. 1 means 100 percent usage.");
  Sample(out, "vllm:state_snapshot_usage_perc", labels_,
         snapshots > 0 ? static_cast<double>(scheduler_stats_.num_state_snapshots_used) / static_cast<double>(snapshots)
                       : 0.0);
  Header(out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
  Sample(out, "vllm:cache_config_info", cache_config_labels_ + "," + labels_, 1);
  Header(out, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.");
  Sample(out, "vllm:prefix_cache_queries_total", labels_, static_cast<double>(scheduler_stats_.prefix_cache_queries));
  Header(out, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.");
  Sample(out, "vllm:prefix_cache_hits_total", labels_, static_cast<double>(scheduler_stats_.prefix_cache_hits));
  Header(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.");
  Sample(out, "vllm:num_preemptions_total", labels_, static_cast<double>(scheduler_stats_.num_preemptions));
  if (scheduler_stats_.speculative_decoding) {
    // vLLM's SpecDecodingProm counters (registered only with speculative decoding).
    const SpecDecodingStats& spec = scheduler_stats_.spec_decoding;
    Header(out, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.");
    Sample(out, "vllm:spec_decode_num_drafts_total", labels_, static_cast<double>(spec.num_drafts));
    Header(out, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.");
    Sample(out, "vllm:spec_decode_num_draft_tokens_total", labels_, static_cast<double>(spec.num_draft_tokens));
    Header(out, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.");
    Sample(out, "vllm:spec_decode_num_accepted_tokens_total", labels_, static_cast<double>(spec.num_accepted_tokens));
    Header(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Accepted tokens per draft position.");
    for (size_t pos = 0; pos < spec.num_accepted_tokens_per_pos.size(); ++pos) {
      Sample(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position=\"" + std::to_string(pos) + "\"," + labels_,
             static_cast<double>(spec.num_accepted_tokens_per_pos[pos]));
    }
  }
  Header(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  Sample(out, "vllm:prompt_tokens_total", labels_, static_cast<double>(prompt_tokens_total_));
  Header(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  Sample(out, "vllm:generation_tokens_total", labels_, static_cast<double>(generation_tokens_total_));
  Header(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const auto& [reason, count] : request_success_total_) {
    Sample(out, "vllm:request_success_total", "finished_reason=\"" + EscapeLabel(reason) + "\"," + labels_,
           static_cast<double>(count));
  }
  const std::tuple<const char*, const char*, const Histogram*> histograms[] = {
      {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &time_to_first_token_},
      {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &inter_token_latency_},
      {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &e2e_request_latency_},
      {"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", &request_queue_time_},
      {"vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
       &request_prefill_time_},
      {"vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", &request_decode_time_},
      {"vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
       &request_inference_time_},
      {"vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", &iteration_tokens_},
      {"vllm:request_prompt_tokens", "Number of prefill tokens processed.", &request_prompt_tokens_},
      {"vllm:request_generation_tokens", "Number of generation tokens processed.", &request_generation_tokens_},
  };
  for (const auto& [name, help, histogram] : histograms) RenderHistogram(out, name, help, *histogram);
  return out;
}

}  // namespace vllm::openai
