#include "vllm/entrypoints/openai/server_args.h"

namespace vllm::openai {
namespace {

// A flag that must be a positive count when given; `fallback` (ServerConfig's "derive
// it" value) when it is not.
int64_t PositiveOrDefault(const CliArgs& cli, const std::string& name, int64_t fallback) {
  if (!cli.WasGiven(name)) return fallback;
  const int64_t value = cli.GetInt(name);
  if (value < 1) throw CliError("serve: --" + name + " must be >= 1, got " + std::to_string(value));
  return value;
}

}  // namespace

void AddServerArgs(CliArgs& cli) {
  cli.AddOption("host", "address to listen on", "127.0.0.1");
  cli.AddOption("port", "port to listen on (0: any free port, printed at start)", "8000");
  cli.AddOption("served-model-name", "the model name clients send in \"model\" (default: the MODEL path)", "");
  cli.AddOption("api-key", "require 'Authorization: Bearer KEY' on the /v1 routes", "");
  cli.AddOption("chat-template", "chat template file (or the template itself) instead of the tokenizer's", "");
  cli.AddFlag("disable-uvicorn-access-log", "do not log one line per request (vLLM's flag name)");
  cli.AddOption("limit-concurrency",
                "connections served at once; one more gets a 503 (uvicorn's flag; default: max-num-seqs + 16, in "
                "[32, 1024])");
  cli.AddOption("max-prompt-bytes",
                "longest prompt text tokenized, in bytes; a longer one gets a 400 (default: 2 x max-model-len x the "
                "tokenizer's longest token)");
}

ServerConfig ServerConfigFromArgs(const CliArgs& cli) {
  ServerConfig config;
  config.host = cli.GetString("host");
  config.port = static_cast<int>(cli.GetInt("port"));
  if (config.port < 0 || config.port > 65535) throw CliError("serve: --port must be in [0, 65535]");
  if (!cli.GetString("served-model-name").empty()) config.served_model_names = {cli.GetString("served-model-name")};
  config.api_key = cli.GetString("api-key");
  config.chat_template = cli.GetString("chat-template");
  config.access_log = !cli.GetFlag("disable-uvicorn-access-log");
  config.limit_concurrency = PositiveOrDefault(cli, "limit-concurrency", 0);
  config.max_prompt_bytes = PositiveOrDefault(cli, "max-prompt-bytes", 0);
  return config;
}

}  // namespace vllm::openai
