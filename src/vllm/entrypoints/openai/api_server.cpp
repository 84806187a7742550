#include "vllm/entrypoints/openai/api_server.h"

#include <malloc.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "client_connection.h"
#include "http_server.h"
#include "logging_stat_logger.h"
#include "serving_chat.h"
#include "serving_completion.h"
#include "serving_tokenization.h"
#include "vllm/engine/data_parallel_engine.h"
#include "vllm/entrypoints/openai/metrics.h"
#include "vllm/version.h"

namespace vllm::openai {
namespace {

using nlohmann::json;

// How long a stream writer waits for engine output before it checks again whether
// the server is shutting down.
constexpr std::chrono::milliseconds kStreamPoll{200};
constexpr size_t kMaxBodyBytes = size_t{64} << 20;

using Endpoint = std::function<ApiResponse(const httplib::Request&)>;

// Debian's cpp-httplib listens with a backlog of 5: dozens of clients connecting at once
// overflow it, and the kernel then drops their handshakes for seconds, longer than
// httplib waits for a request on a new connection.
constexpr int kListenBacklog = 1024;

struct Route {
  const char* method;  // "GET" or "POST"
  const char* path;
  Endpoint endpoint;
};

// Writes an endpoint's answer: JSON (nothing for a null body), or an SSE stream pulled by httplib's chunked
// writer. A failed write means the client went away: returning false ends the
// response, httplib drops the provider, and the last reference to the stream goes,
// whose RequestGroup then aborts the requests still running.
void Write(ApiResponse answer, httplib::Response& res) {
  res.status = answer.status;
  if (!answer.stream) {
    if (!answer.body.is_null()) res.set_content(DumpJson(answer.body), "application/json");
    return;
  }
  std::shared_ptr<EventStream> stream = std::move(answer.stream);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [stream](size_t, httplib::DataSink& sink) {
    std::string events;
    const bool more = stream->Next(kStreamPoll, events);
    if (!events.empty() && !sink.write(events.data(), events.size())) return false;
    if (!more) sink.done();
    return true;
  });
}

// The ClientGone of a non-streaming request: a probe of the socket its handler runs on.
ClientGone ClientGoneOf(const httplib::Request&) {
  const int sock = HttpServer::ConnectionSocket();
  if (sock < 0) return {};  // not on one of HttpServer's connections: nothing to probe
  return [connection = ClientConnection(sock)] { return connection.Closed(); };
}

// nginx's "client closed request": logged, never seen by the client.
constexpr int kClientClosedRequest = 499;

void WriteError(const OpenAIError& error, httplib::Response& res) {
  Write({error.status(), error.ToJson(), nullptr}, res);
}

// A request's buffers grow with it: the body, the parsed prompt, its token ids and the
// tokenizer's scratch take ~30 bytes a byte of prompt. glibc serves buffers up to 32 MiB
// from the arena of the thread that asks once such a size has been freed (its mmap and
// trim thresholds rise to the largest size freed so far), and an arena keeps what is
// freed below its trim threshold: each HTTP thread that served a 16 MB prompt kept
// ~100 MB. Fixed thresholds send every buffer of 4 MiB or more to mmap, and so back to
// the system when freed, and have an arena give back any free top past 1 MiB.
void ReturnLargeBuffersToTheSystem() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
  });
}

void Run(const Endpoint& endpoint, const httplib::Request& req, httplib::Response& res) {
  try {
    Write(endpoint(req), res);
  } catch (const ClientDisconnected&) {
    res.status = kClientClosedRequest;
  } catch (const OpenAIError& e) {
    WriteError(e, res);
  } catch (const std::exception& e) {
    WriteError(OpenAIError(500, std::string("internal error: ") + e.what()), res);
  }
}

// Hands the engine's statistics to each of `loggers`.
class StatLoggers : public StatLogger {
 public:
  explicit StatLoggers(std::vector<StatLogger*> loggers) : loggers_(std::move(loggers)) {}
  void Record(const EngineStats& stats, const IterationStats& iteration) override {
    for (StatLogger* logger : loggers_) logger->Record(stats, iteration);
  }

 private:
  std::vector<StatLogger*> loggers_;
};

LoggingStatLogger::Sink SinkOf(const ServerConfig& config) {
  if (config.on_log) return config.on_log;
  return [](const std::string& line) { std::fprintf(stderr, "vllm-cpp serve: %s\n", line.c_str()); };
}

}  // namespace

struct ApiServer::Impl {
  ServerConfig config;
  PrometheusStatLogger metrics;
  LoggingStatLogger logging{SinkOf(config), config.log_requests, config.log_stats, config.stats_interval};
  StatLoggers loggers{{&metrics, &logging}};
  std::mutex dead_mutex;
  std::optional<std::string> engine_dead;  // guarded by dead_mutex
  std::unique_ptr<EngineClient> engine;
  ServingContext context;
  ServingCompletion completion{context};
  ServingChat chat{context};
  ServingTokenization tokenization{context};
  HttpServer http;
  // Stop() before the listener runs would do nothing (httplib stops only a running
  // server): Serve and Stop tell each other (ApiServer::Serve).
  std::atomic<bool> serve_entered{false}, stop_requested{false}, serve_ended{false};
  std::mutex log_mutex;

  Impl(std::vector<std::unique_ptr<LLMEngine>> replicas, ServerConfig server_config, int cpu_threads_per_replica)
      : config(WithDefaults(std::move(server_config), *replicas.at(0))),
        metrics(config.served_model_names.front(), StatsOf(replicas), replicas[0]->config().max_num_batched_tokens),
        engine(replicas.size() == 1
                   ? std::unique_ptr<EngineClient>(std::make_unique<AsyncLLMEngine>(
                         std::move(replicas[0]), &loggers, 0, [this](const std::string& why) { EngineDied(why); }))
                   : std::make_unique<DataParallelEngine>(std::move(replicas), &loggers, cpu_threads_per_replica,
                                                          [this](const std::string& why) { EngineDied(why); })),
        context(*engine, config),
        http(static_cast<size_t>(config.limit_concurrency), RefusalBody(config.limit_concurrency),
             DumpJson(ShuttingDown().ToJson())) {}

  // The engine loops end before the members they call back into (EngineDied: http).
  ~Impl() { engine->Shutdown(); }

  // An engine that cannot step again (EngineDeadError): the server stops, and
  // Serve() returns for the command to exit with the reason.
  void EngineDied(const std::string& why) {
    {
      std::lock_guard lock(dead_mutex);
      if (engine_dead) return;
      engine_dead = why;
    }
    SinkOf(config)(why + "; stopping the server");
    http.stop();
  }

  static EngineStats StatsOf(const std::vector<std::unique_ptr<LLMEngine>>& replicas) {
    std::vector<EngineStats> all;
    for (const auto& r : replicas) all.push_back(r->stats());
    return SumEngineStats(all);
  }

  static OpenAIError ShuttingDown() {
    return OpenAIError(503, "the server is shutting down: send the request to another server or retry after its restart");
  }

  // Waits until no connection is served; false at `deadline`.
  bool WaitForConnections(std::chrono::steady_clock::time_point deadline) const {
    while (http.num_active() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  static ServerConfig WithDefaults(ServerConfig config, const LLMEngine& llm) {
    if (config.served_model_names.empty()) config.served_model_names = {llm.config().model};
    if (config.limit_concurrency < 0) {
      throw std::invalid_argument("--limit-concurrency must be >= 1, got " + std::to_string(config.limit_concurrency));
    }
    // A streaming request holds its connection until it ends: room for every sequence
    // the engine may run at once, plus idle keep-alive connections.
    if (config.limit_concurrency == 0) {
      config.limit_concurrency = std::clamp<int64_t>(llm.config().max_num_seqs + 16, 32, 1024);
    }
    return config;
  }

  static std::string RefusalBody(int64_t limit_concurrency) {
    return DumpJson(OpenAIError(503, "the server is serving its --limit-concurrency of " +
                                         std::to_string(limit_concurrency) +
                                         " connections at once: retry when a request has finished")
                        .ToJson());
  }

  std::vector<Route> Routes() {
    return {
        {"GET", "/health",
         [](const httplib::Request&) {
           return ApiResponse{200, nullptr, nullptr};
         }},
        {"GET", "/version",
         [](const httplib::Request&) {
           return ApiResponse{200, {{"version", Version()}}, nullptr};
         }},
        {"GET", "/v1/models",
         [this](const httplib::Request&) {
           return ApiResponse{200, ModelList(), nullptr};
         }},
        {"POST", "/tokenize", [this](const httplib::Request& req) { return tokenization.Tokenize(req.body); }},
        {"POST", "/detokenize", [this](const httplib::Request& req) { return tokenization.Detokenize(req.body); }},
        {"POST", "/v1/completions", [this](const httplib::Request& req) { return completion.Create(req.body, ClientGoneOf(req)); }},
        {"POST", "/v1/chat/completions", [this](const httplib::Request& req) { return chat.Create(req.body, ClientGoneOf(req)); }},
    };
  }

  json ModelList() const {
    json data = json::array();
    for (const std::string& name : config.served_model_names) {
      data.push_back({{"id", name},
                      {"object", "model"},
                      {"created", UnixTimeSeconds()},
                      {"owned_by", "vllm"},
                      {"root", engine->config().model},
                      {"parent", nullptr},
                      {"max_model_len", engine->max_model_len()}});
    }
    return {{"object", "list"}, {"data", std::move(data)}};
  }

  void DeclareRoutes() {
    std::vector<Route> routes = Routes();
    for (const Route& route : routes) {
      const Endpoint endpoint = route.endpoint;
      httplib::Server::Handler handler = [endpoint](const httplib::Request& req, httplib::Response& res) {
        Run(endpoint, req, res);
      };
      if (std::string(route.method) == "GET") {
        http.Get(route.path, handler);
      } else {
        http.Post(route.path, handler);
      }
      DeclareNotAllowed(route.path, route.method);
    }
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.Render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    DeclareNotAllowed("/metrics", "GET");
  }

  // The other methods on a known path: 405, naming the one that works.
  void DeclareNotAllowed(const char* path, const std::string& allowed) {
    httplib::Server::Handler not_allowed = [allowed](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allowed);
      WriteError(OpenAIError(405, "Method Not Allowed: " + req.path + " takes " + allowed + ", not " + req.method),
                 res);
    };
    if (allowed != "GET") http.Get(path, not_allowed);
    if (allowed != "POST") http.Post(path, not_allowed);
    http.Put(path, not_allowed);
    http.Patch(path, not_allowed);
    http.Delete(path, not_allowed);
  }

  bool OriginAllowed(const std::string& origin) const {
    return std::any_of(config.allowed_origins.begin(), config.allowed_origins.end(),
                       [&](const std::string& allowed) { return allowed == "*" || allowed == origin; });
  }

  // CORS as Starlette's middleware with vLLM's defaults (any method and header, no
  // credentials): a request from an allowed origin gets Access-Control-Allow-Origin;
  // a preflight (OPTIONS with Access-Control-Request-Method) is answered here, 200 for
  // an allowed origin and 400 otherwise. True when the request is answered.
  bool AnswerCors(const httplib::Request& req, httplib::Response& res) const {
    const std::string origin = req.get_header_value("Origin");
    if (origin.empty()) return false;
    const bool allowed = OriginAllowed(origin);
    const bool any = std::find(config.allowed_origins.begin(), config.allowed_origins.end(), "*") !=
                     config.allowed_origins.end();
    if (allowed) res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
    if (allowed && !any) res.set_header("Vary", "Origin");
    if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return false;
    if (!allowed) {
      res.status = 400;
      res.set_content("Disallowed CORS origin", "text/plain; charset=utf-8");
      return true;
    }
    res.status = 200;
    res.set_header("Access-Control-Allow-Methods", "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
    if (req.has_header("Access-Control-Request-Headers")) {
      res.set_header("Access-Control-Allow-Headers", req.get_header_value("Access-Control-Request-Headers"));
    }
    res.set_header("Access-Control-Max-Age", "600");
    res.set_content("OK", "text/plain; charset=utf-8");
    return true;
  }

  void DeclareHandlers() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (AnswerCors(req, res)) return httplib::Server::HandlerResponse::Handled;
      if (http.draining()) {
        res.set_header("Connection", "close");
        WriteError(ShuttingDown(), res);
        return httplib::Server::HandlerResponse::Handled;
      }
      // As in vLLM, the key guards the /v1 routes; health, metrics and tokenization stay open.
      if (config.api_key.empty() || req.path.rfind("/v1", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + config.api_key) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      WriteError(OpenAIError(401, req.has_header("Authorization")
                                      ? "Invalid API key: the Authorization header does not carry this server's key"
                                      : "Missing API key: send the header 'Authorization: Bearer <key>' (the server "
                                        "was started with --api-key)"),
                 res);
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors httplib answers itself (no route, malformed HTTP, oversized body) get the JSON shape too.
    http.set_error_handler(
        httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          const std::string message = res.status == 404
                                          ? "Not Found: there is no route " + req.method + " " + req.path
                                          : "the HTTP request was refused (status " + std::to_string(res.status) + ")";
          WriteError(OpenAIError(res.status, message), res);
          return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
        // not a std::exception: "unknown exception" says all there is
      }
      WriteError(OpenAIError(500, "internal error: " + what), res);
    });
    if (config.access_log) {
      http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        std::lock_guard lock(log_mutex);
        std::fprintf(stderr, "INFO:     %s:%d - \"%s %s %s\" %d\n", req.remote_addr.c_str(), req.remote_port,
                     req.method.c_str(), req.path.c_str(), req.version.c_str(), res.status);
      });
    }
  }

  void ConfigureHttp() {
    http.set_payload_max_length(kMaxBodyBytes);
    // SSE events are small writes: without TCP_NODELAY, Nagle's algorithm holds each one
    // back until the client's delayed ACK of the previous one (up to 40 ms a token).
    http.set_tcp_nodelay(true);
    // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same
    // port and silently take half of the connections; a busy port must be an error.
    http.set_socket_options([](socket_t sock) {
      const int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    DeclareRoutes();
    DeclareHandlers();
  }
};

namespace {

std::vector<std::unique_ptr<LLMEngine>> OneReplica(std::unique_ptr<LLMEngine> engine) {
  std::vector<std::unique_ptr<LLMEngine>> replicas;
  replicas.push_back(std::move(engine));
  return replicas;
}

}  // namespace

ApiServer::ApiServer(std::unique_ptr<LLMEngine> engine, ServerConfig config)
    : ApiServer(OneReplica(std::move(engine)), std::move(config), 0) {}

ApiServer::ApiServer(std::vector<std::unique_ptr<LLMEngine>> replicas, ServerConfig config,
                     int cpu_threads_per_replica)
    : impl_(std::make_unique<Impl>(std::move(replicas), std::move(config), cpu_threads_per_replica)) {
  ReturnLargeBuffersToTheSystem();
  impl_->ConfigureHttp();
}

ApiServer::~ApiServer() { Stop(); }

int ApiServer::Bind() {
  const ServerConfig& c = impl_->config;
  const int port =
      c.port == 0 ? impl_->http.bind_to_any_port(c.host) : (impl_->http.bind_to_port(c.host, c.port) ? c.port : -1);
  if (port < 0) {
    throw std::runtime_error("cannot listen on " + c.host + ":" + std::to_string(c.port) +
                             " (address in use or not on this machine?): choose another --host / --port");
  }
  impl_->http.RaiseListenBacklog(kListenBacklog);
  return port;
}

// A stop can come before the listener runs: the serve command's signal thread starts
// before Serve, and a SIGTERM just after the startup line was lost (the server ran on).
// Serve announces itself, then listens unless a stop came first; a Stop that finds
// Serve entered waits for the listener to run (or to end) so that httplib's stop()
// has something to stop. Whichever of the two flags is set second sees the other.
void ApiServer::Serve() {
  impl_->serve_entered.store(true);
  if (!impl_->stop_requested.load()) impl_->http.listen_after_bind();
  impl_->serve_ended.store(true);
}

void ApiServer::Stop() {
  impl_->stop_requested.store(true);
  if (impl_->serve_entered.load()) {
    while (!impl_->http.is_running() && !impl_->serve_ended.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  impl_->http.stop();
}

std::optional<std::string> ApiServer::engine_dead() const {
  std::lock_guard lock(impl_->dead_mutex);
  return impl_->engine_dead;
}

void ApiServer::Shutdown() {
  // How long aborted requests get to write their last chunk or answer.
  constexpr std::chrono::seconds kAbortedWriteGrace{5};
  impl_->http.BeginDrain();
  if (!impl_->WaitForConnections(std::chrono::steady_clock::now() + impl_->config.shutdown_timeout)) {
    impl_->engine->AbortAll();
    impl_->WaitForConnections(std::chrono::steady_clock::now() + kAbortedWriteGrace);
  }
  Stop();
}

}  // namespace vllm::openai
