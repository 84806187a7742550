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

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  // CORS (vLLM's --allowed-origins): origins a browser may call from; "*" is any.
  // Preflight OPTIONS requests are answered for these and refused (400) for others.
  std::vector<std::string> allowed_origins = {"*"};
  std::string chat_template;                    // a file or the template itself; empty: the tokenizer's
  // Whether a request may bring its own chat_template (vLLM's --trust-request-chat-template);
  // otherwise one that does is a 400.
  bool trust_request_chat_template = false;
  bool access_log = true;                       // one line per HTTP request on stderr (uvicorn's)
  // One line per finished engine request: id, tokens, queue time, TTFT, e2e, finish
  // reason, user (vLLM's request logging; --disable-log-requests).
  bool log_requests = true;
  // The throughput / running / waiting / KV usage / prefix cache line every
  // stats_interval while the engine works (vLLM's; --disable-log-stats).
  bool log_stats = true;
  std::chrono::milliseconds stats_interval{10000};
  // Where the server's log lines go; empty: stderr, prefixed "vllm-cpp serve: ".
  std::function<void(const std::string&)> on_log;
  // Connections served at once (uvicorn's --limit-concurrency); one more is answered
  // 503. 0: max_num_seqs + 16, in [32, 1024].
  int64_t limit_concurrency = 0;
  // The longest prompt text tokenized, in bytes; a longer one is a 400 before any work.
  // 0: 2 x max_model_len x the tokenizer's longest token (no longer prompt can fit).
  int64_t max_prompt_bytes = 0;
  // How long Shutdown() lets requests in flight run before it aborts them (vLLM's
  // --shutdown-timeout, in seconds on the command line).
  std::chrono::milliseconds shutdown_timeout{5000};
  // Defaults of the sampling fields a request leaves out (--generation-config,
  // LoadSamplingDefaults); empty: SamplingParams'.
  SamplingDefaults sampling_defaults;
  // Tool calling (vLLM's --enable-auto-tool-choice, --tool-call-parser): the parser
  // ("hermes" or "qwen3_coder"; empty: tool calls stay content) reads calls out of
  // the output for tool_choice "auto" (which needs enable_auto_tool_choice),
  // "required" and named functions. The reasoning parser is the engine's
  // (EngineConfig::reasoning_parser).
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
};

class ApiServer {
 public:
  // Starts the engine loop on `engine` and declares the routes; nothing listens yet.
  ApiServer(std::unique_ptr<LLMEngine> engine, ServerConfig config);
  // Data parallelism (--data-parallel-size): a loop per replica behind one load
  // balancer (data_parallel_engine.h), each replica's CPU kernels on
  // cpu_threads_per_replica threads of its own (0: the process's pool). One replica is
  // the constructor above.
  ApiServer(std::vector<std::unique_ptr<LLMEngine>> replicas, ServerConfig config, int cpu_threads_per_replica);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port and returns the port (the one chosen when config.port is 0);
  // throws std::runtime_error naming host and port when that fails.
  int Bind();
  // Serves connections until Stop() or Shutdown(); call after Bind().
  void Serve();
  // Makes Serve() return at once, cutting the streams in flight; safe from any thread.
  void Stop();
  // Why the engine died (EngineDeadError: a tensor-parallel rank gone), after which
  // the server stopped itself; nullopt while it lives.
  std::optional<std::string> engine_dead() const;
  // The graceful stop (SIGINT / SIGTERM): takes no new connection or request (a 503),
  // lets the requests in flight finish for up to config.shutdown_timeout, then ends the others with
  // finish_reason "abort" (a stream gets its last chunk and [DONE], a non-streaming
  // request its answer so far), and makes Serve() return once they are written (or
  // after a further few seconds). Safe from any thread; returns when done.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vllm::openai
