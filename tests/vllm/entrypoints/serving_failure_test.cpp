// An exception inside the engine fails the affected requests with a 500 (a JSON error,
// or an error event closing the stream), not the process; the next request is served.
#include <gtest/gtest.h>

#include <atomic>

#include "server_fixture.h"
#include "vllm/entrypoints/openai/serving_chat.h"
#include "vllm/entrypoints/openai/serving_completion.h"

namespace vllm {
namespace {

using nlohmann::json;

// Every engine step while `failing` is set throws.
class FailingStepEngine : public AsyncLLMEngine {
 public:
  explicit FailingStepEngine(std::unique_ptr<LLMEngine> engine) : AsyncLLMEngine(std::move(engine)) {}
  ~FailingStepEngine() override { Shutdown(); }
  std::atomic<bool> failing{true};

 protected:
  std::vector<RequestOutput> RunEngineStep(LLMEngine& engine) override {
    if (failing) throw std::runtime_error("injected failure");
    return engine.Step();
  }
};

std::string Drain(openai::EventStream& stream) {
  std::string events;
  while (stream.Next(std::chrono::milliseconds(100), events)) {
  }
  return events;
}

TEST(ServingFailureTest, AnEngineFailureIsA500AndTheNextRequestIsServed) {
  FailingStepEngine engine(std::make_unique<LLMEngine>(testing::ServerEngineConfig()));
  openai::ServerConfig config;
  config.served_model_names = {"m"};
  openai::ServingContext context(engine, config);
  openai::ServingCompletion completion(context);
  openai::ServingChat chat(context);
  const json body = testing::Greedy({{"prompt", "hello"}}, 4);
  try {
    completion.Create(body.dump());
    ADD_FAILURE() << "the failed request was answered";
  } catch (const openai::OpenAIError& e) {
    EXPECT_EQ(e.status(), 500);
    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
  }
  json chat_body = testing::Greedy({{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}, 4);
  chat_body["stream"] = true;
  openai::ApiResponse streamed = chat.Create(chat_body.dump());
  ASSERT_TRUE(streamed.stream);
  const std::vector<json> events = testing::SseEvents(Drain(*streamed.stream));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["error"]["code"], 500) << events.back();

  engine.failing = false;
  const openai::ApiResponse ok = completion.Create(body.dump());
  EXPECT_EQ(ok.body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(ok.body["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace vllm
