// `vllm-cpp bench serve` against the in-process OpenAI server (every request
// streamed and counted, a concurrency sweep, chat and completions, the API key),
// and against servers that misbehave: connections closed at once, mid-stream or
// answered with a 500 are failures, counted, with no crash and no hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "server_fixture.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::TestServer;

std::string TempJson(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" + name + ".json"))
      .string();
}

json RunServeBench(int port, std::vector<std::string> extra) {
  const std::string out = TempJson("serve");
  std::vector<std::string> args = {"serve", "--base-url", "http://127.0.0.1:" + std::to_string(port), "--model",
                                   "test-model", "--output-json", out};
  args.insert(args.end(), extra.begin(), extra.end());
  EXPECT_EQ(RunBenchCommand(args), 0);
  std::ifstream in(out);
  return json::parse(in);
}

TEST(BenchServeTest, EveryStreamedRequestIsCountedAtEachConcurrency) {
  TestServer server;
  const json report = RunServeBench(server.port(), {"--num-prompts", "6", "--max-concurrency", "1,3",
                                                    "--random-input-len", "5", "--random-output-len", "4",
                                                    "--random-vocab-size", "256"});
  EXPECT_EQ(report["command"], "serve");
  ASSERT_EQ(report["results"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& r = report["results"][i];
    EXPECT_EQ(r["max_concurrency"], i == 0 ? 1 : 3);
    EXPECT_EQ(r["completed"], 6);
    EXPECT_EQ(r["failed"], 0);
    EXPECT_EQ(r["total_input_tokens"], 30);   // the server's usage: 6 prompts of 5 ids
    EXPECT_EQ(r["total_output_tokens"], 24);  // 4 each, EOS ignored
    EXPECT_EQ(r["ttft_ms"]["count"], 6);
    EXPECT_EQ(r["tpot_ms"]["count"], 6);
    // A gap per streamed event after the first: at most 3 per stream (an event may
    // carry several tokens, e.g. while their bytes are not yet whole UTF-8).
    EXPECT_GT(r["itl_ms"]["count"].get<int64_t>(), 0);
    EXPECT_LE(r["itl_ms"]["count"].get<int64_t>(), 6 * 3);
    EXPECT_GT(r["ttft_ms"]["median"].get<double>(), 0);
    EXPECT_LE(r["ttft_ms"]["max"].get<double>(), r["e2el_ms"]["max"].get<double>());
    EXPECT_NEAR(r["output_throughput"].get<double>(), 24 / r["duration_s"].get<double>(), 1e-9);
  }
  EXPECT_TRUE(server.WaitUntilIdle());
}

// --num-turns: each turn resends the history with the streamed answers, so its
// prompt grows, and the server's prefix cache serves the history.
TEST(BenchServeTest, ConversationsResendTheirHistoryEachTurn) {
  for (const char* endpoint : {"/v1/chat/completions", "/v1/completions"}) {
    SCOPED_TRACE(endpoint);
    TestServer server;
    const json report = RunServeBench(server.port(), {"--endpoint", endpoint, "--num-prompts", "2", "--num-turns", "3",
                                                      "--max-concurrency", "2", "--random-input-len", "12",
                                                      "--random-output-len", "6", "--tokenizer",
                                                      testing::ServerTokenizerDir()});
    EXPECT_EQ(report["config"]["num_prompts"], 2);
    EXPECT_EQ(report["config"]["num_turns"], 3);
    const json& r = report["results"][0];
    EXPECT_EQ(r["completed"], 6);
    EXPECT_EQ(r["failed"], 0);
    ASSERT_EQ(r["by_turn"].size(), 3u);
    double previous = 0;
    for (const json& turn : r["by_turn"]) {
      EXPECT_EQ(turn["ttft_ms"]["count"], 2);
      const double tokens = turn["prompt_tokens"]["median"];
      EXPECT_GT(tokens, previous + 12) << "a turn's prompt holds the history, its answers and a new prompt";
      previous = tokens;
    }
    EXPECT_TRUE(server.WaitUntilIdle());
    EXPECT_GT(server.Metric("vllm:prefix_cache_hits_total"), 0);
  }
  try {
    RunBenchCommand({"serve", "--model", "m", "--num-turns", "2"});
    ADD_FAILURE() << "random prompts without a tokenizer ran as conversations";
  } catch (const CliError& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer"), std::string::npos) << e.what();
  }
}

TEST(BenchServeTest, ChatEndpointAndRequestRate) {
  TestServer server;
  const json r = RunServeBench(server.port(), {"--endpoint", "/v1/chat/completions", "--num-prompts", "3",
                                               "--request-rate", "50", "--random-input-len", "4",
                                               "--random-output-len", "3", "--tokenizer",
                                               testing::ServerTokenizerDir()})["results"][0];
  EXPECT_EQ(r["completed"], 3);
  EXPECT_EQ(r["failed"], 0);
  EXPECT_EQ(r["total_output_tokens"], 9);
  EXPECT_EQ(r["request_rate"], 50.0);
}

TEST(BenchServeTest, ApiKeyIsSent) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.api_key = "secret";
  TestServer server(testing::ServerEngineConfig(), config);
  const std::vector<std::string> load = {"--num-prompts", "2", "--random-input-len", "3", "--random-output-len", "2",
                                         "--random-vocab-size", "256"};
  json r = RunServeBench(server.port(), load)["results"][0];
  EXPECT_EQ(r["completed"], 0);
  EXPECT_EQ(r["failed"], 2);
  EXPECT_NE(r["errors"].dump().find("HTTP 401"), std::string::npos) << r["errors"].dump();
  std::vector<std::string> with_key = load;
  with_key.insert(with_key.end(), {"--api-key", "secret"});
  r = RunServeBench(server.port(), with_key)["results"][0];
  EXPECT_EQ(r["completed"], 2);
  EXPECT_EQ(r["failed"], 0);
}

// A loopback server that answers each connection by `mode`: "close" hangs up at once,
// "500" sends an error status, "cut" sends a 200 stream head and one event, then
// hangs up without [DONE].
class MisbehavingServer {
 public:
  explicit MisbehavingServer(std::string mode) : mode_(std::move(mode)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~MisbehavingServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  void Serve() {
    while (!stop_) {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      char buf[4096];
      const ssize_t got = recv(client, buf, sizeof buf, 0);  // the request head (and maybe body)
      (void)got;
      std::string reply;
      if (mode_ == "500") {
        reply = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\nConnection: close\r\n\r\noops!";
      } else if (mode_ == "cut") {
        reply = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                "data: {\"choices\": [{\"text\": \"a\"}]}\n\n";
      }
      if (!reply.empty()) send(client, reply.data(), reply.size(), MSG_NOSIGNAL);
      close(client);
    }
  }

  std::string mode_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(BenchServeTest, DroppedConnectionsAndErrorsAreCountedAsFailures) {
  for (const char* mode : {"close", "500", "cut"}) {
    SCOPED_TRACE(mode);
    MisbehavingServer server(mode);
    const json r = RunServeBench(server.port(), {"--num-prompts", "5", "--max-concurrency", "2", "--random-input-len",
                                                 "3", "--random-output-len", "2", "--request-timeout", "10"})["results"][0];
    EXPECT_EQ(r["completed"], 0);
    EXPECT_EQ(r["failed"], 5);
    EXPECT_FALSE(r["errors"].empty());
    EXPECT_EQ(r["ttft_ms"]["count"], 0);
  }
}

TEST(BenchServeTest, BadTargetsAndRatesAreRefusedByName) {
  const auto error_of = [](std::vector<std::string> args) -> std::string {
    args.insert(args.begin(), "serve");
    try {
      RunBenchCommand(args);
    } catch (const CliError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({"--model", "m", "--base-url", "https://example.com"}).find("https"), std::string::npos);
  EXPECT_NE(error_of({"--model", "m", "--base-url", "localhost:8000"}).find("--base-url"), std::string::npos);
  EXPECT_NE(error_of({"--model", "m", "--request-rate", "-2"}).find("--request-rate"), std::string::npos);
  EXPECT_NE(error_of({"--model", "m", "--max-concurrency", "1,-1"}).find("--max-concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--model", "m", "--endpoint", "v1/completions"}).find("--endpoint"), std::string::npos);
  EXPECT_NE(error_of({"--base-url", "http://127.0.0.1:1"}).find("--model"), std::string::npos);
}

}  // namespace
}  // namespace vllm
