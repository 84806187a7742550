// The vllm-cpp subcommands. Each takes the arguments after its name and returns
// the process exit code; errors are reported on stderr by main().
#pragma once

#include <string>
#include <vector>

namespace vllm {

using CommandArgs = std::vector<std::string>;

// Lists the backends, their devices and the op coverage matrix, then runs a tiny
// computation on every available device.
int RunSelfCheckCommand(const CommandArgs& args);

// Runs prompts through the engine (vllm-cpp generate --model PATH ...).
int RunGenerateCommand(const CommandArgs& args);

// An interactive chat in the terminal over the model's chat template: a user turn per
// line of stdin, each reply streamed to stdout (vllm-cpp chat [--model PATH] ...).
int RunChatCommand(const CommandArgs& args);

// Prints the token ids of texts (vllm-cpp tokenize --model PATH --text TEXT ...).
int RunTokenizeCommand(const CommandArgs& args);

// Prints what a model folder or GGUF file holds: format, architecture, config,
// tensor count, tensors per dtype, bytes (vllm-cpp info PATH).
int RunInfoCommand(const CommandArgs& args);

// The OpenAI-compatible server (vllm-cpp serve MODEL --port 8000 ...).
int RunServeCommand(const CommandArgs& args);

// Writes an HF checkpoint folder as a GGUF file (vllm-cpp convert HF_FOLDER OUT.gguf).
int RunConvertCommand(const CommandArgs& args);

// A worker process of --tensor-parallel-size (started by the engine, not by hand).
int RunTensorParallelWorkerCommand(const CommandArgs& args);

// Benchmarks: `vllm-cpp bench latency|throughput|serve` (vLLM's `vllm bench`).
int RunBenchCommand(const CommandArgs& args);

}  // namespace vllm
