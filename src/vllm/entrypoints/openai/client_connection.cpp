#include "client_connection.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace vllm::openai {
namespace {

// The address of one end of a socket (`peer` or our own), or nullopt when it has none
// (not a connected inet socket).
std::optional<SocketAddress> EndOf(int fd, bool peer) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  auto* address = reinterpret_cast<sockaddr*>(&storage);
  if ((peer ? getpeername(fd, address, &length) : getsockname(fd, address, &length)) != 0) return std::nullopt;
  if (storage.ss_family != AF_INET && storage.ss_family != AF_INET6) return std::nullopt;
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(address, length, host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return std::nullopt;
  }
  return SocketAddress{host, std::atoi(port)};
}

bool Same(const std::optional<SocketAddress>& a, const SocketAddress& b) {
  return a && a->port == b.port && a->host == b.host;
}

}  // namespace

std::optional<ClientConnection> ClientConnection::Find(const SocketAddress& local, const SocketAddress& remote) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    struct stat info{};
    if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
    if (Same(EndOf(fd, true), remote) && Same(EndOf(fd, false), local)) return ClientConnection(fd);
  }
  return std::nullopt;
}

bool ClientConnection::Closed() const {
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;   // unread data: the client is there
  if (n == 0) return true;   // end of stream: the client closed its side
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset, or the socket is gone
}

}  // namespace vllm::openai
