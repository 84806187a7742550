// `vllm-cpp tensor-parallel-worker --rank R --world-size N --rendezvous-dir DIR`: a
// worker process of `--tensor-parallel-size N`, started by the engine's process
// (executor/multiproc_executor.h); not meant to be run by hand, so `vllm-cpp --help`
// does not list it.
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/executor/multiproc_executor.h"

namespace vllm {

int RunTensorParallelWorkerCommand(const CommandArgs& args) {
  CliArgs cli("tensor-parallel-worker");
  cli.AddOption("rank", "this worker's rank in [1, world size)");
  cli.AddOption("world-size", "ranks in the group, rank 0 (the engine's process) included");
  cli.AddOption("rendezvous-dir", "where the group's ranks meet (made by rank 0)");
  cli.Parse(args);
  for (const char* required : {"rank", "world-size", "rendezvous-dir"}) {
    if (!cli.WasGiven(required)) throw CliError(std::string("--") + required + " is required");
  }
  return RunTensorParallelWorker(static_cast<int>(cli.GetInt("rank")), static_cast<int>(cli.GetInt("world-size")),
                                 cli.GetString("rendezvous-dir"));
}

}  // namespace vllm
