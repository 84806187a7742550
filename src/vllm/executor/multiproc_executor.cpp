#include "vllm/executor/multiproc_executor.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "vllm/core/scheduler_output_codec.h"
#include "vllm/distributed/gloo_communicator.h"
#include "vllm/distributed/tcp_store.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/model_executor/models/model_registry.h"
#include "vllm/worker/cache_engine.h"
#include "vllm/worker/model_runner.h"
#include "vt/error.h"
#include "vt/ops.h"

extern char** environ;

namespace vllm {
namespace {

enum class MessageKind : uint8_t { kModel = 1, kCaches = 2, kStep = 3, kShutdown = 4 };

// A worker waits this long for rank 0's next message (an idle server sends none);
// a dead rank 0 is noticed at once (its connections close) or by PR_SET_PDEATHSIG.
constexpr std::chrono::milliseconds kIdleTimeout = std::chrono::hours(24 * 365);

void Send(Communicator& group, MessageKind kind, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> bytes;
  bytes.reserve(payload.size() + 1);
  bytes.push_back(static_cast<uint8_t>(kind));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  BroadcastBytes(group, bytes, 0);
}

std::vector<uint8_t> JsonBytes(const nlohmann::json& j) {
  const std::string text = j.dump();
  return {text.begin(), text.end()};
}

nlohmann::json BytesJson(const std::vector<uint8_t>& bytes) {
  return nlohmann::json::parse(bytes.begin() + 1, bytes.end());
}

GlooOptions GroupOptions(int rank, int world_size, const Rendezvous& rendezvous, std::chrono::milliseconds timeout) {
  GlooOptions options{.rank = rank, .world_size = world_size, .rendezvous_dir = rendezvous.dir, .timeout = timeout};
  if (!rendezvous.master_addr.empty()) {
    options.master_addr = rendezvous.master_addr;
    options.master_port = rendezvous.master_port;
    options.hostname = LocalAddressToward(rendezvous.master_addr, rendezvous.master_port);
  }
  return options;
}

// Starts `program tensor-parallel-worker` as `rank` (the program: this executable when empty).
pid_t StartWorker(const std::string& program, int rank, int world_size, const Rendezvous& rendezvous,
                  const std::string& model) {
  // This executable's own path (what `ps` then shows), or the program asked for.
  const std::string exe = program.empty() ? std::filesystem::read_symlink("/proc/self/exe").string() : program;
  std::vector<std::string> args = {exe, "tensor-parallel-worker", "--rank", std::to_string(rank), "--world-size",
                                   std::to_string(world_size)};
  if (rendezvous.master_addr.empty()) {
    args.insert(args.end(), {"--rendezvous-dir", rendezvous.dir});
  } else {
    args.insert(args.end(), {"--master-addr", rendezvous.master_addr, "--master-port",
                             std::to_string(rendezvous.master_port)});
  }
  if (!model.empty()) args.insert(args.end(), {"--model", model});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ); err != 0) {
    throw vt::Error("tensor parallel: cannot start worker rank " + std::to_string(rank) + " (" + exe +
                    "): " + std::strerror(err));
  }
  return pid;
}

}  // namespace

int RanksPerNode(int world_size, const MultiNode& nodes) {
  if (nodes.nnodes < 1 || world_size % nodes.nnodes != 0) {
    throw vt::Error("tensor parallel: --nnodes " + std::to_string(nodes.nnodes) +
                    " does not divide --tensor-parallel-size " + std::to_string(world_size));
  }
  if (nodes.nnodes > 1 && (nodes.master_addr.empty() || nodes.master_port < 1 || nodes.master_port > 65535)) {
    throw vt::Error("tensor parallel: --nnodes " + std::to_string(nodes.nnodes) +
                    " needs --master-addr and a --master-port in [1, 65535]");
  }
  return world_size / nodes.nnodes;
}

MultiprocExecutor::MultiprocExecutor(int world_size, const std::string& program, std::chrono::milliseconds timeout,
                                     const MultiNode& nodes)
    : world_size_(world_size) {
  if (world_size < 2) throw vt::Error("MultiprocExecutor: a tensor-parallel group needs 2 or more ranks");
  const int per_node = RanksPerNode(world_size, nodes);
  Rendezvous rendezvous;
  if (nodes.nnodes > 1) {
    store_ = std::make_unique<TcpStoreServer>(nodes.master_port);
    rendezvous = {.master_addr = nodes.master_addr, .master_port = nodes.master_port};
  } else {
    std::string dir = (std::filesystem::temp_directory_path() / "vllm-cpp-tp-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) {
      throw vt::Error("tensor parallel: cannot create a rendezvous directory in /tmp");
    }
    rendezvous_dir_ = rendezvous.dir = dir;
  }
  try {
    for (int rank = 1; rank < per_node; ++rank) {
      workers_.push_back(StartWorker(program, rank, world_size, rendezvous, ""));
    }
    // One host: the workers meet before they load anything, so a minute is plenty,
    // and a worker that died at its start is an error after that minute, not after
    // `timeout`. Other hosts may start their ranks later.
    const std::chrono::milliseconds meet =
        nodes.nnodes > 1 ? timeout : std::min(timeout, std::chrono::milliseconds(60000));
    group_ = CreateGlooCommunicator(GroupOptions(0, world_size, rendezvous, meet));
    group_->SetTimeout(timeout);
  } catch (...) {
    Shutdown();
    throw;
  }
}

MultiprocExecutor::~MultiprocExecutor() {
  if (group_) {
    try {
      Send(*group_, MessageKind::kShutdown, {});
    } catch (const std::exception&) {  // a worker already gone: reaped below
    }
  }
  Shutdown();
}

void MultiprocExecutor::Shutdown() {
  // Workers leave on the shutdown message; one that has not within 10 s is killed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t pid : workers_) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline || !group_) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  workers_.clear();
  std::error_code ignored;
  if (!rendezvous_dir_.empty()) std::filesystem::remove_all(rendezvous_dir_, ignored);
}

void MultiprocExecutor::CheckWorkers() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    const pid_t pid = workers_[i];
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != pid) continue;
    workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i));
    const std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                : "exit code " + std::to_string(WEXITSTATUS(status));
    throw vt::Error("tensor parallel (rank 0 of " + std::to_string(world_size_) + "): the worker process of rank " +
                    std::to_string(i + 1) + " (pid " + std::to_string(pid) + ") has exited (" + how + ")");
  }
}

void MultiprocExecutor::SendModel(const WorkerModelInit& init) {
  CheckWorkers();
  Send(*group_, MessageKind::kModel,
       JsonBytes({{"model", init.model},
                  {"gdn_value_head_order", static_cast<int>(init.gdn_value_head_order)},
                  {"activation_dtype", static_cast<int>(init.activation_dtype)},
                  {"num_threads", init.num_threads},
                  {"enable_expert_parallel", init.enable_expert_parallel}}));
}

void MultiprocExecutor::SendCaches(const WorkerCacheInit& init) {
  CheckWorkers();
  Send(*group_, MessageKind::kCaches,
       JsonBytes({{"num_blocks", init.num_blocks},
                  {"block_size", init.block_size},
                  {"num_state_slots", init.num_state_slots},
                  {"num_state_snapshots", init.num_state_snapshots},
                  {"cache_dtype", static_cast<int>(init.cache_dtype)},
                  {"seed", init.seed}}));
}

void MultiprocExecutor::SendStep(const SchedulerOutput& output) {
  CheckWorkers();
  Send(*group_, MessageKind::kStep, EncodeSchedulerOutput(output));
}

int RunTensorParallelWorker(int rank, int world_size, const Rendezvous& rendezvous, const std::string& expected_model) {
  // The engine gone, so is this worker. The signal follows the *thread* that started
  // the worker: engines are built on their process's main thread (serve, generate).
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1) return 1;  // the engine died before the line above
  try {
    // Across hosts the group may wait for nodes started later (rank 0's own limit
    // applies to it); on one host rank 0 started this process and is there.
    std::unique_ptr<Communicator> group =
        CreateGlooCommunicator(GroupOptions(rank, world_size, rendezvous, kIdleTimeout));
    LoadedModel loaded;
    std::unique_ptr<Model> model;
    std::unique_ptr<ModelRunner> runner;
    for (;;) {
      std::vector<uint8_t> message;
      group->SetTimeout(kIdleTimeout);
      BroadcastBytes(*group, message, 0);
      group->SetTimeout(std::chrono::minutes(10));
      if (message.empty()) throw vt::Error("an empty message from rank 0");
      switch (static_cast<MessageKind>(message[0])) {
        case MessageKind::kModel: {
          const nlohmann::json j = BytesJson(message);
          const std::string model_path = j.at("model").get<std::string>();
          if (!expected_model.empty() && model_path != expected_model) {
            throw vt::Error("rank 0 serves " + model_path + ", but this node was started for " + expected_model);
          }
          vt::SetNumThreads(j.at("num_threads").get<int>());
          LoadOptions options;
          options.gdn_value_head_order = static_cast<GdnValueHeadOrder>(j.at("gdn_value_head_order").get<int>());
          loaded = LoadModel(model_path, options);
          model = ModelRegistry::Create(
              loaded, ModelOptions{.device = vt::kCpu,
                                   .activation_dtype = static_cast<vt::DType>(j.at("activation_dtype").get<int>()),
                                   .tensor_parallel = group.get(),
                                   .enable_expert_parallel = j.at("enable_expert_parallel").get<bool>()});
          break;
        }
        case MessageKind::kCaches: {
          if (!model) throw vt::Error("the cache plan came before the model");
          const nlohmann::json j = BytesJson(message);
          const int64_t block_size = j.at("block_size").get<int64_t>();
          ModelCaches caches = AllocateCaches(model->cache_spec(), j.at("num_blocks").get<int64_t>(), block_size,
                                              j.at("num_state_slots").get<int64_t>(),
                                              static_cast<vt::DType>(j.at("cache_dtype").get<int>()), vt::kCpu,
                                              j.at("num_state_snapshots").get<int64_t>());
          runner = std::make_unique<ModelRunner>(*model, std::move(caches), block_size, j.at("seed").get<uint64_t>());
          break;
        }
        case MessageKind::kStep: {
          if (!runner) throw vt::Error("a step came before the cache plan");
          const SchedulerOutput output = DecodeSchedulerOutput({message.begin() + 1, message.end()});
          runner->ExecuteModel(output);  // rank 0 samples; this rank's part is the forward
          break;
        }
        case MessageKind::kShutdown:
          return 0;
        default:
          throw vt::Error("unknown message kind " + std::to_string(message[0]) + " from rank 0");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vllm-cpp tensor-parallel worker (rank %d of %d): error: %s\n", rank, world_size, e.what());
    return 1;
  }
}


int RunTensorParallelNode(int node_rank, int world_size, const MultiNode& nodes, const std::string& model,
                          const std::string& program) {
  const int per_node = RanksPerNode(world_size, nodes);
  if (node_rank < 1 || node_rank >= nodes.nnodes) {
    throw vt::Error("tensor parallel: --node-rank " + std::to_string(node_rank) + " is not in [1, --nnodes " +
                    std::to_string(nodes.nnodes) + ")");
  }
  const Rendezvous rendezvous{.master_addr = nodes.master_addr, .master_port = nodes.master_port};
  std::vector<pid_t> workers;
  int failed = 0;
  try {
    for (int rank = node_rank * per_node; rank < (node_rank + 1) * per_node; ++rank) {
      workers.push_back(StartWorker(program, rank, world_size, rendezvous, model));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vllm-cpp: %s\n", e.what());
    failed = 1;
    for (pid_t pid : workers) kill(pid, SIGTERM);
  }
  for (pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}

}  // namespace vllm
