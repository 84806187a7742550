// `vllm-cpp generate`: run prompts through the engine and print the results.
//
// Without --json, one request streams its text (or ids) to stdout as it is
// generated; several requests print each completion when it ends. With --json, one
// object per request per line, in input order. Progress and a summary go to stderr.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vllm/engine/llm_engine.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/entrypoints/engine_args.h"
#include "vllm/entrypoints/sampling_params_json.h"
#include "vllm/model_loader/embedded_files.h"

namespace vllm {
namespace {

using nlohmann::json;

struct Input {
  std::string request_id;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
};

std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument("range");
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw CliError("generate: --prompt-ids must be comma-separated token ids, got '" + item + "'");
    }
  }
  if (ids.empty()) throw CliError("generate: --prompt-ids is empty");
  return ids;
}

// The sampling flags (SamplingParamsFromArgs) and this command's own.
SamplingParams ParamsFromFlags(const CliArgs& cli, const SamplingDefaults& defaults) {
  SamplingParams p = SamplingParamsFromArgs(cli, defaults);
  p.output_kind = RequestOutputKind::kFinalOnly;  // the steps' new_text is all this command prints before the end
  p.ignore_eos = cli.GetFlag("ignore-eos");
  if (cli.WasGiven("logprobs")) p.logprobs = static_cast<int>(cli.GetInt("logprobs"));
  if (cli.WasGiven("prompt-logprobs")) p.prompt_logprobs = static_cast<int>(cli.GetInt("prompt-logprobs"));
  return p;
}

std::vector<Input> ReadInputs(const CliArgs& cli, const LLMEngine& engine, const SamplingDefaults& defaults) {
  const SamplingParams base = ParamsFromFlags(cli, defaults);
  const int given = cli.WasGiven("prompt") + cli.WasGiven("prompt-ids") + cli.WasGiven("input-file");
  if (given != 1) throw CliError("generate: give exactly one of --prompt, --prompt-ids or --input-file");
  if (cli.WasGiven("prompt")) return {{"0", engine.Encode(cli.GetString("prompt")), base}};
  if (cli.WasGiven("prompt-ids")) return {{"0", ParseIds(cli.GetString("prompt-ids")), base}};
  const std::string path = cli.GetString("input-file");
  std::ifstream file(path);
  if (!file) throw CliError("generate: cannot open --input-file " + path);
  std::vector<Input> inputs;
  std::string line;
  for (int line_no = 1; std::getline(file, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    try {
      json body = ParseJsonWithDepthLimit(line);
      Input in;
      in.request_id = body.value("request_id", std::to_string(inputs.size()));
      if (body.contains("prompt_token_ids")) {
        in.prompt_ids = body.at("prompt_token_ids").get<std::vector<int32_t>>();
      } else if (body.contains("prompt") && body.at("prompt").is_string()) {
        in.prompt_ids = engine.Encode(body.at("prompt").get<std::string>());
      } else {
        throw std::invalid_argument("each line needs \"prompt\" (a string) or \"prompt_token_ids\"");
      }
      in.params = SamplingParamsFromJson(body, base);
      inputs.push_back(std::move(in));
    } catch (const std::exception& e) {
      throw CliError(where + e.what());
    }
  }
  if (inputs.empty()) throw CliError("generate: " + path + " holds no requests");
  return inputs;
}

json OutputJson(const RequestOutput& out) {
  json j;
  j["request_id"] = out.request_id;
  j["prompt_token_ids"] = out.prompt_token_ids;
  j["token_ids"] = out.token_ids;
  j["text"] = out.text;
  j["finish_reason"] = out.finish_reason;
  json logprobs = nullptr;
  if (!out.logprobs.empty()) {
    logprobs = json::array();
    for (const auto& entry : out.logprobs) logprobs.push_back(LogprobsToJson(entry));
  }
  j["logprobs"] = logprobs;
  json prompt_logprobs = nullptr;
  if (!out.prompt_logprobs.empty()) {
    prompt_logprobs = json::array();
    for (const auto& entry : out.prompt_logprobs) {
      prompt_logprobs.push_back(entry ? LogprobsToJson(*entry) : json(nullptr));
    }
  }
  j["prompt_logprobs"] = prompt_logprobs;
  return j;
}

std::string IdsText(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

void DeclareArgs(CliArgs& cli) {
  cli.AddOption("model", std::string("HF checkpoint folder or .gguf file (default: the embedded demo model, ") +
                             kDemoModelName + ")");
  cli.AddOption("prompt", "prompt text (needs the model's tokenizer)");
  cli.AddOption("prompt-ids", "prompt token ids, comma-separated");
  cli.AddOption("input-file", "JSONL: one {\"prompt\" | \"prompt_token_ids\", sampling fields...} per line");
  AddSamplingArgs(cli, "16");
  cli.AddFlag("ignore-eos", "keep generating after EOS");
  cli.AddOption("logprobs", "top-K logprobs per generated token (-1 = whole vocabulary)");
  cli.AddOption("prompt-logprobs", "top-K logprobs per prompt position (-1 = whole vocabulary)");
  cli.AddFlag("json", "one JSON object per request per line, in input order");
  cli.AddFlag("help", "show this help");
  AddEngineArgs(cli);
  AddGenerationConfigArg(cli);
}

}  // namespace

int RunGenerateCommand(const CommandArgs& args) {
  CliArgs cli("generate");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  const bool as_json = cli.GetFlag("json");
  EngineConfig config = EngineConfigFromArgs(cli, ModelOrDemoModel(cli, "generate"));
  const SamplingDefaults defaults = SamplingDefaultsFromArgs(
      cli, config.model, [](const std::string& line) { std::fprintf(stderr, "vllm-cpp generate: %s\n", line.c_str()); });
  LLMEngine engine(config, [](int64_t done, int64_t total) {
    std::fprintf(stderr, "\rloading model [%-20s] %lld/%lld", std::string(20 * done / total, '#').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total));
    if (done == total) std::fprintf(stderr, "\n");
  });
  std::vector<Input> inputs = ReadInputs(cli, engine, defaults);
  for (const Input& in : inputs) engine.AddRequest(in.request_id, in.prompt_ids, in.params);

  const bool stream = !as_json && inputs.size() == 1;
  std::map<std::string, RequestOutput> finished;
  int64_t generated = 0, prompt_tokens = 0;
  for (const Input& in : inputs) prompt_tokens += static_cast<int64_t>(in.prompt_ids.size());
  const auto start = std::chrono::steady_clock::now();
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      generated += static_cast<int64_t>(out.new_token_ids.size());
      if (stream) {
        std::string piece = engine.has_tokenizer() ? out.new_text : IdsText(out.new_token_ids) + " ";
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      if (out.finished) finished[out.request_id] = std::move(out);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Input& in : inputs) {
    const RequestOutput& out = finished.at(in.request_id);
    if (as_json) {
      std::printf("%s\n", OutputJson(out).dump().c_str());
    } else if (stream) {
      std::printf("\n");
    } else {
      std::printf("[%s] %s\n", out.request_id.c_str(),
                  engine.has_tokenizer() ? out.text.c_str() : IdsText(out.token_ids).c_str());
    }
  }
  std::fflush(stdout);  // the completions before the summary, also when both streams go to one terminal or file
  std::fprintf(stderr, "%zu requests, %lld prompt tokens, %lld generated tokens in %.2f s (%.1f generated tok/s), %lld preemptions\n",
               inputs.size(), static_cast<long long>(prompt_tokens), static_cast<long long>(generated), seconds,
               seconds > 0 ? generated / seconds : 0.0, static_cast<long long>(engine.stats().num_preemptions));
  return 0;
}

}  // namespace vllm
