// Tensor parallelism across hosts (torchrun's flags; executor/multiproc_executor.h),
// on one machine: ranks meeting through the TCP store form a Gloo group; an engine
// that is node 0 of 2 with a second node started as `vllm-cpp serve --node-rank 1`
// (a separate process, as on another host) gives the tokens of the one-rank engine,
// and node 1 leaves when node 0's engine stops; a node started for another model than
// node 0's fails naming both; the multi-node flags are refused where they could not
// take effect.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "vllm/distributed/gloo_communicator.h"
#include "vllm/distributed/tcp_store.h"
#include "vllm/engine/llm_engine.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/testing/engine_requests.h"

extern char** environ;

namespace vllm {
namespace {

std::string Model() { return std::string(VT_TEST_DATA_DIR) + "/models/qwen35_moe/hf"; }

// A port free a moment ago (the TCP store of the test's node 0 listens there next).
int FreePort() {
  TcpStoreServer probe(0);
  return probe.port();
}

TEST(MultiNodeTest, RanksMeetThroughTheTcpStore) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  TcpStoreServer store(0);
  constexpr int kRanks = 3;
  std::vector<std::vector<float>> results(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      try {
        std::unique_ptr<Communicator> group = CreateGlooCommunicator({.rank = r,
                                                                      .world_size = kRanks,
                                                                      .master_addr = "127.0.0.1",
                                                                      .master_port = store.port(),
                                                                      .timeout = std::chrono::seconds(30)});
        std::vector<float> values = {1.0f * (r + 1), 10.0f};
        group->AllReduceSum(values.data(), values.size());
        results[static_cast<size_t>(r)] = values;
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(results[static_cast<size_t>(r)], (std::vector<float>{6.0f, 30.0f})) << "rank " << r;
  }
}

EngineConfig Config(int64_t tp) {
  EngineConfig c;
  c.model = Model();
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 24;
  c.max_model_len = 128;
  c.block_size = 4;
  c.num_gpu_blocks_override = 128;
  c.state_snapshot_memory = 8 << 20;
  c.num_threads = 1;
  c.tensor_parallel_size = tp;
  c.tensor_parallel_worker_program = VLLM_CPP_BINARY;
  c.on_log = [](const std::string&) {};
  return c;
}

std::map<std::string, RequestOutput> Generate(const EngineConfig& config) {
  LLMEngine engine(config);
  engine.AddRequest("a", {1, 5, 9, 2, 30, 7, 7, 3, 11, 4}, testing::GreedyParams(10));
  engine.AddRequest("b", {25, 3}, testing::GreedyParams(10));
  return testing::RunToCompletion(engine);
}

pid_t Spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  return pid;
}

TEST(MultiNodeTest, TwoNodesGiveTheTokensOfOneRank) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  const auto one = Generate(Config(1));
  const int port = FreePort();
  // Node 1 first, as a host started before node 0 would: its rank waits for the store.
  const pid_t node1 = Spawn({VLLM_CPP_BINARY, "serve", Model(), "--tensor-parallel-size", "2", "--nnodes", "2",
                             "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)});
  EngineConfig config = Config(2);
  config.nnodes = 2;
  config.master_addr = "127.0.0.1";
  config.master_port = port;
  std::map<std::string, RequestOutput> two;
  try {
    two = Generate(config);
  } catch (const std::exception& e) {
    kill(node1, SIGKILL);
    waitpid(node1, nullptr, 0);
    FAIL() << e.what();
  }
  int status = 0;
  ASSERT_EQ(waitpid(node1, &status, 0), node1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "node 1 did not leave cleanly: status " << status;
  ASSERT_EQ(two.size(), one.size());
  for (const auto& [id, ref] : one) EXPECT_EQ(two.at(id).token_ids, ref.token_ids) << id;
}

TEST(MultiNodeTest, ANodeStartedForAnotherModelFailsNamingBoth) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  const int port = FreePort();
  const std::string other = std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf";
  const pid_t node1 = Spawn({VLLM_CPP_BINARY, "serve", other, "--tensor-parallel-size", "2", "--nnodes", "2",
                             "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)});
  EngineConfig config = Config(2);
  config.nnodes = 2;
  config.master_addr = "127.0.0.1";
  config.master_port = port;
  // Node 1's rank leaves when it sees node 0's model; node 0 fails at its next collective.
  EXPECT_ANY_THROW(Generate(config));
  int status = 0;
  ASSERT_EQ(waitpid(node1, &status, 0), node1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << "status " << status;
}

// RunServeCommand refuses these before it loads or starts anything.
std::string ServeError(std::vector<std::string> args) {
  args.insert(args.begin(), Model());
  try {
    RunServeCommand(args);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(MultiNodeTest, FlagsThatCouldNotTakeEffectAreRefused) {
  EXPECT_NE(ServeError({"--master-addr", "10.0.0.1"}).find("--master-addr is for --nnodes above 1"), std::string::npos);
  EXPECT_NE(ServeError({"--master-port", "4000"}).find("--master-port is for --nnodes above 1"), std::string::npos);
  EXPECT_NE(ServeError({"--nnodes", "2", "--tensor-parallel-size", "2"}).find("needs --master-addr"),
            std::string::npos);
  EXPECT_NE(ServeError({"--nnodes", "2", "--node-rank", "2", "--master-addr", "h"}).find("--node-rank must be in"),
            std::string::npos);
  EXPECT_NE(ServeError({"--nnodes", "0"}).find("--nnodes must be in [1, 64]"), std::string::npos);
  EXPECT_NE(ServeError({"--nnodes", "2", "--master-addr", "h", "--master-port", "0"}).find("--master-port must be"),
            std::string::npos);
  EXPECT_NE(ServeError({"--nnodes", "2", "--master-addr", "h", "--data-parallel-size", "2"})
                .find("--data-parallel-size with --nnodes"),
            std::string::npos);
  // Node 1 runs only ranks: node 0's engine and server flags are refused there.
  const std::string error = ServeError({"--tensor-parallel-size", "2", "--nnodes", "2", "--node-rank", "1",
                                        "--master-addr", "127.0.0.1", "--port", "8001"});
  EXPECT_NE(error.find("--port configures node 0's engine or server"), std::string::npos) << error;
}

TEST(MultiNodeTest, AnEngineOnOneNodeRefusesNodesWithoutTensorParallelism) {
  EngineConfig config = Config(1);
  config.nnodes = 2;
  try {
    LLMEngine engine(config);
    ADD_FAILURE() << "--nnodes 2 with one rank was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--nnodes 2 spreads the ranks of --tensor-parallel-size"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vllm
