// The HTTP layer under the API server: cpp-httplib parses requests and routes them;
// the connections themselves are handled here, for two reasons.
//
// - A handler can know its own socket (ConnectionSocket()), so that a non-streaming
//   request notices a client that left by probing that one descriptor
//   (client_connection.h). cpp-httplib 0.11 (Debian 12's) hands handlers neither the
//   socket nor a "closed" query, but it calls a virtual process_and_close_socket(sock)
//   for each accepted connection; HttpServer overrides it, serves the connection's
//   requests through httplib's process_request, and records the socket meanwhile.
// - At most `limit_concurrency` connections are served at once, each on a worker
//   thread of a fixed pool (uvicorn's --limit-concurrency): a connection beyond that
//   is answered 503 with `refusal_body` and closed, so that a flood of clients costs
//   neither threads nor memory.
// - A graceful shutdown first drains (BeginDrain): new connections are answered 503
//   with `draining_body` and closed, idle keep-alive connections close, and
//   num_active() counts the connections still being served.
#pragma once

#include <httplib.h>

#include <atomic>
#include <string>

namespace vllm::openai {

class HttpServer : public httplib::Server {
 public:
  // `refusal_body`: the JSON of the 503 sent to connections beyond the limit;
  // `draining_body`: the one sent to new connections once BeginDrain was called.
  HttpServer(size_t limit_concurrency, const std::string& refusal_body, const std::string& draining_body);

  // Stops serving new connections and new requests on idle ones; those in progress go on.
  void BeginDrain() { draining_ = true; }
  bool draining() const { return draining_; }
  // Connections being served (a request read, handled or written).
  int num_active() const { return num_active_; }

  // Linux lets listen() be called again on a listening socket to change its backlog
  // (Debian's cpp-httplib listens with a backlog of 5, fixed when it was built).
  void RaiseListenBacklog(int backlog);

  // The socket of the connection whose request this thread handles; -1 outside a handler.
  static int ConnectionSocket();

 private:
  // Called by httplib's accept loop, through the task queue, for every connection.
  bool process_and_close_socket(socket_t sock) override;
  bool WaitForRequest(socket_t sock) const;
  void Refuse(socket_t sock, const std::string& response) const;

  std::string refusal_response_;  // the whole HTTP response
  std::string draining_response_;
  std::atomic<bool> draining_{false};
  std::atomic<int> num_active_{0};
};

}  // namespace vllm::openai
