// Whether the client of an HTTP request is still connected, for answers written only
// once the engine is done (non-streaming completions and chats).
//
// A streaming answer notices a client that left when a write fails, but a
// non-streaming one writes nothing until its requests finish, and cpp-httplib 0.11
// (Debian 12's) gives handlers neither the socket nor a "connection closed" query.
// The request does carry both ends' addresses and ports, which name exactly one TCP
// connection, so the socket is found among this process's descriptors. It stays open
// and owned by the handler's connection while the handler runs, so it can be probed
// without reading from it: a peek that finds end-of-stream or a reset means the
// client closed its side.
#pragma once

#include <optional>
#include <string>

namespace vllm::openai {

struct SocketAddress {
  std::string host;  // numeric, as getnameinfo(NI_NUMERICHOST) writes it
  int port = -1;
};

class ClientConnection {
 public:
  // The socket of the TCP connection between `local` and `remote`; nullopt when this
  // process holds none (the connection is already gone).
  static std::optional<ClientConnection> Find(const SocketAddress& local, const SocketAddress& remote);

  // True once the client has closed or reset the connection. Reads nothing: data the
  // client sent ahead (a pipelined request) counts as connected.
  bool Closed() const;

 private:
  explicit ClientConnection(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace vllm::openai
