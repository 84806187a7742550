// Small helpers for tests that drive an LLMEngine (or its worker processes) directly.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <map>
#include <string>
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

}  // namespace vllm::testing
