// `vllm-cpp serve MODEL`: the OpenAI-compatible server (vLLM's `vllm serve`).
//
//   vllm-cpp serve MODEL [--host 127.0.0.1] [--port 8000] [--served-model-name NAME]
//                        [--api-key KEY] [--chat-template FILE] [--limit-concurrency N]
//                        [--max-prompt-bytes N] [--generation-config auto|vllm|FOLDER]
//                        [engine flags...]
//
// Loads the model, binds, prints one line saying where it listens, then logs one line
// per request on stderr until SIGINT or SIGTERM, which stop it cleanly.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/entrypoints/engine_args.h"
#include "vllm/entrypoints/openai/api_server.h"
#include "vllm/entrypoints/openai/server_args.h"

namespace vllm {
namespace {

void DeclareArgs(CliArgs& cli) {
  cli.AddPositional("model", "HF checkpoint folder or .gguf file", false);
  openai::AddServerArgs(cli);
  cli.AddFlag("help", "show this help");
  AddEngineArgs(cli);
  AddGenerationConfigArg(cli);
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

class SignalWaiter {
 public:
  SignalWaiter(sigset_t signals, openai::ApiServer& server)
      : signals_(signals), waiter_([this, &server] {
          int signal_number = 0;
          sigwait(&signals_, &signal_number);
          server.Stop();
        }) {}
  // Wakes the waiter when no signal came (the server stopped otherwise); the server
  // outlives this object.
  ~SignalWaiter() {
    pthread_kill(waiter_.native_handle(), SIGTERM);
    waiter_.join();
  }

 private:
  sigset_t signals_;
  std::thread waiter_;
};

}  // namespace

int RunServeCommand(const CommandArgs& args) {
  CliArgs cli("serve");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  if (!cli.WasGiven("model")) throw CliError("serve: give the MODEL to serve (an HF folder or a .gguf file)");
  const sigset_t stop_signals = BlockStopSignals();
  const std::string model = cli.GetString("model");
  openai::ServerConfig server_config = openai::ServerConfigFromArgs(cli);
  // Before the model loads: a bad generation_config.json fails at once.
  server_config.sampling_defaults = SamplingDefaultsFromArgs(
      cli, model, [](const std::string& line) { std::fprintf(stderr, "vllm-cpp serve: %s\n", line.c_str()); });

  auto engine = std::make_unique<LLMEngine>(EngineConfigFromArgs(cli, model));
  const EngineStats stats = engine->stats();
  openai::ApiServer server(std::move(engine), server_config);
  const int port = server.Bind();
  std::fprintf(stderr, "vllm-cpp serve: %s on http://%s:%d (max_model_len %lld, %lld KV blocks)\n", model.c_str(),
               server_config.host.c_str(), port, static_cast<long long>(stats.max_model_len),
               static_cast<long long>(stats.num_kv_blocks));
  {
    SignalWaiter waiter(stop_signals, server);
    server.Serve();
  }
  std::fprintf(stderr, "vllm-cpp serve: stopped\n");
  return 0;
}

}  // namespace vllm
