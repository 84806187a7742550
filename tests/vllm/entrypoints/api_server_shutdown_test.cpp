// The graceful stop: ApiServer::Shutdown takes no new requests, lets running ones
// finish for up to shutdown_timeout, then ends them with finish_reason "abort" (a
// stream with its last chunk and [DONE]); `vllm-cpp serve` does so on SIGTERM and
// exits 0, and a second signal exits at once.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>

#include <future>

#include "server_fixture.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::RawConnection;
using testing::TestServer;

// Long enough that no request below finishes on its own before the server aborts it.
EngineConfig LongEngineConfig() {
  EngineConfig c = testing::ServerEngineConfig();
  c.max_model_len = 4096;
  return c;
}

openai::ServerConfig WithShutdownTimeout(std::chrono::milliseconds timeout) {
  openai::ServerConfig c = testing::QuietServerConfig();
  c.shutdown_timeout = timeout;
  return c;
}

// The JSON events of the SSE body in `received` (HTTP framing around them skipped).
std::vector<json> EventsIn(const std::string& received) {
  std::vector<json> events;
  for (size_t at = received.find("data: {"); at != std::string::npos; at = received.find("data: {", at + 1)) {
    events.push_back(json::parse(received.substr(at + 6, received.find('\n', at) - at - 6)));
  }
  return events;
}

std::string StreamRequest(int max_tokens) {
  json body = Greedy({{"prompt", "hello"}, {"stream", true}}, max_tokens);
  return body.dump();
}

TEST(ApiServerShutdownTest, RequestsPastTheTimeoutEndAbortedWithTheirLastChunkAndDone) {
  TestServer server(LongEngineConfig(), WithShutdownTimeout(std::chrono::milliseconds(0)));
  RawConnection stream(server.port());
  ASSERT_TRUE(stream.Post("/v1/completions", StreamRequest(4000)));
  ASSERT_TRUE(stream.ReadUntil("data: {"));
  auto whole = std::async(std::launch::async, [&] {
    return server.Post("/v1/completions", Greedy({{"prompt", "hello"}}, 4000));
  });
  while (server.Metric("vllm:num_requests_running") < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  server.Shutdown();
  ASSERT_TRUE(stream.ReadUntil("data: [DONE]"));
  const std::vector<json> events = EventsIn(stream.received());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "abort") << events.back();
  httplib::Result answer = whole.get();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200) << answer->body;
  const json body = json::parse(answer->body);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "abort");
  EXPECT_LT(body["usage"]["completion_tokens"].get<int>(), 4000);
  EXPECT_FALSE(server.Client().Get("/health")) << "the server still answers after Shutdown";
}

TEST(ApiServerShutdownTest, RequestsWithinTheTimeoutFinishAndNewOnesGet503) {
  TestServer server(LongEngineConfig(), WithShutdownTimeout(std::chrono::seconds(60)));
  // A request whose body never comes holds the drain open until the test closes it.
  RawConnection held(server.port());
  ASSERT_TRUE(held.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  RawConnection stream(server.port());
  ASSERT_TRUE(stream.Post("/v1/completions", StreamRequest(40)));
  ASSERT_TRUE(stream.ReadUntil("data: {"));
  const auto started = std::chrono::steady_clock::now();
  auto shutdown = std::async(std::launch::async, [&] { server.Shutdown(); });
  ASSERT_TRUE(stream.ReadUntil("data: [DONE]"));
  const std::vector<json> events = EventsIn(stream.received());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
  // The stream can end before the shutdown thread has begun draining (a loaded
  // machine): a request until then is served; one after it gets 503.
  std::string late_answer;
  for (int attempt = 0; attempt < 200 && late_answer.find("503") == std::string::npos; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    RawConnection late(server.port());
    ASSERT_TRUE(late.Post("/v1/completions", StreamRequest(4)));
    late.ReadUntil("}");
    late_answer = late.received();
  }
  EXPECT_NE(late_answer.find("503"), std::string::npos) << late_answer;
  EXPECT_NE(late_answer.find("shutting down"), std::string::npos) << late_answer;
  EXPECT_EQ(shutdown.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  held.Close();
  shutdown.get();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
}

// `vllm-cpp serve` in a child process, its stderr read until it says where it listens.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& shutdown_timeout) {
    int err[2];
    EXPECT_EQ(pipe(err), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(err[1], STDERR_FILENO);
      close(err[0]);
      const std::string model = testing::ServerModelDir(), tokenizer = testing::ServerTokenizerDir();
      execl(VLLM_CPP_BINARY, VLLM_CPP_BINARY, "serve", "--model", model.c_str(), "--tokenizer", tokenizer.c_str(),
            "--port", "0", "--max-model-len", "4K", "--num-gpu-blocks-override", "512", "--threads", "1",
            "--shutdown-timeout", shutdown_timeout.c_str(), "--disable-uvicorn-access-log", nullptr);
      _exit(127);
    }
    close(err[1]);
    stderr_ = fdopen(err[0], "r");
    char line[4096];
    while (port_ == 0 && fgets(line, sizeof(line), stderr_)) {
      const char* at = std::strstr(line, "on http://127.0.0.1:");
      if (at) port_ = std::atoi(at + std::strlen("on http://127.0.0.1:"));
      if (at) startup_line_ = line;
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stderr_) fclose(stderr_);
  }

  int port() const { return port_; }
  const std::string& startup_line() const { return startup_line_; }
  void Signal(int signal_number) const { kill(pid_, signal_number); }
  // The exit status, or -1 if the process has not ended within `timeout`.
  int WaitForExit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* stderr_ = nullptr;
  int port_ = 0;
  std::string startup_line_;
  bool exited_ = false;
};

TEST(ApiServerShutdownTest, SigtermClosesStreamsAndExitsZero) {
  ServeProcess serve("0");
  ASSERT_GT(serve.port(), 0);
  // The startup line says where, on what and with how much cache (stderr is a pipe: no progress bar).
  for (const char* piece : {"device cpu", "dtype f32", "weights f32", "KV cache 8176 tokens (",
                            "maximum concurrency 2.00 at max_model_len 4096", "prefix caching on (the default"}) {
    EXPECT_NE(serve.startup_line().find(piece), std::string::npos) << piece << " not in " << serve.startup_line();
  }
  EXPECT_EQ(serve.startup_line().find("loading"), std::string::npos);
  RawConnection stream(serve.port());
  ASSERT_TRUE(stream.Post("/v1/completions", StreamRequest(4000)));
  ASSERT_TRUE(stream.ReadUntil("data: {"));
  serve.Signal(SIGTERM);
  ASSERT_TRUE(stream.ReadUntil("data: [DONE]"));
  EXPECT_EQ(EventsIn(stream.received()).back()["choices"][0]["finish_reason"], "abort");
  EXPECT_EQ(serve.WaitForExit(std::chrono::seconds(20)), 0);
}

TEST(ApiServerShutdownTest, ASecondSignalExitsAtOnce) {
  ServeProcess serve("60");
  ASSERT_GT(serve.port(), 0);
  RawConnection held(serve.port());  // a request that never completes keeps the drain waiting
  ASSERT_TRUE(held.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  // Time for the server to accept the connection and start reading it (a sanitizer
  // build needs several times the 100 ms an optimized one does).
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  serve.Signal(SIGINT);
  EXPECT_EQ(serve.WaitForExit(std::chrono::milliseconds(300)), -1) << "the first signal did not wait for the request";
  serve.Signal(SIGINT);
  EXPECT_EQ(serve.WaitForExit(std::chrono::seconds(2)), 128 + SIGINT);
}

// On a terminal (a pseudo-terminal here) `serve` draws a loading bar that ends at
// N/N, then the startup line naming the device, dtype, weight format, KV cache in
// tokens and GiB, the maximum concurrency and prefix caching.
// A stop that comes before Serve, or while it starts, is not lost: `vllm-cpp serve`'s
// signal thread starts before Serve, and a SIGTERM just after the startup line once
// left the server running (ServeOnATerminal... timed out in ctest).
TEST(ApiServerShutdownTest, AStopBeforeOrAsServeStartsEndsIt) {
  const EngineConfig engine = testing::ServerEngineConfig();
  for (int delay_us : {-1, 0, 50, 500, 5000}) {
    SCOPED_TRACE("delay " + std::to_string(delay_us) + " us");
    std::vector<std::unique_ptr<LLMEngine>> replicas;
    replicas.push_back(std::make_unique<LLMEngine>(engine));
    openai::ApiServer server(std::move(replicas), testing::QuietServerConfig(), 0);
    server.Bind();
    if (delay_us < 0) server.Stop();  // strictly before: Serve returns at once
    std::thread stopper([&] {
      if (delay_us < 0) return;
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      server.Shutdown();
    });
    auto served = std::async(std::launch::async, [&] { server.Serve(); });
    EXPECT_EQ(served.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "the stop was lost";
    stopper.join();
    if (served.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      server.Stop();  // a lost stop: end it anyway, so that the test fails instead of hanging
      served.wait();
    }
  }
}

TEST(ApiServerShutdownTest, ServeOnATerminalShowsLoadingProgressAndTheStartupLine) {
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string model = testing::ServerModelDir(), tokenizer = testing::ServerTokenizerDir();
    execl(VLLM_CPP_BINARY, VLLM_CPP_BINARY, "serve", "--model", model.c_str(), "--tokenizer", tokenizer.c_str(),
          "--port", "0", "--max-model-len", "4K", "--num-gpu-blocks-override", "512", "--threads", "1",
          "--shutdown-timeout", "0", "--disable-uvicorn-access-log", nullptr);
    _exit(127);
  }
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (output.find("on http://") == std::string::npos || output.find("prefix caching") == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) break;
    pollfd readable{terminal, POLLIN, 0};
    if (poll(&readable, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(terminal, buffer, sizeof(buffer));
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  close(terminal);
  EXPECT_NE(output.find("vllm-cpp serve: loading "), std::string::npos) << output;
  EXPECT_NE(output.find("[" + std::string(30, '=') + "]"), std::string::npos) << output;  // the bar at N/N
  for (const char* part : {"on http://", "device cpu", "dtype ", "weights ", "KV cache ", " tokens (", " GiB)",
                           "maximum concurrency ", "prefix caching "}) {
    EXPECT_NE(output.find(part), std::string::npos) << part << " in " << output;
  }
}

}  // namespace
}  // namespace vllm
