// The OpenAI-compatible HTTP server (vLLM's api_server), on cpp-httplib:
//
//   POST /v1/completions, /v1/chat/completions   JSON, or SSE with "stream": true
//   POST /tokenize, /detokenize
//   GET  /v1/models, /health, /version, /metrics
//
// Every error is OpenAI's error JSON with the right status: 400 for bad requests, 401
// for a missing or wrong API key (the /v1 routes, as in vLLM), 404 for an unknown model
// or route, 405 for a wrong method, 500 when the engine fails a request, 503 for a
// connection beyond ServerConfig::limit_concurrency. Each connection is served on a
// worker thread of a fixed pool; the engine runs in its own loop (AsyncLLMEngine). A
// client that disconnects has its requests aborted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vllm/engine/llm_engine.h"
#include "vllm/entrypoints/generation_config.h"

namespace vllm::openai {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                              // 0: any free port (see ApiServer::Bind)
  std::vector<std::string> served_model_names;  // empty: the model path
  std::string api_key;                          // empty: no key is asked for
  std::string chat_template;                    // a file or the template itself; empty: the tokenizer's
  bool access_log = true;                       // one line per request on stderr
  // Connections served at once (uvicorn's --limit-concurrency); one more is answered
  // 503. 0: max_num_seqs + 16, in [32, 1024].
  int64_t limit_concurrency = 0;
  // The longest prompt text tokenized, in bytes; a longer one is a 400 before any work.
  // 0: 2 x max_model_len x the tokenizer's longest token (no longer prompt can fit).
  int64_t max_prompt_bytes = 0;
  // Defaults of the sampling fields a request leaves out (--generation-config,
  // LoadSamplingDefaults); empty: SamplingParams'.
  SamplingDefaults sampling_defaults;
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
