// vllm_peer_bench: vllm-cpp's side of the end-to-end comparison with llama.cpp
// (compare_with_llama_cpp.sh; llama_cpp_bench.mjs is the other side and prints the
// same fields).
//
//   vllm_peer_bench --model FILE.gguf --prompt-ids 1,2,3 [--max-tokens 64] [--threads 2] [--no-warmup]
//                   [--reach]
//
// Drives vllm::LLMEngine directly so that model loading is timed apart from the
// tokens: one request, greedy, EOS ignored. The first Step() runs the whole prompt
// (it fits one batch) and samples the first token: that is the prefill. Each later
// Step() feeds one token and samples the next: decode. So
//   prefill tok/s = prompt tokens / first step,  decode tok/s = (N - 1) / later steps.
// With --warmup (the default) a short request (16 prompt tokens, 4 generated) runs first, so
// first-touch costs (page faults on mapped weights, allocator growth) stay out of
// both numbers. Prints one JSON line on stdout. --reach also lists on stderr the
// vt reach counters of the timed request (which kernel variants ran, how often).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vllm/engine/llm_engine.h"
#include "vllm/entrypoints/cli_args.h"
#include "vt/reach.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model;
  std::vector<int32_t> prompt_ids;
  int64_t max_tokens = 64;
  int threads = 2;
  bool warmup = true;
  bool reach = false;
};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Comma-separated token ids (the list compare_with_llama_cpp.sh draws).
std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      ids.push_back(static_cast<int32_t>(std::stol(item)));
    } catch (const std::exception&) {
      throw vllm::CliError("vllm_peer_bench: --prompt-ids must be comma-separated token ids, got '" + item + "'");
    }
  }
  if (ids.empty()) throw vllm::CliError("vllm_peer_bench: --prompt-ids is empty");
  return ids;
}

Options ParseArgs(int argc, char** argv) {
  vllm::CliArgs cli("vllm_peer_bench");
  cli.AddOption("model", "the GGUF file (or HF folder)");
  cli.AddOption("prompt-ids", "prompt token ids, comma-separated");
  cli.AddOption("max-tokens", "tokens to generate (at least 2: one from the prefill, the rest decode)", "64");
  cli.AddOption("threads", "CPU threads", "2");
  cli.AddFlag("warmup", "run a short request first (16 prompt tokens, 4 generated)", true);
  cli.AddFlag("reach", "list the vt reach counters of the timed request on stderr");
  cli.AddFlag("help", "show this help");
  if (!cli.ParseOrShowHelp(std::vector<std::string>(argv + 1, argv + argc))) std::exit(0);
  Options o;
  o.model = cli.GetString("model");
  o.prompt_ids = ParseIds(cli.GetString("prompt-ids"));
  o.max_tokens = cli.GetInt("max-tokens");
  o.threads = static_cast<int>(cli.GetInt("threads"));
  o.warmup = cli.GetFlag("warmup");
  o.reach = cli.GetFlag("reach");
  if (o.max_tokens < 2) throw vllm::CliError("vllm_peer_bench: --max-tokens must be >= 2");
  return o;
}

struct RunTimes {
  double prefill_s = 0;
  double decode_s = 0;
  std::vector<int32_t> ids;
};

// One greedy request; the first step is the prefill, the others decode.
RunTimes RunRequest(vllm::LLMEngine& engine, const std::string& id, const std::vector<int32_t>& prompt,
                    int64_t max_tokens) {
  vllm::SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;
  params.max_tokens = max_tokens;
  engine.AddRequest(id, prompt, params);
  RunTimes t;
  for (bool first = true; engine.HasUnfinishedRequests(); first = false) {
    const Clock::time_point start = Clock::now();
    std::vector<vllm::RequestOutput> outputs = engine.Step();
    (first ? t.prefill_s : t.decode_s) += SecondsSince(start);
    for (const vllm::RequestOutput& out : outputs) {
      if (out.finished) t.ids = out.token_ids;
    }
  }
  return t;
}

void Run(const Options& o) {
  vllm::EngineConfig config;
  config.model = o.model;
  config.num_threads = o.threads;
  config.max_num_seqs = 1;
  config.max_model_len = static_cast<int64_t>(o.prompt_ids.size()) + o.max_tokens + 16;
  const Clock::time_point load_start = Clock::now();
  vllm::LLMEngine engine(config);
  const double load_s = SecondsSince(load_start);
  if (o.warmup) {
    const size_t n = std::min<size_t>(16, o.prompt_ids.size());
    RunRequest(engine, "warmup", std::vector<int32_t>(o.prompt_ids.begin(), o.prompt_ids.begin() + n), 4);
  }
  vt::reach::Reset();
  const RunTimes t = RunRequest(engine, "bench", o.prompt_ids, o.max_tokens);
  if (o.reach) {
    for (const auto& [name, count] : vt::reach::Snapshot()) {
      std::fprintf(stderr, "%10llu  %s\n", static_cast<unsigned long long>(count), name.c_str());
    }
  }
  const auto prompt_tokens = static_cast<double>(o.prompt_ids.size());
  const auto decode_tokens = static_cast<double>(t.ids.size()) - 1;
  nlohmann::json j;
  j["engine"] = "vllm-cpp";
  j["threads"] = o.threads;
  j["kv_cache_dtype"] = "f32";
  j["load_s"] = load_s;
  j["prompt_tokens"] = o.prompt_ids.size();
  j["prefill_s"] = t.prefill_s;
  j["prefill_tok_s"] = prompt_tokens / t.prefill_s;
  j["decode_tokens"] = decode_tokens;
  j["decode_s"] = t.decode_s;
  j["decode_tok_s"] = decode_tokens / t.decode_s;
  j["ids"] = t.ids;
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Run(ParseArgs(argc, argv));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
