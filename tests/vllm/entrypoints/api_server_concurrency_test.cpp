// Many clients at once: simultaneous greedy streams each get what they would get alone,
// and clients that close their connection mid-stream (or while a non-streaming request
// runs) have their requests aborted, their KV pages returned, and nobody else disturbed.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <latch>
#include <string>

#include "server_fixture.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::SseEvents;
using testing::TestServer;

struct Streamed {
  std::string text;
  std::vector<int32_t> ids;
  std::string finish_reason;
};

// The text, token ids and finish reason of a completions or chat SSE body.
Streamed Concatenate(const std::string& body) {
  Streamed out;
  for (const json& event : SseEvents(body)) {
    if (event["choices"].empty()) continue;
    const json& choice = event["choices"][0];
    out.text += choice.contains("delta") ? choice["delta"].value("content", "") : choice["text"].get<std::string>();
    if (choice.contains("token_ids")) {
      for (int32_t id : choice["token_ids"].get<std::vector<int32_t>>()) out.ids.push_back(id);
    }
    if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
  }
  return out;
}

// Odd requests are chats unless `completions_only`.
json Request(int i, int max_tokens, bool completions_only = false) {
  const std::string prompt = "request " + std::to_string(i) + " " + std::string(static_cast<size_t>(i % 7), 'a');
  if (i % 2 && !completions_only) {
    return Greedy({{"messages", json::array({{{"role", "user"}, {"content", prompt}}})}, {"return_token_ids", true}},
                  max_tokens);
  }
  return Greedy({{"prompt", prompt}, {"return_token_ids", true}}, max_tokens);
}

const char* PathOf(const json& body) { return body.contains("messages") ? "/v1/chat/completions" : "/v1/completions"; }

std::vector<int32_t> IdsOf(const json& response) {
  return response["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

TEST(ApiServerConcurrencyTest, SimultaneousStreamsEqualRunningEachAlone) {
  TestServer server;
  constexpr int kStreams = 32;
  std::vector<json> alone;
  for (int i = 0; i < kStreams; ++i) alone.push_back(server.PostOk(PathOf(Request(i, 16)), Request(i, 16)));

  std::vector<Streamed> together(kStreams);
  std::latch start(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      json body = Request(i, 16);
      body["stream"] = true;
      start.arrive_and_wait();  // all at once
      httplib::Result res = server.Post(PathOf(body), body);
      ASSERT_TRUE(res) << "stream " << i << ": " << httplib::to_string(res.error());
      ASSERT_EQ(res->status, 200) << res->body;
      together[i] = Concatenate(res->body);
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(together[i].ids, IdsOf(alone[i])) << "stream " << i;
    const json& choice = alone[i]["choices"][0];
    EXPECT_EQ(together[i].text,
              (choice.contains("message") ? choice["message"]["content"] : choice["text"]).get<std::string>())
        << i;
    EXPECT_EQ(together[i].finish_reason, "length") << "stream " << i;
  }
  ASSERT_TRUE(server.WaitUntilIdle());
  EXPECT_EQ(server.Metric("vllm:kv_cache_usage_perc"), 0);
}

// The server tokenizer cut to its first `num_ids` ids (the added tokens from there
// on dropped), written into `dir`: the engine refuses a tokenizer with ids its model
// does not have.
std::string TokenizerCutTo(int32_t num_ids, const testing::TempDir& dir) {
  auto read = [](const std::string& path) { return json::parse(std::ifstream(path)); };
  json tokenizer = read(testing::ServerTokenizerDir() + "/tokenizer.json");
  json config = read(testing::ServerTokenizerDir() + "/tokenizer_config.json");
  json kept = json::array();
  for (const json& token : tokenizer["added_tokens"]) {
    if (token["id"].get<int32_t>() < num_ids) kept.push_back(token);
  }
  tokenizer["added_tokens"] = kept;
  json decoder = json::object();
  for (const auto& [id, token] : config["added_tokens_decoder"].items()) {
    if (std::stoi(id) < num_ids) decoder[id] = token;
  }
  config["added_tokens_decoder"] = decoder;
  config["eos_token"] = config["pad_token"] = nullptr;  // <|im_end|> is cut
  config.erase("chat_template");
  std::ofstream(dir.File("tokenizer.json")) << tokenizer.dump();
  std::ofstream(dir.File("tokenizer_config.json")) << config.dump();
  return dir.path();
}

// The model to serve and whether its vocabulary holds the chat template's special
// tokens. The hybrid model's 320 ids stop short of <|im_start|> = 320: it is served
// completions only, with the tokenizer cut to those ids.
struct DisconnectCase {
  const char* model;
  bool chat;
  int32_t vocab_size;
};

void PrintTo(const DisconnectCase& c, std::ostream* out) { *out << c.model; }

class ApiServerDisconnectTest : public ::testing::TestWithParam<DisconnectCase> {};

TEST_P(ApiServerDisconnectTest, ClientsThatDisconnectMidStreamAreAbortedAndFreeTheirPages) {
  EngineConfig config = testing::ServerEngineConfig();
  config.model = std::string(VT_TEST_DATA_DIR) + "/models/" + GetParam().model + "/hf";
  const testing::TempDir tokenizer;
  if (!GetParam().chat) config.tokenizer = TokenizerCutTo(GetParam().vocab_size, tokenizer);
  config.max_model_len = 2048;
  config.num_gpu_blocks_override = 1024;
  TestServer server(config);
  const bool completions_only = !GetParam().chat;
  constexpr int kLeaving = 6;
  constexpr int kMaxTokens = 2000;  // far more than can be generated before the clients leave
  const json stay = Request(101, 40, completions_only);
  const json stay_alone = server.PostOk(PathOf(stay), stay);

  std::latch start(kLeaving + 1);
  std::vector<std::thread> clients;
  for (int i = 0; i < kLeaving; ++i) {
    clients.emplace_back([&, i] {
      json body = Request(i, kMaxTokens, completions_only);
      body["stream"] = true;
      start.arrive_and_wait();
      server.LeaveAfter(PathOf(body), body, 3);
    });
  }
  Streamed stayed;
  clients.emplace_back([&] {
    json body = stay;
    body["stream"] = true;
    start.arrive_and_wait();
    httplib::Result res = server.Post(PathOf(body), body);
    ASSERT_TRUE(res);
    stayed = Concatenate(res->body);
  });
  for (std::thread& client : clients) client.join();

  ASSERT_TRUE(server.WaitUntilIdle());
  EXPECT_EQ(server.Metric("vllm:kv_cache_usage_perc"), 0) << "pages of the aborted requests leaked";
  EXPECT_EQ(server.Metric("vllm:request_success_total", "finished_reason=\"abort\""), kLeaving);
  EXPECT_EQ(server.Metric("vllm:request_success_total", "finished_reason=\"length\""), 2);
  EXPECT_LT(server.Metric("vllm:generation_tokens_total"), kLeaving * kMaxTokens);
  EXPECT_EQ(stayed.ids, IdsOf(stay_alone)) << "a disconnect disturbed another request";
  // The server goes on serving.
  EXPECT_EQ(IdsOf(server.PostOk(PathOf(stay), stay)), IdsOf(stay_alone));
  // The hybrid model's prefix cache keeps recurrent-state snapshots of the prompts
  // and answers it served; an attention-only model has no pool.
  const double snapshot_usage = server.Metric("vllm:state_snapshot_usage_perc");
  if (std::string(GetParam().model) == "qwen3") {
    EXPECT_EQ(snapshot_usage, 0);
  } else {
    EXPECT_GT(snapshot_usage, 0);
    EXPECT_LE(snapshot_usage, 1);
  }
}

// A non-streaming request writes nothing until it is done, so the server has to notice
// the closed connection on its own (src/vllm/entrypoints/openai/client_connection.h).
TEST(ApiServerDisconnectTest, ClientsThatLeaveANonStreamingRequestAreAborted) {
  EngineConfig config = testing::ServerEngineConfig();
  config.max_model_len = 4096;
  config.num_gpu_blocks_override = 1024;
  TestServer server(config);
  constexpr int kMaxTokens = 4000;  // far more than can be generated before the client leaves
  for (const bool chat : {false, true}) {
    SCOPED_TRACE(chat ? "chat" : "completions");
    const json body = Request(chat ? 1 : 0, kMaxTokens);
    testing::RawConnection connection(server.port());
    ASSERT_TRUE(connection.connected());
    ASSERT_TRUE(connection.Post(PathOf(body), body.dump()));
    // Leave once the request runs.
    for (int attempt = 0; attempt < 1000 && server.Metric("vllm:num_requests_running") < 1; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(server.Metric("vllm:num_requests_running"), 1);
    connection.Close();
    ASSERT_TRUE(server.WaitUntilIdle());
  }
  EXPECT_EQ(server.Metric("vllm:request_success_total", "finished_reason=\"abort\""), 2);
  EXPECT_EQ(server.Metric("vllm:kv_cache_usage_perc"), 0) << "pages of the aborted requests leaked";
  EXPECT_LT(server.Metric("vllm:generation_tokens_total"), kMaxTokens);
  // A client that stays gets its answer, however long it waits.
  const json stay = Request(2, 300);
  EXPECT_EQ(IdsOf(server.PostOk(PathOf(stay), stay)).size(), 300u);
}

INSTANTIATE_TEST_SUITE_P(Models, ApiServerDisconnectTest,
                         ::testing::Values(DisconnectCase{"qwen3", true, 352},
                                           DisconnectCase{"qwen35_dense_untied", false, 320}),
                         [](const auto& info) { return std::string(info.param.model); });

}  // namespace
}  // namespace vllm
