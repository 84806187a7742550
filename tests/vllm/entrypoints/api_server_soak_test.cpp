// A bounded soak of the server on loopback: 500 requests from 64 clients at once,
// completions and chats, streamed and not, 30% of the clients leaving mid-stream and
// 10% sending malformed requests. Every request gets its due answer, and afterwards
// nothing runs or waits, the KV cache is back to idle, resident memory stayed within a
// bound, and the server still answers.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "server_fixture.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::SseEvents;
using testing::TestServer;

constexpr int kRequests = 500;
constexpr int kWarmUpRequests = 2 * 64;
constexpr int kClients = 64;
constexpr int kMaxTokens = 6;       // what the clients that stay ask for
constexpr int kLeaverTokens = 2000;  // far more than is generated before a leaver leaves

enum class Kind { kWhole, kStreamed, kLeaver, kMalformed };

// Request i's kind: 10% malformed, 30% leavers, the rest whole or streamed answers.
Kind KindOf(int i) {
  const int slot = i % 10;
  if (slot == 0) return Kind::kMalformed;
  if (slot <= 3) return Kind::kLeaver;
  return slot <= 6 ? Kind::kStreamed : Kind::kWhole;
}

json Body(int i, int max_tokens) {
  const std::string prompt = "soak " + std::to_string(i) + std::string(static_cast<size_t>(i % 13), 'b');
  if (i % 2) return Greedy({{"messages", json::array({{{"role", "user"}, {"content", prompt}}})}}, max_tokens);
  return Greedy({{"prompt", prompt}}, max_tokens);
}

std::string PathOf(const json& body) {
  return body.contains("messages") ? "/v1/chat/completions" : "/v1/completions";
}

// A malformed request and the status it must get.
struct Malformed {
  std::string path;
  std::string body;
  int status;
};

Malformed MalformedRequest(int i) {
  static const std::vector<Malformed> cases = {
      {"/v1/completions", "{\"prompt\": ", 400},
      {"/v1/completions", R"({"prompt": "x", "temperature": 1e999})", 400},
      {"/v1/chat/completions", R"({"messages": "hi"})", 400},
      {"/v1/completions", R"({"prompt": "x", "model": "other"})", 404},
      {"/v1/completions", json{{"prompt", std::string(60000, 'c')}}.dump(), 400},  // past --max-prompt-bytes
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 9999})", 400},
      {"/v1/nothing", "{}", 404},
  };
  return cases[static_cast<size_t>(i / 10) % cases.size()];
}

struct Tally {
  std::mutex mutex;
  std::vector<std::string> failures;
  void Fail(int i, const std::string& what) {
    std::lock_guard lock(mutex);
    failures.push_back("request " + std::to_string(i) + ": " + what);
  }
};

void CheckStream(int i, const httplib::Result& res, Tally& tally) {
  if (!res || res->status != 200) return tally.Fail(i, "stream failed: " + (res ? res->body : to_string(res.error())));
  std::string finish_reason;
  for (const json& event : SseEvents(res->body)) {
    if (event.contains("error")) tally.Fail(i, "stream error: " + event.dump());
    if (!event["choices"].empty() && !event["choices"][0]["finish_reason"].is_null()) {
      finish_reason = event["choices"][0]["finish_reason"];
    }
  }
  if (finish_reason != "length") tally.Fail(i, "stream finished with '" + finish_reason + "'");
}

void RunOne(const TestServer& server, int i, Tally& tally) {
  switch (KindOf(i)) {
    case Kind::kMalformed: {
      const Malformed bad = MalformedRequest(i);
      httplib::Result res = server.Client().Post(bad.path, bad.body, "application/json");
      if (!res || res->status != bad.status) tally.Fail(i, bad.body.substr(0, 80) + " did not get " + std::to_string(bad.status));
      break;
    }
    case Kind::kLeaver: {
      json body = Body(i, kLeaverTokens);
      body["stream"] = true;
      server.LeaveAfter(PathOf(body), body, 2);
      break;
    }
    case Kind::kStreamed: {
      json body = Body(i, kMaxTokens);
      body["stream"] = true;
      CheckStream(i, server.Post(PathOf(body), body), tally);
      break;
    }
    case Kind::kWhole: {
      const json body = Body(i, kMaxTokens);
      httplib::Result res = server.Post(PathOf(body), body);
      if (!res || res->status != 200) return tally.Fail(i, "no answer: " + (res ? res->body : to_string(res.error())));
      if (json::parse(res->body)["usage"]["completion_tokens"] != kMaxTokens) tally.Fail(i, "short answer");
      break;
    }
  }
}

// Requests [first, first + count) from kClients clients at once.
void RunRound(const TestServer& server, int first, int count, Tally& tally) {
  std::atomic<int> next{first};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = next++; i < first + count; i = next++) RunOne(server, i, tally);
    });
  }
  for (std::thread& client : clients) client.join();
}

TEST(ApiServerSoakTest, MixedClientsLeaveTheServerIdleAndServing) {
  EngineConfig engine = testing::ServerEngineConfig();  // max_num_seqs 64
  engine.max_model_len = 2048;
  engine.num_gpu_blocks_override = 256;  // 25 MB of KV pages, touched by the first round; preemptions happen
  TestServer server(engine);
  Tally tally;
  // A first round brings the server's threads (and their malloc arenas) and the
  // clients' into use; the soak proper must not grow memory past that.
  RunRound(server, kRequests, kWarmUpRequests, tally);
  ASSERT_TRUE(server.WaitUntilIdle());
  const int64_t resident_before = testing::ResidentBytes();
  RunRound(server, 0, kRequests, tally);
  for (const std::string& failure : tally.failures) ADD_FAILURE() << failure;

  ASSERT_TRUE(server.WaitUntilIdle());
  EXPECT_EQ(server.Metric("vllm:kv_cache_usage_perc"), 0) << "KV pages leaked";
  int num_leavers = 0, num_finished = 0;
  for (int i = 0; i < kRequests + kWarmUpRequests; ++i) {
    num_leavers += KindOf(i) == Kind::kLeaver;
    num_finished += KindOf(i) == Kind::kWhole || KindOf(i) == Kind::kStreamed;
  }
  EXPECT_EQ(server.Metric("vllm:request_success_total", "finished_reason=\"abort\""), num_leavers);
  EXPECT_EQ(server.Metric("vllm:request_success_total", "finished_reason=\"length\""), num_finished);
  const int64_t growth = testing::ResidentBytes() - resident_before;
  RecordProperty("resident_growth_bytes", std::to_string(growth));  // in --gtest_output=xml
  if (!testing::kSanitizedAllocator) {
    EXPECT_LT(growth, int64_t{48} << 20) << "resident memory grew by " << (growth >> 20) << " MiB";
  }
  const json after = server.PostOk("/v1/chat/completions", Body(1, kMaxTokens));
  EXPECT_EQ(after["usage"]["completion_tokens"], kMaxTokens);
}

}  // namespace
}  // namespace vllm
