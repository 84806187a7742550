#include "vllm/distributed/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "vt/error.h"

namespace vllm {
namespace {

constexpr uint32_t kMaxFieldBytes = 64u << 20;  // a key or value; Gloo's addresses are ~100 bytes

std::string Errno() { return std::strerror(errno); }

// Reads exactly `size` bytes; false when the peer closed the connection or it failed.
bool ReadExactly(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteExactly(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadField(int fd, std::string* out) {
  uint32_t size = 0;
  if (!ReadExactly(fd, &size, sizeof size) || size > kMaxFieldBytes) return false;
  out->resize(size);
  return ReadExactly(fd, out->data(), size);
}

void AppendField(std::vector<char>& message, const void* data, uint32_t size) {
  const auto* bytes = reinterpret_cast<const char*>(&size);
  message.insert(message.end(), bytes, bytes + sizeof size);
  message.insert(message.end(), static_cast<const char*>(data), static_cast<const char*>(data) + size);
}

addrinfo* Resolve(const std::string& host, int port, int socktype) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* result = nullptr;
  if (const int err = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result); err != 0) {
    throw vt::Error("tcp store: cannot resolve " + host + ": " + gai_strerror(err));
  }
  return result;
}

}  // namespace

TcpStoreServer::TcpStoreServer(int port) {
  listen_fd_ = socket(AF_INET6, SOCK_STREAM, 0);
  const bool v6 = listen_fd_ >= 0;
  if (!v6) listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw vt::Error("tcp store: cannot open a socket: " + Errno());
  const int one = 1, zero = 0;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = -1;
  if (v6) {
    setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<uint16_t>(port));
    bound = bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    bound = bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
  }
  if (bound != 0 || listen(listen_fd_, 128) != 0) {
    const std::string why = Errno();
    close(listen_fd_);
    throw vt::Error("tcp store: cannot listen on port " + std::to_string(port) + " (--master-port): " + why);
  }
  sockaddr_storage actual{};
  socklen_t length = sizeof actual;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&actual), &length);
  port_ = ntohs(actual.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&actual)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&actual)->sin_port);
  if (pipe(wake_) != 0) {
    close(listen_fd_);
    throw vt::Error("tcp store: cannot make a pipe: " + Errno());
  }
  thread_ = std::thread([this] { Serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char stop = 1;
  (void)!write(wake_[1], &stop, 1);
  thread_.join();
  close(wake_[0]);
  close(wake_[1]);
  close(listen_fd_);
}

void TcpStoreServer::Serve() {
  std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client >= 0) {
        // A client that stops mid-request must not stall the others for long.
        const timeval limit{10, 0};
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        fds.push_back({client, POLLIN, 0});
      }
    }
    for (size_t i = 2; i < fds.size();) {
      if (fds[i].revents != 0 && !Answer(fds[i].fd)) {
        close(fds[i].fd);
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
  }
  for (size_t i = 2; i < fds.size(); ++i) close(fds[i].fd);
}

bool TcpStoreServer::Answer(int fd) {
  char op = 0;
  std::string key;
  if (!ReadExactly(fd, &op, 1) || !ReadField(fd, &key)) return false;
  if (op == 'S') {
    std::string value;
    if (!ReadField(fd, &value)) return false;
    values_[key] = std::vector<char>(value.begin(), value.end());
    return WriteExactly(fd, "K", 1);
  }
  if (op != 'G') return false;
  const auto it = values_.find(key);
  if (it == values_.end()) return WriteExactly(fd, "N", 1);
  std::vector<char> reply = {'Y'};
  AppendField(reply, it->second.data(), static_cast<uint32_t>(it->second.size()));
  return WriteExactly(fd, reply.data(), reply.size());
}

TcpStoreClient::TcpStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error;
  for (;;) {
    addrinfo* addresses = Resolve(host, port, SOCK_STREAM);
    for (addrinfo* a = addresses; a != nullptr && fd_ < 0; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last_error = Errno();
        close(fd);
      }
    }
    freeaddrinfo(addresses);
    if (fd_ >= 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw vt::Error("tcp store: no rank 0 answered at " + where_ + " (--master-addr, --master-port) within " +
                      std::to_string(timeout.count()) + " ms: " + last_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) close(fd_);
}

void TcpStoreClient::SendAll(const void* data, size_t size) {
  if (!WriteExactly(fd_, data, size)) throw vt::Error("tcp store: the connection to " + where_ + " failed: " + Errno());
}

void TcpStoreClient::ReceiveAll(void* data, size_t size) {
  if (!ReadExactly(fd_, data, size)) throw vt::Error("tcp store: the connection to " + where_ + " closed");
}

void TcpStoreClient::Set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<char> message = {'S'};
  AppendField(message, key.data(), static_cast<uint32_t>(key.size()));
  AppendField(message, value.data(), static_cast<uint32_t>(value.size()));
  SendAll(message.data(), message.size());
  char reply = 0;
  ReceiveAll(&reply, 1);
  if (reply != 'K') throw vt::Error("tcp store: " + where_ + " did not acknowledge setting '" + key + "'");
}

std::vector<char> TcpStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<char> message = {'G'};
  AppendField(message, key.data(), static_cast<uint32_t>(key.size()));
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      SendAll(message.data(), message.size());
      char reply = 0;
      ReceiveAll(&reply, 1);
      if (reply == 'Y') {
        uint32_t size = 0;
        ReceiveAll(&size, sizeof size);
        std::vector<char> value(size);
        ReceiveAll(value.data(), size);
        return value;
      }
      if (reply != 'N') throw vt::Error("tcp store: a malformed reply from " + where_);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw vt::Error("tcp store: '" + key + "' was not set at " + where_ + " within " +
                      std::to_string(timeout.count()) + " ms (a rank that did not join?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string LocalAddressToward(const std::string& host, int port) {
  addrinfo* addresses = Resolve(host, port, SOCK_DGRAM);
  std::string local;
  for (addrinfo* a = addresses; a != nullptr && local.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage mine{};
    socklen_t length = sizeof mine;
    char text[INET6_ADDRSTRLEN] = {};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &length) == 0) {
      const void* raw = mine.ss_family == AF_INET6
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&mine)->sin6_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&mine)->sin_addr);
      if (inet_ntop(mine.ss_family, raw, text, sizeof text) != nullptr) local = text;
    }
    close(fd);
  }
  freeaddrinfo(addresses);
  if (local.empty()) throw vt::Error("tcp store: no local interface routes to " + host);
  return local;
}

}  // namespace vllm
