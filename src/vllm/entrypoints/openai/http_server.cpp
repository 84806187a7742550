#include "http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "client_connection.h"

namespace vllm::openai {
namespace {

// What the task queue decided for the connection the thread is about to take
// (process_and_close_socket receives nothing but the socket).
enum class Admission { kServe, kRefuse, kDrop };
thread_local Admission t_admission = Admission::kServe;
thread_local int t_connection_socket = -1;

// Waits up to `timeout_ms` for `events` on `sock`; false on timeout or error.
bool PollFor(int sock, short events, int timeout_ms) {
  pollfd entry{sock, events, 0};
  int n;
  do {
    n = poll(&entry, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

int Milliseconds(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

// The numeric address and port of one end of a socket, as httplib writes them.
void EndOf(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  auto* address = reinterpret_cast<sockaddr*>(&storage);
  if ((peer ? getpeername(sock, address, &length) : getsockname(sock, address, &length)) != 0) return;
  if (storage.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  } else if (storage.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  } else {
    return;
  }
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(address, length, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) == 0) ip = host.data();
}

// One request's view of its connection (httplib's SocketStream, which Debian's build of
// httplib does not declare): reads go through a small buffer, because httplib reads
// request lines a byte at a time; every wait ends after the server's timeouts.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int sock, int read_timeout_ms, int write_timeout_ms)
      : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override { return PollFor(sock_, POLLIN, read_timeout_ms_); }
  // A client that closed its side cannot read what is written: as httplib does, that
  // counts as not writable, which is how a stream notices a client that left.
  bool is_writable() const override {
    return PollFor(sock_, POLLOUT, write_timeout_ms_) && !ClientConnection(sock_).Closed();
  }
  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!is_readable()) return -1;
      if (size >= buffer_.size()) return Receive(ptr, size);  // a body: no copy through the buffer
      const ssize_t n = Receive(buffer_.data(), buffer_.size());
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = send(sock_, ptr, size, MSG_NOSIGNAL);  // a gone client is an error, not SIGPIPE
    } while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { EndOf(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { EndOf(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t Receive(char* ptr, size_t size) const {
    ssize_t n;
    do {
      n = recv(sock_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  int sock_;
  int read_timeout_ms_;
  int write_timeout_ms_;
  std::array<char, 4096> buffer_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes of buffer_
};

// httplib's task queue with a fixed number of workers and no waiting room: a connection
// that finds every worker taken is handed to one refusing thread (a 503), or, when even
// that one is behind, closed at once on the accepting thread.
class ConnectionPool : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(size_t num_workers) : num_workers_(num_workers) {
    for (size_t i = 0; i < num_workers; ++i) workers_.emplace_back([this] { Take(accepted_, accepted_ready_); });
    refuser_ = std::thread([this] { Take(refused_, refused_ready_); });
  }
  ~ConnectionPool() override {
    if (refuser_.joinable()) shutdown();
  }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mutex_);
    if (accepted_.size() + num_busy_ < num_workers_) {
      accepted_.push_back({std::move(fn), Admission::kServe});
      lock.unlock();
      accepted_ready_.notify_one();
    } else if (refused_.size() < kMaxPendingRefusals) {
      refused_.push_back({std::move(fn), Admission::kRefuse});
      lock.unlock();
      refused_ready_.notify_one();
    } else {
      lock.unlock();
      Run({std::move(fn), Admission::kDrop});
    }
  }

  // As httplib's ThreadPool: what was queued is still run, then the threads end.
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
    }
    accepted_ready_.notify_all();
    refused_ready_.notify_all();
    for (std::thread& worker : workers_) worker.join();
    refuser_.join();
  }

 private:
  struct Connection {
    std::function<void()> process;  // httplib's call of process_and_close_socket
    Admission admission;
  };
  // Refusals wait behind one another for at most this many (each takes up to a second).
  static constexpr size_t kMaxPendingRefusals = 64;

  static void Run(const Connection& connection) {
    t_admission = connection.admission;
    connection.process();
    t_admission = Admission::kServe;
  }

  void Take(std::deque<Connection>& queue, std::condition_variable& ready) {
    for (;;) {
      std::unique_lock lock(mutex_);
      ready.wait(lock, [&] { return !queue.empty() || shutting_down_; });
      if (queue.empty()) return;
      const Connection connection = std::move(queue.front());
      queue.pop_front();
      const bool serves = connection.admission == Admission::kServe;
      num_busy_ += serves;
      lock.unlock();
      Run(connection);
      lock.lock();
      num_busy_ -= serves;
    }
  }

  const size_t num_workers_;
  std::mutex mutex_;
  std::condition_variable accepted_ready_, refused_ready_;
  std::deque<Connection> accepted_, refused_;
  size_t num_busy_ = 0;  // workers serving a connection
  bool shutting_down_ = false;
  std::vector<std::thread> workers_;
  std::thread refuser_;
};

}  // namespace

namespace {

std::string ServiceUnavailable(const std::string& body) {
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

HttpServer::HttpServer(size_t limit_concurrency, const std::string& refusal_body, const std::string& draining_body)
    : refusal_response_(ServiceUnavailable(refusal_body)), draining_response_(ServiceUnavailable(draining_body)) {
  new_task_queue = [limit_concurrency] { return new ConnectionPool(limit_concurrency); };
}

void HttpServer::RaiseListenBacklog(int backlog) { ::listen(svr_sock_, backlog); }

int HttpServer::ConnectionSocket() { return t_connection_socket; }

// httplib's own loop (keep-alive up to keep_alive_max_count_ requests), with the socket
// recorded for the handlers and the refusals of the pool.
bool HttpServer::process_and_close_socket(socket_t sock) {
  if (t_admission == Admission::kRefuse) Refuse(sock, refusal_response_);
  // Counted before draining_ is read: a drain that finds no connection active sees none start.
  const bool serves = t_admission == Admission::kServe && (++num_active_, !draining_);
  if (t_admission == Admission::kServe && !serves) {
    --num_active_;
    Refuse(sock, draining_response_);
  }
  bool served = false;
  if (serves) {
    t_connection_socket = sock;
    for (size_t left = keep_alive_max_count_; left > 0 && WaitForRequest(sock); --left) {
      ConnectionStream stream(sock, Milliseconds(read_timeout_sec_, read_timeout_usec_),
                              Milliseconds(write_timeout_sec_, write_timeout_usec_));
      bool connection_closed = false;
      served = process_request(stream, left == 1, connection_closed, nullptr);
      if (!served || connection_closed) break;
    }
    t_connection_socket = -1;
    --num_active_;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return served;
}

// Waits for the next request of a connection: false once the client closed it, it
// stayed idle past the keep-alive timeout, or the server stops.
bool HttpServer::WaitForRequest(socket_t sock) const {
  constexpr int kSliceMs = 100;  // how soon an idle connection notices that the server stops
  for (int waited = 0; svr_sock_ != INVALID_SOCKET && !draining_; waited += kSliceMs) {
    if (PollFor(sock, POLLIN, kSliceMs)) return true;
    if (waited >= keep_alive_timeout_sec_ * 1000) return false;
  }
  return false;
}

// The 503, then a lingering close: closing with the request unread would reset the
// connection, and the client could lose the answer with it. So the request is read
// and dropped until the client closes, for at most a second and 1 MiB.
void HttpServer::Refuse(socket_t sock, const std::string& response) const {
  ssize_t n;
  do {
    n = send(sock, response.data(), response.size(), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  ::shutdown(sock, SHUT_WR);
  constexpr size_t kMaxDrainBytes = size_t{1} << 20;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::array<char, 4096> discard;
  for (size_t drained = 0; drained < kMaxDrainBytes;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !PollFor(sock, POLLIN, static_cast<int>(left.count()))) break;
    const ssize_t got = recv(sock, discard.data(), discard.size(), 0);
    if (got <= 0) break;
    drained += static_cast<size_t>(got);
  }
}

}  // namespace vllm::openai
