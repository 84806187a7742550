// The server over several ranks or replicas: `--data-parallel-size 2` (in-process
// replicas) answers concurrent completions with the tokens of one engine, /metrics
// reads as one engine (the replicas' sums), and a bad size is refused naming the
// flag; with `--tensor-parallel-size 2`, a worker process that dies stops the server
// with the reason instead of leaving it to fail every request.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <thread>
#include <vector>

#include "server_fixture.h"
#include "vllm/distributed/gloo_communicator.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/testing/engine_requests.h"

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

TEST(ApiServerParallelTest, TwoReplicasAnswerConcurrentRequestsAsOneEngine) {
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

TEST(ApiServerParallelTest, ASizeOutOfRangeIsRefusedNamingTheFlag) {
  try {
    RunServeCommand({std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf", "--data-parallel-size", "0"});
    FAIL() << "--data-parallel-size 0 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--data-parallel-size must be in [1, 64], got 0"), std::string::npos)
        << e.what();
  }
}

TEST(ApiServerParallelTest, AServerWhoseTensorParallelWorkerDiesStopsWithTheReason) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  const std::vector<pid_t> before = testing::ChildProcesses();
  EngineConfig config = testing::ServerEngineConfig();
  config.tensor_parallel_size = 2;
  config.tensor_parallel_worker_program = VLLM_CPP_BINARY;
  TestServer server(config);
  std::vector<pid_t> workers;
  for (pid_t pid : testing::ChildProcesses()) {
    if (std::find(before.begin(), before.end(), pid) == before.end()) workers.push_back(pid);
  }
  ASSERT_EQ(workers.size(), 1u);
  server.PostOk("/v1/completions", Body(0));
  ASSERT_EQ(kill(workers[0], SIGKILL), 0);
  ASSERT_TRUE(testing::WaitUntilExited(workers[0]));  // the next step sees it gone (no collective with it)
  httplib::Result res = server.Post("/v1/completions", Body(1));
  if (res) {
    EXPECT_NE(res->status, 200) << res->body;
  }
  for (int attempt = 0; attempt < 500 && !server.engine_dead(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(server.engine_dead());
  EXPECT_NE(server.engine_dead()->find("the engine died: a tensor-parallel step failed"), std::string::npos)
      << *server.engine_dead();
  EXPECT_NE(server.engine_dead()->find("has exited (killed by signal 9)"), std::string::npos) << *server.engine_dead();
  EXPECT_FALSE(server.Client().Get("/health")) << "the server still answers";
}

}  // namespace
}  // namespace vllm
