// Tensor parallelism over worker processes on one host (vLLM's MultiprocExecutor,
// `--tensor-parallel-size N`): the engine's process is rank 0 (scheduler, sampler and
// its shard of the model); ranks 1..N-1 are processes it starts (`vllm-cpp
// tensor-parallel-worker`), each running its shard of every step. They meet in a
// Gloo group (distributed/gloo_communicator.h) that carries both the model's
// collectives and these messages, broadcast by rank 0:
//
//   rank 0 (LLMEngine)                       rank r (RunTensorParallelWorker)
//   MultiprocExecutor: start, join     <->   join the group
//   SendModel (path, load options, dtype) -> load the checkpoint, build its shard
//   SendCaches (the cache plan)           -> allocate the same pages and slots
//   every step: SendStep(output), Execute -> ExecuteModel(output): the same forward,
//                                            so the same collectives in the same order
//   ~MultiprocExecutor: shutdown, reap    -> exit 0
//
// A worker that dies makes rank 0's next collective throw (its connection closes);
// the engine's step then fails with that message. A worker whose engine dies gets
// SIGTERM (PR_SET_PDEATHSIG) and leaves.
//
// Several hosts (torchrun's flags: --nnodes K --node-rank R --master-addr A
// --master-port P): node R holds ranks [R N/K, (R + 1) N/K). Node 0 is the engine's
// (rank 0 serves the TCP store at A:P and starts its node's other ranks); every other
// node runs RunTensorParallelNode, which starts its ranks and waits for them. The
// ranks meet through the TCP store and listen on their host's interface toward A.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "vllm/core/scheduler_output.h"
#include "vllm/distributed/communicator.h"
#include "vllm/model_loader/model_loader.h"
#include "vt/dtype.h"

namespace vllm {

struct WorkerModelInit {
  std::string model;  // HF folder or GGUF path (each rank maps it and takes its shard)
  GdnValueHeadOrder gdn_value_head_order = GdnValueHeadOrder::kAuto;
  vt::DType activation_dtype = vt::DType::kF32;
  int num_threads = 0;  // CPU threads of the rank (0: its share of the hardware threads)
  bool enable_expert_parallel = false;
};

struct WorkerCacheInit {
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t num_state_slots = 0;
  int64_t num_state_snapshots = 0;
  vt::DType cache_dtype = vt::DType::kF32;
  uint64_t seed = 0;
};

class TcpStoreServer;

// Where the ranks meet: a fresh directory on one host, or the TCP store across hosts.
struct Rendezvous {
  std::string dir;
  std::string master_addr;
  int master_port = 0;
};

struct MultiNode {
  int nnodes = 1;
  std::string master_addr;  // required when nnodes > 1
  int master_port = 0;
};

// The ranks each node holds (world_size / nnodes); throws vt::Error naming the flags
// when the nodes do not divide the group or have no valid --master-addr / --master-port.
int RanksPerNode(int world_size, const MultiNode& nodes);

class MultiprocExecutor {
 public:
  // Starts this node's workers (ranks 1 .. world_size / nnodes - 1) running `program`
  // (empty: this executable) and joins the group as rank 0. Throws vt::Error when a
  // worker cannot be started or the group does not meet within `timeout` (one
  // minute at most on one host, where every rank starts here).
  MultiprocExecutor(int world_size, const std::string& program, std::chrono::milliseconds timeout,
                    const MultiNode& nodes = {});
  ~MultiprocExecutor();  // tells the workers to leave and waits for them
  MultiprocExecutor(const MultiprocExecutor&) = delete;
  MultiprocExecutor& operator=(const MultiprocExecutor&) = delete;

  Communicator& group() { return *group_; }
  // Each Send first checks that this node's workers are alive (CheckWorkers).
  void SendModel(const WorkerModelInit& init);
  void SendCaches(const WorkerCacheInit& init);
  void SendStep(const SchedulerOutput& output);

 private:
  // Throws vt::Error naming the rank, pid and exit status of a worker of this node
  // that has exited (reaping it). Without it, a step after a worker's death goes into
  // a collective with the dead rank, which Gloo usually fails at once (the peer's
  // socket closed) but in about 1 run in 24 under load only at the group's timeout
  // (10 minutes). A worker dying in the middle of a step is still left to Gloo.
  void CheckWorkers();
  void Shutdown();

  int world_size_;

  std::string rendezvous_dir_;
  std::unique_ptr<TcpStoreServer> store_;  // across hosts: the rendezvous rank 0 serves
  std::vector<pid_t> workers_;
  std::unique_ptr<Communicator> group_;
};

// The worker process: joins the group as `rank`, follows rank 0's messages until the
// shutdown message; returns the process exit code (errors are printed to stderr).
// A non-empty `expected_model` must equal the model rank 0 sends (the model a node's
// command line named).
int RunTensorParallelWorker(int rank, int world_size, const Rendezvous& rendezvous,
                            const std::string& expected_model = "");

// Node `node_rank` (>= 1) of `nodes`: starts that node's ranks of a world_size group
// as worker processes running `program` (empty: this executable) and waits for them;
// returns 0 when all of them left on rank 0's shutdown message, else 1.
int RunTensorParallelNode(int node_rank, int world_size, const MultiNode& nodes, const std::string& model,
                          const std::string& program);

}  // namespace vllm
