#include "vllm/entrypoints/openai/server_args.h"

#include <nlohmann/json.hpp>

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

// vLLM's --allowed-origins: a JSON list of origins ("*": any).
std::vector<std::string> AllowedOrigins(const std::string& text) {
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> origins;
  if (list.is_array()) {
    for (const nlohmann::json& origin : list) {
      if (!origin.is_string()) break;
      origins.push_back(origin.get<std::string>());
    }
    if (origins.size() == list.size()) return origins;
  }
  throw CliError("serve: --allowed-origins must be a JSON list of strings such as '[\"https://a.example\"]', got '" +
                 text + "'");
}

}  // namespace

void AddServerArgs(CliArgs& cli) {
  cli.AddOption("host", "address to listen on", "127.0.0.1");
  cli.AddOption("port", "port to listen on (0: any free port, printed at start)", "8000");
  cli.AddMultiOption("served-model-name",
                     "the model names clients may send in \"model\"; the first is the one responses give (default: "
                     "the MODEL path)");
  cli.AddOption("api-key", "require 'Authorization: Bearer KEY' on the /v1 routes", "");
  cli.AddOption("chat-template", "chat template file (or the template itself) instead of the tokenizer's", "");
  cli.AddFlag("trust-request-chat-template", "let a request bring its own chat_template (otherwise a 400)");
  cli.AddOption("allowed-origins",
                "CORS: the origins browsers may call the server from, as a JSON list (vLLM's flag)", "[\"*\"]");
  cli.AddFlag("disable-uvicorn-access-log", "do not log one line per HTTP request (vLLM's flag name)");
  cli.AddFlag("disable-log-requests", "do not log one line per finished request (id, tokens, TTFT, e2e latency)");
  cli.AddFlag("disable-log-stats", "do not log the throughput and cache line every 10 s while the engine works");
  cli.AddOption("limit-concurrency",
                "connections served at once; one more gets a 503 (uvicorn's flag; default: max-num-seqs + 16, in "
                "[32, 1024])");
  cli.AddOption("shutdown-timeout",
                "seconds that SIGINT / SIGTERM let running requests finish before they are aborted; a second signal "
                "exits at once",
                "5");
  cli.AddFlag("enable-auto-tool-choice",
              "tool_choice \"auto\": the model decides to call tools, read out of its output by --tool-call-parser");
  cli.AddOption("tool-call-parser",
                "how tool calls are written: hermes (Qwen3) or qwen3_coder (Qwen3.5); tool_choice \"required\" and a "
                "named function constrain the output to that format",
                "");
  cli.AddOption("reasoning-parser",
                "qwen3: the text before </think> is returned as reasoning_content, and structured outputs apply "
                "after it",
                "");
  cli.AddOption("max-prompt-bytes",
                "longest prompt text tokenized, in bytes; a longer one gets a 400 (default: 2 x max-model-len x the "
                "tokenizer's longest token)");
}

ServerConfig ServerConfigFromArgs(const CliArgs& cli) {
  ServerConfig config;
  config.host = cli.GetString("host");
  config.port = static_cast<int>(cli.GetInt("port"));
  if (config.port < 0 || config.port > 65535) throw CliError("serve: --port must be in [0, 65535]");
  config.served_model_names = cli.GetStrings("served-model-name");
  config.api_key = cli.GetString("api-key");
  config.chat_template = cli.GetString("chat-template");
  config.trust_request_chat_template = cli.GetFlag("trust-request-chat-template");
  config.allowed_origins = AllowedOrigins(cli.GetString("allowed-origins"));
  config.access_log = !cli.GetFlag("disable-uvicorn-access-log");
  config.log_requests = !cli.GetFlag("disable-log-requests");
  config.log_stats = !cli.GetFlag("disable-log-stats");
  config.limit_concurrency = PositiveOrDefault(cli, "limit-concurrency", 0);
  config.max_prompt_bytes = PositiveOrDefault(cli, "max-prompt-bytes", 0);
  config.enable_auto_tool_choice = cli.GetFlag("enable-auto-tool-choice");
  config.tool_call_parser = cli.GetString("tool-call-parser");
  if (!config.tool_call_parser.empty() && config.tool_call_parser != "hermes" &&
      config.tool_call_parser != "qwen3_coder") {
    throw CliError("serve: --tool-call-parser must be hermes or qwen3_coder, got '" + config.tool_call_parser + "'");
  }
  if (config.enable_auto_tool_choice && config.tool_call_parser.empty()) {
    throw CliError("serve: --enable-auto-tool-choice needs --tool-call-parser (hermes or qwen3_coder)");
  }
  const double shutdown_timeout = cli.GetDouble("shutdown-timeout");
  if (shutdown_timeout < 0 || shutdown_timeout > 86400) {
    throw CliError("serve: --shutdown-timeout must be seconds in [0, 86400], got " + cli.GetString("shutdown-timeout"));
  }
  config.shutdown_timeout = std::chrono::milliseconds(static_cast<int64_t>(shutdown_timeout * 1000));
  return config;
}

std::string ReasoningParserFromArgs(const CliArgs& cli) {
  const std::string parser = cli.GetString("reasoning-parser");
  if (!parser.empty() && parser != "qwen3") throw CliError("serve: --reasoning-parser must be qwen3, got '" + parser + "'");
  return parser;
}

}  // namespace vllm::openai
