// DataParallelEngine (engine/data_parallel_engine.h): replicas in one process behind
// one EngineClient. Concurrent request groups from several threads all finish with
// the tokens one engine gives; new groups go to the replica with the fewest in
// flight; statistics are the replicas' sums.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "vllm/engine/data_parallel_engine.h"
#include "vllm/testing/engine_requests.h"

namespace vllm {
namespace {

EngineConfig Config() {
  EngineConfig c;
  c.model = std::string(VT_TEST_DATA_DIR) + "/models/qwen35_moe/hf";
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 256;
  c.block_size = 4;
  c.num_gpu_blocks_override = 256;
  c.state_snapshot_memory = 8 << 20;  // a few snapshots, not the default 0.5 GiB a rank
  c.num_threads = 1;
  c.on_log = [](const std::string&) {};
  return c;
}

std::vector<std::unique_ptr<LLMEngine>> Replicas(int n) {
  std::vector<std::unique_ptr<LLMEngine>> replicas;
  for (int i = 0; i < n; ++i) replicas.push_back(std::make_unique<LLMEngine>(Config()));
  return replicas;
}

SamplingParams Greedy(int64_t max_tokens) { return testing::GreedyParams(max_tokens); }

std::vector<int32_t> Prompt(int i) { return {static_cast<int32_t>(1 + i), 7, static_cast<int32_t>(40 + 3 * i), 2}; }

// Runs `n` single-request groups from n threads at once; the tokens of each by id.
std::map<std::string, std::vector<int32_t>> RunConcurrently(EngineClient& engine, int n) {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::mutex mutex;
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      auto queue = std::make_shared<OutputQueue>();
      const std::string id = "r" + std::to_string(i);
      engine.AddRequests({{.request_id = id, .prompt_token_ids = Prompt(i), .params = Greedy(16)}}, queue);
      while (std::optional<StreamItem> item = queue->Pop(std::chrono::seconds(60))) {
        ASSERT_FALSE(item->error) << *item->error;
        if (item->output.finished) {
          std::lock_guard lock(mutex);
          tokens[id] = item->output.token_ids;
          return;
        }
      }
      ADD_FAILURE() << id << " did not finish";
    });
  }
  for (std::thread& t : clients) t.join();
  return tokens;
}

TEST(DataParallelEngineTest, ConcurrentRequestsGetTheTokensOfOneEngine) {
  AsyncLLMEngine one(std::make_unique<LLMEngine>(Config()));
  const auto expected = RunConcurrently(one, 8);
  DataParallelEngine two(Replicas(2), nullptr, 1);
  const auto got = RunConcurrently(two, 8);
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(two.num_in_flight(0) + two.num_in_flight(1), 0);
  const EngineStats stats = two.stats();
  EXPECT_EQ(stats.num_kv_blocks, 2 * one.stats().num_kv_blocks);
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.max_model_len, one.max_model_len());
}

TEST(DataParallelEngineTest, NewRequestsGoToTheReplicaWithFewestInFlight) {
  DataParallelEngine engine(Replicas(2), nullptr, 1);
  auto queue = std::make_shared<OutputQueue>();
  // Long requests (they cannot finish while the next ones are sent): 2 and 2.
  for (int i = 0; i < 4; ++i) {
    engine.AddRequests({{.request_id = "long" + std::to_string(i), .prompt_token_ids = Prompt(i),
                         .params = Greedy(240)}},
                       queue);
  }
  EXPECT_EQ(engine.num_in_flight(0), 2);
  EXPECT_EQ(engine.num_in_flight(1), 2);
  // A group of three goes whole to one replica; the next single request to the other.
  std::vector<EngineClient::NewRequest> group;
  for (int i = 0; i < 3; ++i) group.push_back({.request_id = "g" + std::to_string(i), .prompt_token_ids = Prompt(i),
                                               .params = Greedy(240)});
  engine.AddRequests(std::move(group), queue);
  EXPECT_EQ(engine.num_in_flight(0), 5);
  engine.AddRequests({{.request_id = "next", .prompt_token_ids = Prompt(9), .params = Greedy(240)}}, queue);
  EXPECT_EQ(engine.num_in_flight(1), 3);
  // A rejected request is not counted.
  EXPECT_THROW(engine.AddRequests({{.request_id = "bad", .prompt_token_ids = {100000}, .params = Greedy(4)}}, queue),
               std::invalid_argument);
  EXPECT_EQ(engine.num_in_flight(0) + engine.num_in_flight(1), 8);
  engine.Abort({"long0", "long1", "g0", "g1", "g2", "long2", "long3", "next"});
  for (int attempt = 0; attempt < 6000 && engine.num_in_flight(0) + engine.num_in_flight(1) > 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine.num_in_flight(0) + engine.num_in_flight(1), 0);
}

TEST(DataParallelEngineTest, StatisticsAreTheReplicasSums) {
  EngineStats a, b;
  a.num_running = 2, a.num_waiting = 1, a.num_kv_blocks = 100, a.kv_cache_usage = 0.5, a.max_model_len = 256;
  a.prefix_cache_queries = 10, a.spec_decoding.num_accepted_tokens_per_pos = {3, 1};
  b.num_running = 1, b.num_waiting = 4, b.num_kv_blocks = 300, b.kv_cache_usage = 0.1, b.max_model_len = 128;
  b.prefix_cache_queries = 5, b.spec_decoding.num_accepted_tokens_per_pos = {2, 2, 1};
  const EngineStats sum = SumEngineStats({a, b});
  EXPECT_EQ(sum.num_running, 3);
  EXPECT_EQ(sum.num_waiting, 5);
  EXPECT_EQ(sum.num_kv_blocks, 400);
  EXPECT_DOUBLE_EQ(sum.kv_cache_usage, (50.0 + 30.0) / 400.0);
  EXPECT_EQ(sum.max_model_len, 128);
  EXPECT_EQ(sum.prefix_cache_queries, 15);
  EXPECT_EQ(sum.spec_decoding.num_accepted_tokens_per_pos, (std::vector<int64_t>{5, 3, 1}));
}

}  // namespace
}  // namespace vllm
