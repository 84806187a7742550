// `vllm-cpp bench latency|throughput|serve`: the benchmark commands.
#include <cstdio>
#include <string>

#include "bench_commands.h"
#include "vllm/entrypoints/cli_args.h"

namespace vllm {

int RunBenchCommand(const CommandArgs& args) {
  const std::string usage =
      "usage: vllm-cpp bench latency|throughput"
#ifdef VLLM_WITH_SERVER
      "|serve"
#endif
      " [options]   (`vllm-cpp bench latency --help` lists a subcommand's options)\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("%s", usage.c_str());
    return args.empty() ? 2 : 0;
  }
  const CommandArgs rest(args.begin() + 1, args.end());
  if (args[0] == "latency") return bench::RunLatency(rest);
  if (args[0] == "throughput") return bench::RunThroughput(rest);
#ifdef VLLM_WITH_SERVER
  if (args[0] == "serve") return bench::RunServe(rest);
#endif
  throw CliError("bench: unknown subcommand '" + args[0] + "'; " + usage);
}

}  // namespace vllm
