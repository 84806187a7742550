// The server's bounds under hostile input: prompt texts longer than --max-prompt-bytes
// are refused before they are tokenized, huge prompts leave no memory behind, and
// connections beyond --limit-concurrency get a 503 without disturbing the others.
#include <gtest/gtest.h>


#include "server_fixture.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::TestServer;

// What the error of a response says, and about which field.
struct Error {
  int status = 0;
  std::string message;
  json param;
};

Error ErrorOf(const httplib::Result& res) {
  if (!res) return {};
  const json body = json::parse(res->body, nullptr, false);
  if (!body.contains("error")) return {res->status, "no error in: " + res->body.substr(0, 200), nullptr};
  return {res->status, body["error"]["message"], body["error"]["param"]};
}

json Chat(const std::string& content) {
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"max_tokens", 2}};
}

TEST(ApiServerLimitsTest, PromptsPastMaxPromptBytesAreRefusedOnEveryEndpoint) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.max_prompt_bytes = 100;
  TestServer server(testing::ServerEngineConfig(), config);
  const std::string fits(100, 'a'), too_long(101, 'a');
  EXPECT_EQ(server.PostOk("/tokenize", {{"prompt", fits}})["count"], 50);  // "aa" is one token
  EXPECT_EQ(server.PostOk("/v1/completions", Greedy({{"prompt", fits}}, 2))["usage"]["completion_tokens"], 2);
  for (const auto& [path, body, param] : {std::tuple<std::string, json, std::string>{"/tokenize", {{"prompt", too_long}}, "prompt"},
                                          {"/v1/completions", {{"prompt", too_long}}, "prompt"},
                                          {"/v1/completions", {{"prompt", {"ab", too_long}}}, "prompt"},
                                          {"/v1/chat/completions", Chat(too_long), "messages"},
                                          {"/tokenize", {{"messages", Chat(too_long)["messages"]}}, "messages"}}) {
    const Error error = ErrorOf(server.Post(path, body));
    EXPECT_EQ(error.status, 400) << path << ": " << error.message;
    EXPECT_EQ(error.param, param) << path;
    EXPECT_NE(error.message.find("bytes, more than the 100 this server tokenizes (--max-prompt-bytes)"),
              std::string::npos)
        << path << ": " << error.message;
  }
}

// The default bound: no prompt of max_model_len tokens is longer than
// max_model_len x the longest token (<|im_start|>, 12 bytes, in the test tokenizer).
TEST(ApiServerLimitsTest, TheDefaultMaxPromptBytesComesFromMaxModelLenAndTheLongestToken) {
  TestServer server;  // max_model_len 256
  const Error error = ErrorOf(server.Post("/v1/completions", {{"prompt", std::string(2 * 256 * 12 + 1, 'a')}}));
  EXPECT_EQ(error.status, 400);
  EXPECT_NE(error.message.find("more than the 6144 this server tokenizes (--max-prompt-bytes, by default 2 x "
                               "max_model_len 256 x the longest token's 12 bytes)"),
            std::string::npos)
      << error.message;
  // At the bound the prompt is tokenized, and found too long in tokens.
  const Error at_bound = ErrorOf(server.Post("/v1/completions", {{"prompt", std::string(2 * 256 * 12, 'a')}}));
  EXPECT_NE(at_bound.message.find("However, you requested 3072 tokens in the prompt"), std::string::npos)
      << at_bound.message;
}

// The attack: 16 MB single-word prompts, each on a new connection (so on
// another HTTP thread), all tokenized (the bound is raised past them) and refused as too
// long. The tokenizer's scratch for such a piece is ~20 bytes a byte; none of it may stay.
TEST(ApiServerLimitsTest, HugePromptsOnNewConnectionsLeaveNoMemoryBehind) {
  if (testing::kSanitizedAllocator) GTEST_SKIP() << "a sanitizer's allocator keeps freed memory";
  openai::ServerConfig config = testing::QuietServerConfig();
  config.max_prompt_bytes = int64_t{32} << 20;
  TestServer server(testing::ServerEngineConfig(), config);
  const std::string body = json{{"prompt", std::string(size_t{16} << 20, 'a')}}.dump();
  server.PostOk("/v1/completions", Greedy({{"prompt", "warm up"}}, 2));
  const int64_t before = testing::ResidentBytes();
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) {
    const Error error = ErrorOf(server.Client().Post("/v1/completions", body, "application/json"));
    ASSERT_EQ(error.status, 400) << error.message;
    ASSERT_NE(error.message.find("maximum context length is 256 tokens"), std::string::npos) << error.message;
  }
  const int64_t growth = testing::ResidentBytes() - before;
  RecordProperty("resident_growth_bytes", std::to_string(growth));  // in --gtest_output=xml
  EXPECT_LT(growth, int64_t{100} << 20) << "resident memory grew by " << (growth >> 20) << " MiB over " << kRequests
                                        << " prompts of 16 MiB";
}

TEST(ApiServerLimitsTest, ConnectionsPastLimitConcurrencyGet503AndTheOthersGoOn) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.limit_concurrency = 2;
  EngineConfig engine = testing::ServerEngineConfig();
  engine.max_model_len = 4096;
  engine.num_gpu_blocks_override = 1024;
  TestServer server(engine, config);
  // Two streams that run far longer than the test hold both connections.
  json long_stream = Greedy({{"prompt", "hello"}}, 4000);
  long_stream["stream"] = true;
  std::vector<std::unique_ptr<testing::RawConnection>> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(std::make_unique<testing::RawConnection>(server.port()));
    ASSERT_TRUE(streams.back()->Post("/v1/completions", long_stream.dump()));
    ASSERT_TRUE(streams.back()->ReadUntil("data: ")) << "stream " << i << " did not start";
  }
  const Error refused = ErrorOf(server.Post("/v1/completions", Greedy({{"prompt", "hi"}}, 2)));
  EXPECT_EQ(refused.status, 503) << refused.message;
  EXPECT_NE(refused.message.find("--limit-concurrency of 2 connections"), std::string::npos) << refused.message;
  // The streams were not disturbed.
  for (auto& stream : streams) EXPECT_TRUE(stream->ReadUntil("data: ", stream->Count("data: ") + 1));
  // Once the streams' clients leave, their connections are served again.
  streams.clear();
  ASSERT_TRUE(server.WaitUntilIdle());
  int status = 0;
  for (int attempt = 0; attempt < 500 && status != 200; ++attempt) {
    httplib::Result res = server.Post("/v1/completions", Greedy({{"prompt", "hi"}}, 2));
    status = res ? res->status : 0;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace vllm
