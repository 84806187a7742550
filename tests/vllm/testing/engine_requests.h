// Small helpers for tests that drive an LLMEngine (or its worker processes) directly.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "vllm/engine/llm_engine.h"

namespace vllm::testing {

// Greedy sampling of exactly max_tokens tokens (EOS ignored).
inline SamplingParams GreedyParams(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Steps until every request has finished; the final outputs by request id.
inline std::map<std::string, RequestOutput> RunToCompletion(LLMEngine& engine) {
  std::map<std::string, RequestOutput> done;
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      if (out.finished) done[out.request_id] = std::move(out);
    }
  }
  return done;
}

// The pids of the calling thread's child processes (the workers an engine started).
inline std::vector<pid_t> ChildProcesses() {
  std::ifstream in("/proc/thread-self/children");
  std::vector<pid_t> pids;
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

// Waits (up to 10 s) until child `pid` of this process has exited and can be reaped,
// leaving it to its parent's next waitpid; true when it has. (Its /proc state turns to
// 'Z' earlier: when the main thread has exited but other threads are still going, and
// waitpid does not report it yet.)
inline bool WaitUntilExited(pid_t pid) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace vllm::testing
