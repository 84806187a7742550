// `vllm-cpp tensor-parallel-worker --rank R --world-size N (--rendezvous-dir DIR |
// --master-addr A --master-port P) [--model M]`: a worker process of
// `--tensor-parallel-size N`, started by the engine's process or, on the other hosts
// of `--nnodes`, by `serve --node-rank` (executor/multiproc_executor.h); not meant to
// be run by hand, so `vllm-cpp --help` does not list it.
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/executor/multiproc_executor.h"

namespace vllm {

int RunTensorParallelWorkerCommand(const CommandArgs& args) {
  CliArgs cli("tensor-parallel-worker");
  cli.AddOption("rank", "this worker's rank in [1, world size)");
  cli.AddOption("world-size", "ranks in the group, rank 0 (the engine's process) included");
  cli.AddOption("rendezvous-dir", "where the group's ranks meet on one host (made by rank 0)");
  cli.AddOption("master-addr", "across hosts: the host of rank 0's TCP store");
  cli.AddOption("master-port", "across hosts: the port of rank 0's TCP store");
  cli.AddOption("model", "the model this node was started for; rank 0's must be the same");
  cli.Parse(args);
  for (const char* required : {"rank", "world-size"}) {
    if (!cli.WasGiven(required)) throw CliError(std::string("--") + required + " is required");
  }
  const bool dir = cli.WasGiven("rendezvous-dir"), tcp = cli.WasGiven("master-addr") || cli.WasGiven("master-port");
  if (dir == tcp) throw CliError("give either --rendezvous-dir or both --master-addr and --master-port");
  if (tcp && !(cli.WasGiven("master-addr") && cli.WasGiven("master-port"))) {
    throw CliError("--master-addr and --master-port go together");
  }
  Rendezvous rendezvous;
  if (dir) {
    rendezvous.dir = cli.GetString("rendezvous-dir");
  } else {
    rendezvous.master_addr = cli.GetString("master-addr");
    rendezvous.master_port = static_cast<int>(cli.GetInt("master-port"));
  }
  return RunTensorParallelWorker(static_cast<int>(cli.GetInt("rank")), static_cast<int>(cli.GetInt("world-size")),
                                 rendezvous, cli.WasGiven("model") ? cli.GetString("model") : "");
}

}  // namespace vllm
