// A vllm-cpp OpenAI server for tests, started in-process on a free loopback port and
// driven with raw HTTP (httplib's client), plus helpers to read SSE bodies and
// /metrics.
//
// The model is the qwen3 reference model (random weights, 352 ids) with the byte-level
// ChatML tokenizer of tests/data/openai_server/tokenizer (256 byte tokens, 64 merges,
// <|im_start|> = 320, <|im_end|> = 321 = EOS, <think> = 322, </think> = 323; ids 324..351
// have no text). Its outputs are mostly U+FFFD (random bytes), so tests compare token
// ids (vLLM's return_token_ids) where text could hide a difference.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "vllm/engine/llm_engine.h"
#include "vllm/entrypoints/openai/api_server.h"

namespace vllm::testing {

inline std::string ServerTokenizerDir() { return std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer"; }
inline std::string ServerModelDir() { return std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf"; }

inline EngineConfig ServerEngineConfig() {
  EngineConfig c;
  c.model = ServerModelDir();
  c.tokenizer = ServerTokenizerDir();
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 256;
  c.num_gpu_blocks_override = 512;
  c.num_threads = 1;
  return c;
}

inline openai::ServerConfig QuietServerConfig() {
  openai::ServerConfig c;
  c.port = 0;
  c.served_model_names = {"test-model"};
  c.access_log = false;
  c.log_requests = false;
  c.log_stats = false;
  return c;
}

class TestServer {
 public:
  // data_parallel_size > 1: that many replicas of `engine` (--data-parallel-size), each
  // on a CPU thread pool of its own with engine.num_threads threads.
  explicit TestServer(const EngineConfig& engine = ServerEngineConfig(),
                      const openai::ServerConfig& config = QuietServerConfig(), int data_parallel_size = 1)
      : server_(Replicas(engine, data_parallel_size), config, data_parallel_size > 1 ? engine.num_threads : 0) {
    port_ = server_.Bind();
    thread_ = std::thread([this] { server_.Serve(); });
    // Serving has begun once a request is answered.
    for (int attempt = 0; attempt < 500 && !Client().Get("/health"); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~TestServer() {
    server_.Stop();
    thread_.join();
  }

  int port() const { return port_; }
  std::optional<std::string> engine_dead() const { return server_.engine_dead(); }
  // ApiServer::Shutdown (the graceful stop of SIGINT / SIGTERM).
  void Shutdown() { server_.Shutdown(); }
  httplib::Client Client() const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(120);
    return client;
  }
  httplib::Result Post(const std::string& path, const nlohmann::json& body,
                       const httplib::Headers& headers = {}) const {
    return Client().Post(path.c_str(), headers, body.dump(), "application/json");
  }
  // POSTs and expects a 200 with a JSON body.
  nlohmann::json PostOk(const std::string& path, const nlohmann::json& body) const {
    httplib::Result res = Post(path, body);
    EXPECT_TRUE(res) << path << ": no response";
    if (!res) return nullptr;
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    return nlohmann::json::parse(res->body);
  }
  // POSTs a streaming request and closes the connection after `num_chunks` chunks.
  void LeaveAfter(const std::string& path, const nlohmann::json& body, int num_chunks) const {
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    int64_t newlines = 0;
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      newlines += std::count(data, data + size, '\n');
      return newlines / 2 < num_chunks;  // each event is one line of JSON and a blank line
    };
    httplib::Client client = Client();
    httplib::Result res = client.send(req);
    EXPECT_EQ(res.error(), httplib::Error::Canceled) << "the stream ended before the client left";
  }
  // The value of the first /metrics sample of `name` whose labels contain `label`.
  double Metric(const std::string& name, const std::string& label = "") const {
    httplib::Result res = Client().Get("/metrics");
    if (!res || res->status != 200) return -1;
    size_t at = 0;
    while ((at = res->body.find("\n" + name + "{", at)) != std::string::npos) {
      const size_t end = res->body.find('\n', at + 1);
      const std::string line = res->body.substr(at + 1, end - at - 1);
      at = end;
      if (line.find(label) == std::string::npos) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }
  // Polls /metrics until nothing runs or waits (engine work that a disconnect left
  // behind included); false after 60 s.
  bool WaitUntilIdle() const {
    for (int attempt = 0; attempt < 6000; ++attempt) {
      if (Metric("vllm:num_requests_running") == 0 && Metric("vllm:num_requests_waiting") == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  static std::vector<std::unique_ptr<LLMEngine>> Replicas(const EngineConfig& engine, int n) {
    std::vector<std::unique_ptr<LLMEngine>> replicas;
    for (int i = 0; i < n; ++i) replicas.push_back(std::make_unique<LLMEngine>(engine));
    return replicas;
  }

  openai::ApiServer server_;
  int port_ = 0;
  std::thread thread_;
};

// A TCP connection to the server driven by hand: requests written as raw HTTP, the
// answer read as it comes, and the connection closed whenever a test says.
class RawConnection {
 public:
  explicit RawConnection(int port) : sock_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = sock_ >= 0 && connect(sock_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // Writes raw bytes (a request cut short, say); false when they could not all be sent.
  bool Send(const std::string& bytes) {
    return send(sock_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  const std::string& received() const { return received_; }
  // POSTs `body` to `path`; false when it could not all be sent.
  bool Post(const std::string& path, const std::string& body) {
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return send(sock_, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
  }
  // Reads until what was received holds `text` `count` times; false if the connection ends first.
  bool ReadUntil(const std::string& text, int count = 1) {
    char buffer[4096];
    while (Count(text) < count) {
      const ssize_t n = recv(sock_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }
  int Count(const std::string& text) const {
    int count = 0;
    for (size_t at = received_.find(text); at != std::string::npos; at = received_.find(text, at + text.size())) ++count;
    return count;
  }
  void Close() {
    if (sock_ >= 0) close(sock_);
    sock_ = -1;
  }

 private:
  int sock_;
  bool connected_ = false;
  std::string received_;
};

// Whether the build has a sanitizer whose allocator keeps freed memory (ASan's
// quarantine, TSan's shadow): resident sizes then say nothing about the product.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedAllocator = true;
#elif defined(__has_feature)
inline constexpr bool kSanitizedAllocator = __has_feature(address_sanitizer) || __has_feature(thread_sanitizer);
#else
inline constexpr bool kSanitizedAllocator = false;
#endif

// This process's resident memory, in bytes.
inline int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// The JSON payloads of an SSE body ("data: {...}\n\n" events); the closing
// "data: [DONE]" is checked and not returned.
inline std::vector<nlohmann::json> SseEvents(const std::string& body) {
  std::vector<nlohmann::json> events;
  bool done = false;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "unterminated event in: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    EXPECT_FALSE(done) << "event after [DONE]: " << event;
    if (event == "data: [DONE]") {
      done = true;
      continue;
    }
    events.push_back(nlohmann::json::parse(event.substr(6)));
  }
  EXPECT_TRUE(done) << "the stream did not end with data: [DONE]";
  return events;
}

// Greedy sampling of exactly `max_tokens` tokens (EOS ignored).
inline nlohmann::json Greedy(nlohmann::json body, int max_tokens) {
  body["temperature"] = 0;
  body["max_tokens"] = max_tokens;
  body["ignore_eos"] = true;
  return body;
}

}  // namespace vllm::testing
