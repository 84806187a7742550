// The server's request and stats log lines (LoggingStatLogger) and the /metrics
// families of request phases, iterations, the prefix cache and the cache config.
#include <gtest/gtest.h>

#include <mutex>

#include "server_fixture.h"
#include "vllm/entrypoints/openai/metrics.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::TestServer;

class LogLines {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex_);
      lines_.push_back(line);
    };
  }
  // The first line holding every piece; "" when none does.
  std::string Find(const std::vector<std::string>& pieces) const {
    std::lock_guard lock(mutex_);
    for (const std::string& line : lines_) {
      if (std::all_of(pieces.begin(), pieces.end(),
                      [&](const std::string& p) { return line.find(p) != std::string::npos; })) {
        return line;
      }
    }
    return "";
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(ApiServerLogsTest, EachRequestIsLoggedWithItsTokensLatenciesReasonAndUser) {
  LogLines log;
  openai::ServerConfig config = testing::QuietServerConfig();
  config.log_requests = true;
  config.log_stats = true;
  config.stats_interval = std::chrono::milliseconds(0);
  config.on_log = log.Sink();
  TestServer server(testing::ServerEngineConfig(), config);
  const json res = server.PostOk("/v1/completions",
                                 Greedy({{"prompt", "hello"}, {"request_id", "logged"}, {"user", "alice"}}, 5));
  ASSERT_TRUE(server.WaitUntilIdle());
  const std::string prompt = std::to_string(res["usage"]["prompt_tokens"].get<int>());
  const std::string line = log.Find({"request cmpl-logged-0 finished (length): " + prompt + " prompt + 5 output tokens"});
  ASSERT_NE(line, "");
  EXPECT_NE(line.find("TTFT "), std::string::npos) << line;
  EXPECT_NE(line.find("e2e "), std::string::npos) << line;
  EXPECT_NE(line.find("user \"alice\""), std::string::npos) << line;
  // A stream whose client leaves is logged as aborted.
  server.LeaveAfter("/v1/completions", Greedy({{"prompt", "hi"}, {"stream", true}, {"request_id", "left"}}, 200), 2);
  ASSERT_TRUE(server.WaitUntilIdle());
  EXPECT_NE(log.Find({"request cmpl-left-0 finished (abort)"}), "");
  EXPECT_NE(log.Find({"Avg prompt throughput: ", "tokens/s, Avg generation throughput: ", "Running: ", "Waiting: ",
                      "KV cache usage: ", "Prefix cache hit rate: "}),
            "");
}

TEST(ApiServerLogsTest, MetricsOfPhasesIterationsThePrefixCacheAndTheCacheConfig) {
  TestServer server;
  const std::vector<int32_t> prompt(40, 65);  // two full blocks of 16, then 8 tokens
  server.PostOk("/v1/completions", Greedy({{"prompt", prompt}}, 3));
  server.PostOk("/v1/completions", Greedy({{"prompt", prompt}}, 3));
  ASSERT_TRUE(server.WaitUntilIdle());
  EXPECT_EQ(server.Metric("vllm:prefix_cache_queries_total"), 80);
  EXPECT_EQ(server.Metric("vllm:prefix_cache_hits_total"), 32);
  for (const char* phase : {"queue", "prefill", "decode", "inference"}) {
    EXPECT_EQ(server.Metric(std::string("vllm:request_") + phase + "_time_seconds_count"), 2) << phase;
  }
  // Each step computed tokens: at least the two prefills and the 2 x 2 decodes.
  EXPECT_GE(server.Metric("vllm:iteration_tokens_total_count"), 6);
  EXPECT_EQ(server.Metric("vllm:iteration_tokens_total_sum"), 2 * (40 + 3));  // vLLM counts whole prompts
  EXPECT_EQ(server.Metric("vllm:cache_config_info",
                          "block_size=\"16\",enable_prefix_caching=\"True\",num_gpu_blocks=\"512\""),
            1);
}

// vLLM's spec-decoding counters, only with speculative decoding.
TEST(ApiServerLogsTest, SpecDecodingCountersAppearWithSpeculativeDecodingOnly) {
  EngineStats stats;
  openai::PrometheusStatLogger plain("m", stats, 64);
  plain.Record(stats, {});
  EXPECT_EQ(plain.Render().find("spec_decode"), std::string::npos);
  stats.speculative_decoding = true;
  stats.spec_decoding = {.num_drafts = 10, .num_draft_tokens = 20, .num_accepted_tokens = 13,
                         .num_accepted_tokens_per_pos = {8, 5}};
  openai::PrometheusStatLogger spec("m", stats, 64);
  spec.Record(stats, {});
  const std::string text = spec.Render();
  for (const std::string line :
       {"vllm:spec_decode_num_drafts_total{model_name=\"m\"} 10", "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 20",
        "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 13",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\",model_name=\"m\"} 5"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace vllm
