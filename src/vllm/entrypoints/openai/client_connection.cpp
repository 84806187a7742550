#include "client_connection.h"

#include <sys/socket.h>

#include <cerrno>

namespace vllm::openai {

bool ClientConnection::Closed() const {
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;   // unread data: the client is there
  if (n == 0) return true;   // end of stream: the client closed its side
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset, or the socket is gone
}

}  // namespace vllm::openai
