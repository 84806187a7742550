// AsyncLLMEngine: the engine loop thread gives the synchronous engine's outputs, admits
// or rejects a batch of requests as a whole, aborts (pages freed), reports statistics,
// and survives a step that throws by failing only the requests then in flight.
#include "vllm/engine/async_llm_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "vllm/model_loader/safetensors.h"

namespace vllm {
namespace {

EngineConfig Config() {
  EngineConfig c;
  c.model = std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf";
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 256;
  c.num_gpu_blocks_override = 256;
  c.num_threads = 1;
  return c;
}

std::vector<int32_t> Prompt(int n, int32_t first) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((first + 7 * i) % 300);
  return ids;
}

SamplingParams Greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Drains `queue` until `count` requests finished; returns the items by request id.
std::map<std::string, std::vector<StreamItem>> Drain(OutputQueue& queue, size_t count) {
  std::map<std::string, std::vector<StreamItem>> items;
  size_t finished = 0;
  while (finished < count) {
    std::optional<StreamItem> item = queue.Pop(std::chrono::seconds(60));
    EXPECT_TRUE(item.has_value()) << "no output within a minute";
    if (!item) break;
    finished += item->error || item->output.finished;
    items[item->output.request_id].push_back(std::move(*item));
  }
  return items;
}

class RecordingStatLogger : public StatLogger {
 public:
  void Record(const EngineStats&, const IterationStats& iteration) override {
    std::lock_guard lock(mutex_);
    for (const auto& f : iteration.finished_requests) finish_reasons_.push_back(f.finish_reason);
  }
  std::vector<std::string> finish_reasons() const {
    std::lock_guard lock(mutex_);
    return finish_reasons_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> finish_reasons_;
};

bool WaitForNoRequests(const AsyncLLMEngine& engine) {
  for (int i = 0; i < 6000; ++i) {
    const EngineStats stats = engine.stats();
    if (stats.num_running == 0 && stats.num_waiting == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(AsyncLLMEngineTest, OutputsEqualTheSynchronousEngines) {
  const std::vector<std::vector<int32_t>> prompts = {Prompt(5, 1), Prompt(40, 2), Prompt(17, 3)};
  std::vector<std::vector<int32_t>> expected;
  {
    LLMEngine engine(Config());
    for (const auto& prompt : prompts) {
      engine.AddRequest("r", prompt, Greedy(12));
      while (engine.HasUnfinishedRequests()) {
        for (RequestOutput& out : engine.Step()) {
          if (out.finished) expected.push_back(out.token_ids);
        }
      }
    }
  }
  AsyncLLMEngine engine(std::make_unique<LLMEngine>(Config()));
  auto queue = std::make_shared<OutputQueue>();
  std::vector<AsyncLLMEngine::NewRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) requests.push_back({"r" + std::to_string(i), prompts[i], Greedy(12)});
  engine.AddRequests(std::move(requests), queue);
  auto items = Drain(*queue, prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<StreamItem>& stream = items["r" + std::to_string(i)];
    ASSERT_FALSE(stream.empty());
    std::vector<int32_t> concatenated;
    for (const StreamItem& item : stream) {
      EXPECT_FALSE(item.error.has_value());
      concatenated.insert(concatenated.end(), item.output.new_token_ids.begin(), item.output.new_token_ids.end());
    }
    EXPECT_TRUE(stream.back().output.finished);
    EXPECT_EQ(stream.back().output.token_ids, expected[i]) << "request " << i;
    EXPECT_EQ(concatenated, expected[i]) << "request " << i;
  }
}

TEST(AsyncLLMEngineTest, ARejectedBatchRunsNone) {
  AsyncLLMEngine engine(std::make_unique<LLMEngine>(Config()));
  auto queue = std::make_shared<OutputQueue>();
  std::vector<AsyncLLMEngine::NewRequest> batch = {{"good", Prompt(4, 1), Greedy(4)},
                                                   {"too-long", Prompt(300, 1), Greedy(4)}};
  EXPECT_THROW(engine.AddRequests(std::move(batch), queue), std::invalid_argument);
  // "good" was taken back: its id is free again and it is the only request that runs.
  engine.AddRequests({{"good", Prompt(4, 1), Greedy(4)}}, queue);
  auto items = Drain(*queue, 1);
  EXPECT_EQ(items.size(), 1u);
  EXPECT_EQ(items["good"].back().output.token_ids.size(), 4u);
}

TEST(AsyncLLMEngineTest, AbortFreesThePages) {
  RecordingStatLogger logger;
  AsyncLLMEngine engine(std::make_unique<LLMEngine>(Config()), &logger);
  auto queue = std::make_shared<OutputQueue>();
  engine.AddRequests({{"long", Prompt(8, 1), Greedy(240)}}, queue);
  ASSERT_TRUE(queue->Pop(std::chrono::seconds(60)).has_value());  // it runs
  engine.Abort({"long", "unknown-id"});
  ASSERT_TRUE(WaitForNoRequests(engine));
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
  EXPECT_EQ(logger.finish_reasons(), std::vector<std::string>{"abort"});
}

// Throws from the engine step number `fail_at` (counted from 1), once.
class FailingStepEngine : public AsyncLLMEngine {
 public:
  FailingStepEngine(std::unique_ptr<LLMEngine> engine, int fail_at, StatLogger* logger)
      : AsyncLLMEngine(std::move(engine), logger), fail_at_(fail_at) {}
  ~FailingStepEngine() override { Shutdown(); }

 protected:
  std::vector<RequestOutput> RunEngineStep(LLMEngine& engine) override {
    if (++steps_ == fail_at_) throw std::runtime_error("injected failure");
    return engine.Step();
  }

 private:
  std::atomic<int> steps_{0};
  int fail_at_;
};

TEST(AsyncLLMEngineTest, AFailingStepFailsTheRequestsInFlightAndTheLoopGoesOn) {
  RecordingStatLogger logger;
  FailingStepEngine engine(std::make_unique<LLMEngine>(Config()), 3, &logger);
  auto queue = std::make_shared<OutputQueue>();
  engine.AddRequests({{"a", Prompt(8, 1), Greedy(50)}, {"b", Prompt(9, 2), Greedy(50)}}, queue);
  auto failed = Drain(*queue, 2);
  for (const char* id : {"a", "b"}) {
    ASSERT_FALSE(failed[id].empty());
    ASSERT_TRUE(failed[id].back().error.has_value()) << id;
    EXPECT_NE(failed[id].back().error->find("injected failure"), std::string::npos);
  }
  ASSERT_TRUE(WaitForNoRequests(engine));
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
  engine.AddRequests({{"c", Prompt(8, 1), Greedy(5)}}, queue);
  auto after = Drain(*queue, 1);
  EXPECT_FALSE(after["c"].back().error.has_value());
  EXPECT_EQ(after["c"].back().output.token_ids.size(), 5u);
  ASSERT_TRUE(WaitForNoRequests(engine));
  EXPECT_EQ(logger.finish_reasons(), (std::vector<std::string>{"error", "error", "length"}));
}

}  // namespace
}  // namespace vllm
