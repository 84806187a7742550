// vllm-cpp: one binary, several subcommands (vLLM's command names where they exist).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "vllm/demo_model/demo_model.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/version.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const vllm::CommandArgs&);
};

constexpr Command kCommands[] = {
    {"selfcheck", "list backends, devices and op coverage; run a small check on each device",
     vllm::RunSelfCheckCommand},
    {"generate", "run prompts through the engine and print the completions", vllm::RunGenerateCommand},
    {"chat", "an interactive chat in the terminal (the model's chat template)", vllm::RunChatCommand},
#ifdef VLLM_WITH_SERVER  // builds without cpp-httplib (CMake VT_BUILD_SERVER) have no server
    {"serve", "start the OpenAI-compatible server (completions, chat, tokenize, metrics)", vllm::RunServeCommand},
#endif
    {"tokenize", "print the token ids of texts with a model's tokenizer", vllm::RunTokenizeCommand},
    {"info", "print a model's format, architecture, config, tensors, dtypes and bytes", vllm::RunInfoCommand},
    {"bench", "benchmarks: latency, throughput, serve (an OpenAI load generator)", vllm::RunBenchCommand},
    {"convert", "write an HF checkpoint folder as a GGUF file (--outtype f16, q8_0, q4_k, ...)", vllm::RunConvertCommand},
    // Started by the engine for --tensor-parallel-size (no summary: not listed).
    {"tensor-parallel-worker", nullptr, vllm::RunTensorParallelWorkerCommand},
};

void PrintUsage() {
  std::printf("vllm-cpp %s\nusage: vllm-cpp COMMAND [options]\n\ncommands:\n", vllm::Version());
  for (const Command& c : kCommands) {
    if (c.summary != nullptr) std::printf("  %-10s %s\n", c.name, c.summary);
  }
  std::printf("\n`vllm-cpp COMMAND --help` describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  vllm::RegisterDemoModel();  // "vllm-cpp/demo": the model of generate / chat / serve when none is given
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("%s\n", vllm::Version());
    return 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(vllm::CommandArgs(argv + 2, argv + argc));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vllm-cpp %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "vllm-cpp: unknown command '%s'\n\n", argv[1]);
  PrintUsage();
  return 2;
}
