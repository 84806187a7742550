// The TCP store ranks on several hosts meet through (distributed/tcp_store.h): values
// set by one client are read by another, a get waits for a key set later, and what
// never comes (a key, a server) is an error naming it after the timeout.
#include "vllm/distributed/tcp_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "vt/error.h"

namespace vllm {
namespace {

using std::chrono::milliseconds;

std::vector<char> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(TcpStoreTest, AValueSetByOneClientIsReadByAnother) {
  TcpStoreServer server(0);
  ASSERT_GT(server.port(), 0);
  TcpStoreClient a("127.0.0.1", server.port(), milliseconds(5000));
  TcpStoreClient b("localhost", server.port(), milliseconds(5000));
  a.Set("rank_0", Bytes("address of rank 0"));
  EXPECT_EQ(b.Get("rank_0", milliseconds(1000)), Bytes("address of rank 0"));
  b.Set("rank_0", Bytes(""));  // overwritten, and empty values are values
  EXPECT_EQ(a.Get("rank_0", milliseconds(1000)), Bytes(""));
}

TEST(TcpStoreTest, AGetWaitsForAKeySetLater) {
  TcpStoreServer server(0);
  TcpStoreClient reader("127.0.0.1", server.port(), milliseconds(5000));
  std::thread writer([port = server.port()] {
    std::this_thread::sleep_for(milliseconds(150));
    TcpStoreClient client("127.0.0.1", port, milliseconds(5000));
    client.Set("late", Bytes("here"));
  });
  EXPECT_EQ(reader.Get("late", milliseconds(10000)), Bytes("here"));
  writer.join();
}

TEST(TcpStoreTest, AKeyNeverSetIsAnErrorNamingIt) {
  TcpStoreServer server(0);
  TcpStoreClient client("127.0.0.1", server.port(), milliseconds(5000));
  try {
    client.Get("rank_3", milliseconds(100));
    ADD_FAILURE() << "a missing key was returned";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rank_3' was not set"), std::string::npos) << e.what();
  }
}

TEST(TcpStoreTest, NoServerIsAnErrorNamingTheAddress) {
  int port = 0;
  {
    TcpStoreServer gone(0);  // a port that was free a moment ago, and is closed again
    port = gone.port();
  }
  try {
    TcpStoreClient client("127.0.0.1", port, milliseconds(200));
    ADD_FAILURE() << "connected to a closed port";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
  }
}

TEST(TcpStoreTest, ThePortInUseIsAnErrorNamingIt) {
  TcpStoreServer first(0);
  EXPECT_THROW(TcpStoreServer second(first.port()), vt::Error);
}

TEST(TcpStoreTest, TheLocalAddressTowardLoopbackIsLoopback) {
  EXPECT_EQ(LocalAddressToward("127.0.0.1", 29501), "127.0.0.1");
}

}  // namespace
}  // namespace vllm
