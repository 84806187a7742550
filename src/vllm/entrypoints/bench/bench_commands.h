// The `vllm-cpp bench` subcommands (vLLM's `vllm bench latency|throughput|serve`).
// Each takes the arguments after its name and returns the exit code.
#pragma once

#include "vllm/entrypoints/commands.h"

namespace vllm::bench {

// A fixed batch: time to first token and per-token decode time, against the
// decode roofline measured in the same run.
int RunLatency(const CommandArgs& args);
// Offline throughput of many prompts run to completion.
int RunThroughput(const CommandArgs& args);
// An OpenAI-protocol load generator against a running server.
int RunServe(const CommandArgs& args);

}  // namespace vllm::bench
