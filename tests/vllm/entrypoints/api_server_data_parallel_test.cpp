// `vllm-cpp serve --data-parallel-size 2` in-process: concurrent completions over two
// engine replicas give the tokens of one engine, /metrics reads as one engine (the
// replicas' sums), and a bad size is refused naming the flag.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "server_fixture.h"
#include "vllm/entrypoints/commands.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::TestServer;

json Body(int i) {
  return {{"prompt", "request number " + std::to_string(i)},
          {"max_tokens", 12},
          {"temperature", 0},
          {"ignore_eos", true},
          {"return_token_ids", true}};
}

// The completion token ids of 8 requests sent at once.
std::vector<json> RunConcurrently(const TestServer& server) {
  std::vector<json> ids(8);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] { ids[i] = server.PostOk("/v1/completions", Body(i))["choices"][0]["token_ids"]; });
  }
  for (std::thread& t : clients) t.join();
  return ids;
}

TEST(ApiServerDataParallelTest, TwoReplicasAnswerConcurrentRequestsAsOneEngine) {
  std::vector<json> expected;
  {
    TestServer one;
    expected = RunConcurrently(one);
  }
  TestServer two(testing::ServerEngineConfig(), testing::QuietServerConfig(), 2);
  EXPECT_EQ(RunConcurrently(two), expected);
  ASSERT_TRUE(two.WaitUntilIdle());
  EXPECT_EQ(two.Metric("vllm:request_success_total", "finished_reason=\"length\""), 8) << "counted once, over both";
  EXPECT_EQ(two.Metric("vllm:generation_tokens_total"), 8 * 12);
}

TEST(ApiServerDataParallelTest, ASizeOutOfRangeIsRefusedNamingTheFlag) {
  try {
    RunServeCommand({std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf", "--data-parallel-size", "0"});
    FAIL() << "--data-parallel-size 0 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--data-parallel-size must be in [1, 64], got 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vllm
