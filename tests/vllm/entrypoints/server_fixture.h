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

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
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
  return c;
}

class TestServer {
 public:
  explicit TestServer(const EngineConfig& engine = ServerEngineConfig(),
                      const openai::ServerConfig& config = QuietServerConfig())
      : server_(std::make_unique<LLMEngine>(engine), config) {
    port_ = server_.Bind();
    thread_ = std::thread([this] { server_.Serve(); });
    // Serving has begun once a request is answered (Stop() before that would be lost).
    for (int attempt = 0; attempt < 500 && !Client().Get("/health"); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~TestServer() {
    server_.Stop();
    thread_.join();
  }

  int port() const { return port_; }
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
  openai::ApiServer server_;
  int port_ = 0;
  std::thread thread_;
};

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
