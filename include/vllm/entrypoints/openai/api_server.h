// The OpenAI-compatible HTTP server (vLLM's api_server), on cpp-httplib:
//
//   POST /v1/completions, /v1/chat/completions   JSON, or SSE with "stream": true
//   POST /tokenize, /detokenize
//   GET  /v1/models, /health, /version, /metrics
//
// Every error is OpenAI's error JSON with the right status: 400 for bad requests, 401
// for a missing or wrong API key (the /v1 routes, as in vLLM), 404 for an unknown model
// or route, 405 for a wrong method, 500 when the engine fails a request. Each HTTP
// request is served on a thread of its own; the engine runs in its own loop
// (AsyncLLMEngine). A streaming client that disconnects has its requests aborted.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "vllm/engine/llm_engine.h"

namespace vllm::openai {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                              // 0: any free port (see ApiServer::Bind)
  std::vector<std::string> served_model_names;  // empty: the model path
  std::string api_key;                          // empty: no key is asked for
  std::string chat_template;                    // a file or the template itself; empty: the tokenizer's
  bool access_log = true;                       // one line per request on stderr
};

class ApiServer {
 public:
  // Starts the engine loop on `engine` and declares the routes; nothing listens yet.
  ApiServer(std::unique_ptr<LLMEngine> engine, ServerConfig config);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port and returns the port (the one chosen when config.port is 0);
  // throws std::runtime_error naming host and port when that fails.
  int Bind();
  // Serves connections until Stop(); call after Bind().
  void Serve();
  // Makes Serve() return; safe from any thread.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vllm::openai
