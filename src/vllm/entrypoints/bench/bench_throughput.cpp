// `vllm-cpp bench throughput`: offline throughput as vLLM's `bench throughput`
// reports it. All prompts are added at once and run to completion; the engine's
// scheduler batches them (--max-num-seqs, --max-num-batched-tokens):
//
//   requests/s = prompts / elapsed        total tokens/s  = (prompt + output) / elapsed
//   output tokens/s = generated / elapsed
//
// elapsed runs from adding the first request to the last one finishing (model
// loading excluded). --num-prompts may be a list (16,64,256): each value is one run
// on the same engine, as llama-batched-bench's -npl. Requests generate exactly
// their output length (EOS ignored), greedy unless --temperature says otherwise;
// with --structured-outputs every request is constrained (vLLM's
// structured_outputs: {"json": schema} | {"regex": r} | {"choice": [...]} |
// {"grammar": gbnf} | {"json_object": true}) and stops when its grammar is complete,
// which measures what the token masks cost. A short warm-up request runs first so
// that first-touch costs stay out.
//
// Decode throughput at the full batch: the steps in which every request of the run
// (or max_num_seqs of them) decodes one token, nothing waiting, timed one by one;
// their median gives batch / median tok/s. Constrained requests that end early thin
// the batch and lower output tok/s; this figure compares equal batches, which is
// what a token mask's cost is measured by (issue: at most 5% at batch 64).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "bench_commands.h"
#include "bench_dataset.h"
#include "bench_report.h"
#include "roofline.h"
#include "vllm/entrypoints/engine_args.h"
#include "vt/reach.h"

namespace vllm::bench {
namespace {

using nlohmann::json;

void DeclareArgs(CliArgs& cli) {
  cli.AddOption("model", "HF checkpoint folder or .gguf file");
  cli.AddOption("num-prompts", "prompts per run; a comma-separated list sweeps (16,64,256)", "256");
  cli.AddOption("input-len", "prompt tokens of random prompts", "256");
  cli.AddOption("output-len", "tokens generated per request (for a file: replaces each entry's own)", "128");
  cli.AddOption("dataset", "random, or a JSONL / ShareGPT JSON file of prompts", "random");
  cli.AddOption("temperature", "sampling temperature (0 = greedy)", "0");
  cli.AddOption("structured-outputs",
                "constrain every request: vLLM's structured_outputs as JSON, one of {\"json\": schema}, "
                "{\"regex\": r}, {\"choice\": [...]}, {\"grammar\": gbnf}, {\"json_object\": true}",
                "");
  cli.AddFlag("print-kernels", "list on stderr the kernel variants and runner paths each run reached");
  AddReportArgs(cli);
  AddEngineArgs(cli);
}

struct RunResult {
  double elapsed_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, num_requests = 0;
  int64_t full_batch = 0;                  // min(prompts, max_num_seqs)
  std::vector<double> full_batch_steps_s;  // the wall time of each decode step at that batch
  std::vector<double> schedule_s, execute_s, outputs_s;  // those steps' phases (LLMEngine::StepPhases)
};

// --structured-outputs: one constraint of vLLM's StructuredOutputsParams; any other
// key, or none, is an error naming it (the engine compiles the grammar at admission).
std::optional<StructuredOutputsParams> ParseStructuredOutputs(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const json value = json::parse(text, nullptr, false);
  if (!value.is_object() || value.size() != 1) {
    throw CliError("bench throughput: --structured-outputs must be a JSON object with one key (json, regex, choice, "
                   "grammar or json_object), got " + text);
  }
  const std::string key = value.begin().key();
  const json& v = value.begin().value();
  StructuredOutputsParams p;
  if (key == "json" && (v.is_object() || v.is_boolean())) {
    p.json = v.dump();
  } else if (key == "regex" && v.is_string()) {
    p.regex = v.get<std::string>();
  } else if (key == "grammar" && v.is_string()) {
    p.grammar = v.get<std::string>();
  } else if (key == "choice" && v.is_array() && !v.empty() &&
             std::all_of(v.begin(), v.end(), [](const json& c) { return c.is_string(); })) {
    p.choice = v.get<std::vector<std::string>>();
  } else if (key == "json_object" && v == true) {
    p.json_object = true;
  } else {
    throw CliError("bench throughput: --structured-outputs: '" + key + "' with " + v.dump() +
                   " is not a constraint (json: a schema, regex / grammar: a string, choice: a list of strings, "
                   "json_object: true)");
  }
  return p;
}

RunResult RunPrompts(LLMEngine& engine, const std::vector<BenchPrompt>& prompts, double temperature,
                     const std::optional<StructuredOutputsParams>& structured, const std::string& prefix,
                     ProgressBar* bar) {
  RunResult r;
  r.num_requests = static_cast<int64_t>(prompts.size());
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams params;
    params.temperature = temperature;
    params.ignore_eos = true;
    params.max_tokens = prompts[i].output_len;
    if (structured) params.structured_outputs = *structured;
    params.output_kind = RequestOutputKind::kFinalOnly;
    engine.AddRequest(prefix + std::to_string(i), prompts[i].prompt_ids, params);
    r.prompt_tokens += prompts[i].num_prompt_tokens();
  }
  int64_t finished = 0;
  r.full_batch = std::min<int64_t>(r.num_requests, engine.config().max_num_seqs);
  const bool speculative = engine.config().speculative_config.has_value();  // a decode is then several tokens
  while (engine.HasUnfinishedRequests()) {
    const EngineStats stats = engine.stats();
    const bool all_decoding = !speculative && stats.num_waiting == 0 && stats.num_running == r.full_batch;
    const Clock::time_point step_start = Clock::now();
    const std::vector<RequestOutput> outputs = engine.Step();
    if (all_decoding && engine.last_step_num_tokens() == r.full_batch) {
      r.full_batch_steps_s.push_back(SecondsBetween(step_start, Clock::now()));
      const LLMEngine::StepPhases& phases = engine.last_step_phases();
      r.schedule_s.push_back(phases.schedule_s);
      r.execute_s.push_back(phases.execute_s);
      r.outputs_s.push_back(phases.outputs_s);
    }
    for (const RequestOutput& out : outputs) {
      r.output_tokens += static_cast<int64_t>(out.new_token_ids.size());
      if (out.finished && bar) bar->Update(++finished);
    }
  }
  r.elapsed_s = SecondsBetween(start, Clock::now());
  return r;
}

json ResultJson(const RunResult& r) {
  json full_batch = nullptr;
  if (!r.full_batch_steps_s.empty()) {
    const Summary steps = Summarize(r.full_batch_steps_s);
    full_batch = {{"batch", r.full_batch},
                  {"steps", steps.count},
                  {"median_step_ms", 1e3 * steps.median},
                  {"median_schedule_ms", 1e3 * Summarize(r.schedule_s).median},
                  {"median_execute_ms", 1e3 * Summarize(r.execute_s).median},
                  {"median_outputs_ms", 1e3 * Summarize(r.outputs_s).median},
                  {"tokens_per_s", static_cast<double>(r.full_batch) / steps.median},
                  // Every such step in order: constrained requests that end early leave
                  // fewer of them, and only the first ones compare at equal context.
                  {"step_ms", [&] {
                     std::vector<double> ms;
                     for (double s : r.full_batch_steps_s) ms.push_back(1e3 * s);
                     return ms;
                   }()}};
  }
  return {{"num_prompts", r.num_requests},
          {"decode_at_full_batch", full_batch},
          {"elapsed_s", r.elapsed_s},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"requests_per_s", static_cast<double>(r.num_requests) / r.elapsed_s},
          {"total_tokens_per_s", static_cast<double>(r.prompt_tokens + r.output_tokens) / r.elapsed_s},
          {"output_tokens_per_s", static_cast<double>(r.output_tokens) / r.elapsed_s}};
}

void PrintResults(const json& results) {
  Table table({"prompts", "prompt tok", "output tok", "elapsed s", "requests/s", "total tok/s", "output tok/s"});
  for (const json& r : results) {
    table.AddRow({std::to_string(r["num_prompts"].get<int64_t>()), std::to_string(r["prompt_tokens"].get<int64_t>()),
                  std::to_string(r["output_tokens"].get<int64_t>()), Fixed(r["elapsed_s"], 3),
                  Fixed(r["requests_per_s"], 2), Fixed(r["total_tokens_per_s"], 1),
                  Fixed(r["output_tokens_per_s"], 1)});
  }
  std::printf("%s", table.Render().c_str());
  for (const json& r : results) {
    if (const json& d = r["decode_at_full_batch"]; !d.is_null()) {
      std::printf("%lld prompts: decode at batch %lld: %s tok/s (median step %s ms of %lld: schedule %s, forward and "
                  "sampling %s, outputs %s ms)\n",
                  static_cast<long long>(r["num_prompts"].get<int64_t>()),
                  static_cast<long long>(d["batch"].get<int64_t>()), Fixed(d["tokens_per_s"], 1).c_str(),
                  Fixed(d["median_step_ms"], 3).c_str(), static_cast<long long>(d["steps"].get<int64_t>()),
                  Fixed(d["median_schedule_ms"], 3).c_str(), Fixed(d["median_execute_ms"], 3).c_str(),
                  Fixed(d["median_outputs_ms"], 3).c_str());
    }
    if (const std::string line = SpecDecodingSummary(r["speculative_decoding"]); !line.empty()) {
      std::printf("%lld prompts: %s", static_cast<long long>(r["num_prompts"].get<int64_t>()), line.c_str());
    }
    if (const std::string line = GrammarBitmaskSummary(r["grammar_bitmask"]); !line.empty()) {
      std::printf("%lld prompts: %s", static_cast<long long>(r["num_prompts"].get<int64_t>()), line.c_str());
    }
  }
}

}  // namespace

int RunThroughput(const CommandArgs& args) {
  CliArgs cli("bench throughput");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  if (!cli.WasGiven("model")) throw CliError("bench throughput: give --model (an HF folder or a .gguf file)");
  const std::vector<int64_t> sweep = ParseSweep(cli.GetString("num-prompts"), "num-prompts");
  DatasetOptions d{.dataset = cli.GetString("dataset"), .input_len = cli.GetInt("input-len"),
                   .output_len = cli.GetInt("output-len"), .force_output_len = cli.WasGiven("output-len"),
                   .seed = static_cast<uint64_t>(cli.GetInt("seed"))};
  if (d.input_len < 1 || d.output_len < 1) throw CliError("bench throughput: --input-len and --output-len must be >= 1");
  const double temperature = cli.GetDouble("temperature");
  const std::optional<StructuredOutputsParams> structured = ParseStructuredOutputs(cli.GetString("structured-outputs"));
  if (cli.WasGiven("plot")) CheckPlotterAvailable();
  LLMEngine engine(EngineConfigFromArgs(cli, cli.GetString("model")));
  d.vocab_size = engine.model_config().vocab_size;
  const Tokenizer* tokenizer = engine.has_tokenizer() ? &engine.tokenizer() : nullptr;

  json report = {{"command", "throughput"}, {"config", EngineJson(engine)}};
  report["config"].update({{"dataset", d.dataset}, {"input_len", d.input_len}, {"output_len", d.output_len},
                           {"num_prompts", sweep}, {"temperature", temperature},
                           {"structured_outputs", structured ? json::parse(cli.GetString("structured-outputs")) : json()}});
  RunPrompts(engine, LoadPrompts({.num_prompts = 1, .input_len = 16, .output_len = 4,
                                  .vocab_size = d.vocab_size, .seed = d.seed + 1},
                                 nullptr),
             temperature, structured, "warmup-", nullptr);
  json results = json::array();
  Plot plot{"vllm-cpp bench throughput: " + engine.config().model, "prompts", "tokens/s", {{"total"}, {"output"}}};
  for (int64_t n : sweep) {
    d.num_prompts = n;
    const std::vector<BenchPrompt> prompts = LoadPrompts(d, tokenizer);
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (prompts[i].prompt_ids.empty()) {
        throw CliError("bench throughput: prompt " + std::to_string(i) + " of " + d.dataset +
                       " is text, and the model has no tokenizer (give --tokenizer, or prompt_token_ids)");
      }
    }
    ProgressBar bar("throughput " + std::to_string(n) + " prompts", n);
    const EngineStats before = engine.stats();
    vt::reach::Reset();
    results.push_back(
        ResultJson(RunPrompts(engine, prompts, temperature, structured, "tp-" + std::to_string(n) + "-", &bar)));
    bar.Finish();
    const EngineStats after = engine.stats();
    results.back()["kernels"] = vt::reach::Snapshot();
    if (cli.GetFlag("print-kernels")) PrintKernels(results.back()["kernels"], std::to_string(n) + " prompts");
    results.back()["speculative_decoding"] =
        SpecDecodingJson(before.spec_decoding, after.spec_decoding, after.speculative_decoding);
    results.back()["grammar_bitmask"] = GrammarBitmaskJson(before.structured_outputs, after.structured_outputs,
                                                           results.back()["elapsed_s"].get<double>());
    plot.AddPoint(static_cast<double>(n),
                  {results.back()["total_tokens_per_s"], results.back()["output_tokens_per_s"]});
  }
  report["results"] = results;
  PrintResults(results);
  WriteOutputs(cli, report, plot);
  return 0;
}

}  // namespace vllm::bench
