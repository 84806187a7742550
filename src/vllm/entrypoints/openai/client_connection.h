// Whether the client of an HTTP request is still connected, for answers written only
// once the engine is done (non-streaming completions and chats).
//
// A streaming answer notices a client that left when a write fails, but a
// non-streaming one writes nothing until its requests finish. The handler's own
// socket (HttpServer::ConnectionSocket()) stays open and owned by its connection while
// the handler runs, so it can be probed without reading from it: a peek that finds
// end-of-stream or a reset means the client closed its side.
#pragma once

namespace vllm::openai {

class ClientConnection {
 public:
  explicit ClientConnection(int fd) : fd_(fd) {}

  // True once the client has closed or reset the connection. Reads nothing: data the
  // client sent ahead (a pipelined request) counts as connected.
  bool Closed() const;

 private:
  int fd_;
};

}  // namespace vllm::openai
