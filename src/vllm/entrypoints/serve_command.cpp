// `vllm-cpp serve MODEL`: the OpenAI-compatible server (vLLM's `vllm serve`).
//
//   vllm-cpp serve MODEL [--host 127.0.0.1] [--port 8000] [--served-model-name NAME...]
//                        [--api-key KEY] [--chat-template FILE] [--limit-concurrency N]
//                        [--max-prompt-bytes N] [--generation-config auto|vllm|FOLDER]
//                        [engine flags...]
//
// Loads the model, binds, prints one line saying where it listens, then logs one line
// per request on stderr until SIGINT or SIGTERM: running requests get --shutdown-timeout
// seconds to finish, then are aborted; the exit status is 0. A second signal exits at once.
// `serve --model MODEL` is the same as `serve MODEL`.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/entrypoints/engine_args.h"
#include "vllm/entrypoints/openai/api_server.h"
#include "vllm/entrypoints/openai/server_args.h"
#include "vllm/executor/multiproc_executor.h"
#include "vllm/model_loader/embedded_files.h"

namespace vllm {
namespace {

void DeclareArgs(CliArgs& cli) {
  cli.AddPositional("model",
                    std::string("HF checkpoint folder or .gguf file (default: the embedded demo model, ") +
                        kDemoModelName + ")",
                    false);
  openai::AddServerArgs(cli);
  cli.AddFlag("help", "show this help");
  AddEngineArgs(cli);
  cli.AddOption("data-parallel-size",
                "engine replicas behind this server, each a whole model with its own KV cache; new requests go "
                "to the replica with the fewest in flight (CPU: --threads is then per replica; GPU: replica i on "
                "device index + i)",
                "1");
  cli.AddOption("nnodes", "hosts the --tensor-parallel-size ranks are spread over, each holding an equal share", "1");
  cli.AddOption("node-rank",
                "this host among --nnodes: 0 runs the engine and the server; every other node starts its ranks and "
                "waits for node 0 (give it the same model, --tensor-parallel-size and multi-node flags)",
                "0");
  cli.AddOption("master-addr", "with --nnodes above 1: the address of node 0, where the ranks meet");
  cli.AddOption("master-port", "with --nnodes above 1: the port node 0 listens on for the ranks' rendezvous", "29501");
  AddGenerationConfigArg(cli);
}

// The flags a node other than 0 runs on: the rest configure node 0's engine and server.
constexpr const char* kOtherNodeFlags[] = {"model", "tensor-parallel-size", "nnodes", "node-rank", "master-addr",
                                           "master-port"};

// Node `node_rank` >= 1 of a multi-node group: its ranks, until node 0's engine stops.
int RunOtherNode(const CliArgs& cli, const std::string& model, int node_rank) {
  for (const std::string& name : cli.GivenNames()) {
    if (std::find(std::begin(kOtherNodeFlags), std::end(kOtherNodeFlags), name) == std::end(kOtherNodeFlags)) {
      throw CliError("--" + name + " configures node 0's engine or server; node " + std::to_string(node_rank) +
                     " takes only --tensor-parallel-size, --nnodes, --node-rank, --master-addr, --master-port and "
                     "the model");
    }
  }
  const MultiNode nodes{.nnodes = static_cast<int>(cli.GetInt("nnodes")),
                        .master_addr = cli.GetString("master-addr"),
                        .master_port = static_cast<int>(cli.GetInt("master-port"))};
  const int world_size = static_cast<int>(cli.GetInt("tensor-parallel-size"));
  std::fprintf(stderr, "vllm-cpp serve: node %d of %d: %d of the %d tensor-parallel ranks, meeting node 0 at %s:%d\n",
               node_rank, nodes.nnodes, world_size / std::max(1, nodes.nnodes), world_size, nodes.master_addr.c_str(),
               nodes.master_port);
  return RunTensorParallelNode(node_rank, world_size, nodes, cli.WasGiven("model") ? model : "", "");
}

// --nnodes, --node-rank, --master-addr, --master-port: checked together, so that none
// is given without effect.
void CheckMultiNodeArgs(const CliArgs& cli) {
  const int64_t nnodes = cli.GetInt("nnodes"), node_rank = cli.GetInt("node-rank");
  if (nnodes < 1 || nnodes > 64) throw CliError("--nnodes must be in [1, 64], got " + std::to_string(nnodes));
  if (node_rank < 0 || node_rank >= nnodes) {
    throw CliError("--node-rank must be in [0, --nnodes " + std::to_string(nnodes) + "), got " +
                   std::to_string(node_rank));
  }
  if (nnodes == 1) {
    for (const char* name : {"master-addr", "master-port"}) {
      if (cli.WasGiven(name)) throw CliError(std::string("--") + name + " is for --nnodes above 1");
    }
    return;
  }
  if (!cli.WasGiven("master-addr")) throw CliError("--nnodes " + std::to_string(nnodes) + " needs --master-addr");
  const int64_t port = cli.GetInt("master-port");
  if (port < 1 || port > 65535) throw CliError("--master-port must be in [1, 65535], got " + std::to_string(port));
  if (cli.GetInt("data-parallel-size") != 1) throw CliError("--data-parallel-size with --nnodes is not supported");
}

// The config of data-parallel replica `index` of `size`: its own GPU, or its share of
// the CPU's threads.
EngineConfig ReplicaConfig(EngineConfig config, int64_t index, int64_t size) {
  if (config.device.type != vt::DeviceType::kCPU) {
    config.device.index += static_cast<int>(index);
  } else if (config.num_threads == 0) {
    const int64_t ranks = size * std::max<int64_t>(1, config.tensor_parallel_size);
    config.num_threads = static_cast<int>(std::max<int64_t>(1, std::thread::hardware_concurrency() / ranks));
  }
  return config;
}

// SIGINT and SIGTERM are blocked in every thread (call before any thread starts) and
// taken by one waiting thread (SignalWaiter), which stops the server: no work in a
// signal handler.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a dead server
  return signals;
}

// The first signal starts the graceful shutdown (ApiServer::Shutdown) on a thread of
// its own; a second one, while that runs, exits at once with 128 + the signal.
class SignalWaiter {
 public:
  SignalWaiter(sigset_t signals, openai::ApiServer& server, std::chrono::milliseconds timeout)
      : signals_(signals), waiter_([this, &server, timeout] {
          int signal_number = 0;
          sigwait(&signals_, &signal_number);
          if (done_) return;
          std::fprintf(stderr,
                       "vllm-cpp serve: %s: shutting down; running requests get %.1f s to finish (send the signal "
                       "again to exit now)\n",
                       strsignal(signal_number), static_cast<double>(timeout.count()) / 1000);
          std::thread draining([&server] { server.Shutdown(); });
          sigwait(&signals_, &signal_number);
          if (!done_) {
            std::fprintf(stderr, "vllm-cpp serve: %s again: exiting now\n", strsignal(signal_number));
            std::_Exit(128 + signal_number);
          }
          draining.join();
        }) {}
  // Wakes the waiter, which ends (a signal meanwhile changes nothing); the server
  // outlives this object.
  ~SignalWaiter() {
    done_ = true;
    pthread_kill(waiter_.native_handle(), SIGTERM);
    waiter_.join();
  }

 private:
  sigset_t signals_;
  std::atomic<bool> done_{false};
  std::thread waiter_;
};

// The dtype holding most of the checkpoint's weight bytes ("bf16", "q8_0", ...).
std::string WeightFormat(const LoadedModel& loaded) {
  std::map<std::string, int64_t> bytes;
  for (const auto& [name, t] : loaded.weights.all()) bytes[vt::DTypeName(t.dtype())] += vt::BytesFor(t.dtype(), t.numel());
  const auto most = std::max_element(bytes.begin(), bytes.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  return most == bytes.end() ? "none" : most->first;
}

// What the startup line says about the engine: on what, with how much KV cache.
std::string EngineSummary(const LLMEngine& engine) {
  const CachePlan& plan = engine.cache_plan();
  const EngineStats stats = engine.stats();
  const EngineConfig& c = engine.config();
  char line[1024];
  std::snprintf(line, sizeof(line),
                "device %s, dtype %s, weights %s; KV cache %lld tokens (%.2f GiB), maximum concurrency "
                "%.2f at max_model_len %lld; prefix caching %s",
                c.device.ToString().c_str(),
                vt::DTypeName(ResolveActivationDtype(c.dtype, engine.model_config(), c.device)),
                WeightFormat(engine.loaded_model()).c_str(), static_cast<long long>(plan.num_tokens()),
                static_cast<double>(plan.kv_bytes + plan.state_bytes + plan.snapshot_bytes) / (1 << 30),
                plan.max_concurrency(stats.max_model_len),
                static_cast<long long>(stats.max_model_len), engine.prefix_caching_reason().c_str());
  return line;
}

// Loading progress, redrawn in place: only on a terminal (a log file gets no bar).
std::function<void(int64_t, int64_t)> LoadProgress(const std::string& model) {
  if (!isatty(STDERR_FILENO)) return {};
  return [model](int64_t done, int64_t total) {
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
    std::fprintf(stderr, "\rvllm-cpp serve: loading %s [%s%s] %lld/%lld%s", model.c_str(), std::string(filled, '=').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(done), static_cast<long long>(total),
                 done == total ? "\n" : "");
    std::fflush(stderr);
  };
}

}  // namespace

int RunServeCommand(const CommandArgs& args) {
  CliArgs cli("serve");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  CheckMultiNodeArgs(cli);
  const std::string model = ModelOrDemoModel(cli, "serve");
  if (const int node_rank = static_cast<int>(cli.GetInt("node-rank")); node_rank > 0) {
    return RunOtherNode(cli, model, node_rank);
  }
  const sigset_t stop_signals = BlockStopSignals();
  openai::ServerConfig server_config = openai::ServerConfigFromArgs(cli);
  // Before the model loads: a bad generation_config.json fails at once.
  server_config.sampling_defaults = SamplingDefaultsFromArgs(
      cli, model, [](const std::string& line) { std::fprintf(stderr, "vllm-cpp serve: %s\n", line.c_str()); });

  EngineConfig engine_config = EngineConfigFromArgs(cli, model);
  engine_config.reasoning_parser = openai::ReasoningParserFromArgs(cli);
  engine_config.nnodes = cli.GetInt("nnodes");
  if (engine_config.nnodes > 1) {
    engine_config.master_addr = cli.GetString("master-addr");
    engine_config.master_port = cli.GetInt("master-port");
  }
  const int64_t data_parallel_size = cli.GetInt("data-parallel-size");
  if (data_parallel_size < 1 || data_parallel_size > 64) {
    throw CliError("--data-parallel-size must be in [1, 64], got " + std::to_string(data_parallel_size));
  }
  std::vector<std::unique_ptr<LLMEngine>> replicas;
  for (int64_t i = 0; i < data_parallel_size; ++i) {
    const EngineConfig config =
        data_parallel_size == 1 ? engine_config : ReplicaConfig(engine_config, i, data_parallel_size);
    replicas.push_back(std::make_unique<LLMEngine>(config, LoadProgress(model)));
  }
  std::string summary = EngineSummary(*replicas[0]);  // before the engine loops run
  if (data_parallel_size > 1) {
    summary = std::to_string(data_parallel_size) + " data-parallel replicas (" +
              (engine_config.device.type == vt::DeviceType::kCPU
                   ? std::to_string(replicas[0]->config().num_threads) + " CPU threads each"
                   : "one device each") +
              "), each " + summary;
  }
  const int replica_threads = data_parallel_size > 1 && engine_config.device.type == vt::DeviceType::kCPU
                                  ? replicas[0]->config().num_threads
                                  : 0;
  openai::ApiServer server(std::move(replicas), server_config, replica_threads);
  const int port = server.Bind();
  std::fprintf(stderr, "vllm-cpp serve: %s on http://%s:%d: %s\n", model.c_str(), server_config.host.c_str(), port,
               summary.c_str());
  {
    SignalWaiter waiter(stop_signals, server, server_config.shutdown_timeout);
    server.Serve();
  }
  if (const std::optional<std::string> why = server.engine_dead()) throw std::runtime_error(*why);
  std::fprintf(stderr, "vllm-cpp serve: stopped\n");
  return 0;
}

}  // namespace vllm
