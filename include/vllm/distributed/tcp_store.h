// Where ranks on several hosts meet (torchrun's --master-addr / --master-port, PyTorch's
// TCPStore): a key-value map served over TCP by the process of global rank 0, in
// which every rank writes its Gloo address and reads the others' (Gloo's own stores
// are a shared directory, a hash map in one process, or Redis; Debian's libgloo-dev
// has no TCP store).
//
// Wire format, one request at a time per connection, integers little-endian u32:
//   set  'S' key_len key value_len value   -> 'K'
//   get  'G' key_len key                   -> 'Y' value_len value | 'N' (not set yet)
// Get with a timeout asks again every 10 ms until the key is set. The map lives as
// long as the server; ranks only add keys.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vllm {

class TcpStoreServer {
 public:
  // Listens on `port` of every interface (0: a free port, which port() gives).
  // Throws vt::Error naming the port when it cannot listen.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();  // stops serving and closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  void Serve();
  bool Answer(int fd);  // false: the connection closed or sent a malformed request

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends Serve's poll
  int port_ = 0;
  std::map<std::string, std::vector<char>> values_;
  std::thread thread_;
};

class TcpStoreClient {
 public:
  // Connects to host:port, trying again every 50 ms until `timeout` (the server's
  // process may start after this one). Throws vt::Error naming host:port.
  TcpStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void Set(const std::string& key, const std::vector<char>& value);
  // The key's value once some rank has set it; throws vt::Error naming the key after `timeout`.
  std::vector<char> Get(const std::string& key, std::chrono::milliseconds timeout);

 private:
  void SendAll(const void* data, size_t size);
  void ReceiveAll(void* data, size_t size);

  std::string where_;  // "host:port" for errors
  int fd_ = -1;
  std::mutex mutex_;  // one request at a time on the connection
};

// The address of this host's interface that routes to `host` (a UDP socket connected
// there, no packet sent): what a rank on this host listens on for its peers.
std::string LocalAddressToward(const std::string& host, int port);

}  // namespace vllm
