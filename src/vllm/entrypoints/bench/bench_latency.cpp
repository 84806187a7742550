// `vllm-cpp bench latency`: one fixed batch of B random prompts of --input-len
// tokens, each generating exactly --output-len tokens (EOS ignored), run
// --num-iters times after --num-iters-warmup untimed runs, for each B of
// --batch-size. Per iteration, timed on the host around LLMEngine::Step():
//
//   ttft     from adding the batch until every request has its first token (the
//            prefill, in as many steps as --max-num-batched-tokens needs);
//   tpot     (latency - ttft) / (output_len - 1): the mean decode step after that;
//   latency  the whole batch, first token to last.
//
// Reported as medians and p90 over iterations, with prefill tokens/s
// (B * input_len / ttft), decode tokens/s (B / tpot) and the decode roofline:
// the bytes one decode step reads at the mean decode context (roofline.h) over the
// memory bandwidth measured on the device in the same run. Each iteration draws new
// prompts, so no iteration reuses another's cached prefix.
#include <algorithm>
#include <cstdio>
#include <map>

#include "bench_commands.h"
#include "bench_dataset.h"
#include "bench_report.h"
#include "roofline.h"
#include "vllm/entrypoints/engine_args.h"
#include "vt/device.h"
#include "vt/reach.h"

namespace vllm::bench {
namespace {

using nlohmann::json;

struct LatencyOptions {
  int64_t input_len = 512, output_len = 128;
  std::vector<int64_t> batch_sizes;
  int64_t num_iters = 5, num_iters_warmup = 2;
  double temperature = 0;
  uint64_t seed = 0;
  bool print_kernels = false;
  // --profile-decode-step N: the device's profiler capture is on only around decode
  // step N (1-based) of the first timed iteration of each batch size; 0 = off.
  int64_t profile_decode_step = 0;
  vt::Device device;
};

struct Iteration {
  double latency_s = 0, ttft_s = 0, tpot_s = 0;
  std::vector<double> decode_step_s;  // steps after every request had its first token
};

void DeclareArgs(CliArgs& cli) {
  cli.AddOption("model", "HF checkpoint folder or .gguf file");
  cli.AddOption("input-len", "prompt tokens per request", "512");
  cli.AddOption("output-len", "tokens generated per request (EOS ignored)", "128");
  cli.AddOption("batch-size", "requests per batch; a comma-separated list sweeps (1,16,64)", "1");
  cli.AddOption("num-iters", "timed iterations per batch size", "5");
  cli.AddOption("num-iters-warmup", "untimed iterations first", "2");
  cli.AddOption("temperature",
                "sampling temperature (0 = greedy; on a GPU both draw on the device and replay decode graphs)", "0");
  cli.AddFlag("print-kernels", "list on stderr the kernel variants the timed iterations reached");
  cli.AddOption("profile-decode-step",
                "GPU: turn the profiler's capture on only around decode step N of the first timed iteration of "
                "each batch size, for a profiler started with it off (ncu --profile-from-start off); 0 = off",
                "0");
  AddReportArgs(cli);
  AddEngineArgs(cli);
}

LatencyOptions ReadOptions(const CliArgs& cli) {
  LatencyOptions o;
  o.input_len = cli.GetInt("input-len");
  o.output_len = cli.GetInt("output-len");
  o.batch_sizes = ParseSweep(cli.GetString("batch-size"), "batch-size");
  o.num_iters = cli.GetInt("num-iters");
  o.num_iters_warmup = cli.GetInt("num-iters-warmup");
  o.temperature = cli.GetDouble("temperature");
  o.seed = static_cast<uint64_t>(cli.GetInt("seed"));
  o.print_kernels = cli.GetFlag("print-kernels");
  o.profile_decode_step = cli.GetInt("profile-decode-step");
  o.device = vt::ParseDevice(cli.GetString("device"));
  if (o.profile_decode_step < 0 || o.profile_decode_step > o.output_len - 1) {
    throw CliError("bench latency: --profile-decode-step must be in [0, --output-len - 1 = " +
                   std::to_string(o.output_len - 1) + "], got " + std::to_string(o.profile_decode_step));
  }
  if (o.profile_decode_step > 0 && o.device.type == vt::DeviceType::kCPU) {
    throw CliError("bench latency: --profile-decode-step needs a GPU --device (the CPU has no profiler capture)");
  }
  if (o.input_len < 1 || o.output_len < 2) {
    throw CliError("bench latency: --input-len must be >= 1 and --output-len >= 2 (one token from the prefill, "
                   "the rest decode)");
  }
  if (o.num_iters < 1 || o.num_iters_warmup < 0) {
    throw CliError("bench latency: --num-iters must be >= 1 and --num-iters-warmup >= 0");
  }
  return o;
}

// The engine sized for the sweep: max_num_seqs covers the largest batch and
// max_model_len one request, unless the user set them (then they must fit).
EngineConfig SweepEngineConfig(const CliArgs& cli, const LatencyOptions& o) {
  if (!cli.WasGiven("model")) throw CliError("bench latency: give --model (an HF folder or a .gguf file)");
  EngineConfig config = EngineConfigFromArgs(cli, cli.GetString("model"));
  const int64_t largest = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  if (!cli.WasGiven("max-num-seqs")) {
    config.max_num_seqs = largest;
  } else if (config.max_num_seqs < largest) {
    throw CliError("bench latency: --batch-size " + std::to_string(largest) + " is more than --max-num-seqs " +
                   std::to_string(config.max_num_seqs) + ": the batch would not run at once");
  }
  if (!cli.WasGiven("max-model-len")) config.max_model_len = o.input_len + o.output_len;
  return config;
}

Iteration RunBatch(LLMEngine& engine, const LatencyOptions& o, int64_t batch, int64_t iteration) {
  DatasetOptions d{.num_prompts = batch, .input_len = o.input_len, .output_len = o.output_len,
                   .vocab_size = engine.model_config().vocab_size,
                   .seed = o.seed + 7919 * static_cast<uint64_t>(iteration) + static_cast<uint64_t>(batch)};
  SamplingParams params;
  params.temperature = o.temperature;
  params.ignore_eos = true;
  params.max_tokens = o.output_len;
  params.output_kind = RequestOutputKind::kFinalOnly;
  const std::vector<BenchPrompt> prompts = LoadPrompts(d, nullptr);
  const std::string prefix = "latency-" + std::to_string(batch) + "-" + std::to_string(iteration) + "-";
  Iteration it;
  const Clock::time_point start = Clock::now();
  for (int64_t b = 0; b < batch; ++b) engine.AddRequest(prefix + std::to_string(b), prompts[b].prompt_ids, params);
  std::map<std::string, bool> started;
  int64_t decode_steps = 0;
  while (engine.HasUnfinishedRequests()) {
    const bool decoding = static_cast<int64_t>(started.size()) == batch;
    const bool profiled = iteration == 0 && decoding && ++decode_steps == o.profile_decode_step;
    if (profiled) vt::SetProfilerCapture(o.device, true);  // waits for the device first
    const Clock::time_point step_start = Clock::now();
    for (const RequestOutput& out : engine.Step()) {
      if (!out.new_token_ids.empty()) started[out.request_id] = true;
    }
    if (profiled) vt::SetProfilerCapture(o.device, false);
    const Clock::time_point step_end = Clock::now();
    if (decoding) {
      it.decode_step_s.push_back(SecondsBetween(step_start, step_end));
    } else if (static_cast<int64_t>(started.size()) == batch) {
      it.ttft_s = SecondsBetween(start, step_end);
    }
  }
  it.latency_s = SecondsBetween(start, Clock::now());
  it.tpot_s = (it.latency_s - it.ttft_s) / static_cast<double>(o.output_len - 1);
  return it;
}

json MeasureBatch(LLMEngine& engine, const LatencyOptions& o, int64_t batch, const Bandwidth& bandwidth) {
  ProgressBar bar("latency batch " + std::to_string(batch), o.num_iters_warmup + o.num_iters);
  for (int64_t i = 0; i < o.num_iters_warmup; ++i) {
    RunBatch(engine, o, batch, -1 - i);
    bar.Update(i + 1);
  }
  vt::reach::Reset();
  const SpecDecodingStats spec_before = engine.stats().spec_decoding;
  std::vector<Iteration> runs;
  std::vector<double> latency, ttft, tpot, steps;
  for (int64_t i = 0; i < o.num_iters; ++i) {
    runs.push_back(RunBatch(engine, o, batch, i));
    latency.push_back(runs.back().latency_s);
    ttft.push_back(runs.back().ttft_s);
    tpot.push_back(runs.back().tpot_s);
    steps.insert(steps.end(), runs.back().decode_step_s.begin(), runs.back().decode_step_s.end());
    bar.Update(o.num_iters_warmup + i + 1);
  }
  bar.Finish();
  const EngineStats after = engine.stats();
  const Summary tpot_s = Summarize(tpot), ttft_s = Summarize(ttft);
  const StepBytes bytes = DecodeStepBytes(engine, batch, o.input_len + o.output_len / 2);
  const double ideal_s = bytes.total() / bandwidth.bytes_per_s;
  json iterations = json::array();
  for (const Iteration& r : runs) {
    iterations.push_back({{"latency_s", r.latency_s}, {"ttft_s", r.ttft_s}, {"tpot_s", r.tpot_s}});
  }
  return {{"batch_size", batch},
          {"latency_s", SummaryJson(Summarize(latency))},
          {"ttft_ms", SummaryJson(ttft_s, 1e3)},
          {"tpot_ms", SummaryJson(tpot_s, 1e3)},
          {"decode_step_ms", SummaryJson(Summarize(steps), 1e3)},
          {"prefill_tokens_per_s", static_cast<double>(batch * o.input_len) / ttft_s.median},
          {"decode_tokens_per_s", static_cast<double>(batch) / tpot_s.median},
          {"roofline",
           {{"step_bytes", {{"weights", bytes.weights}, {"kv_cache", bytes.kv_cache}, {"state", bytes.state}}},
            {"context_len", o.input_len + o.output_len / 2},
            {"ideal_tpot_ms", ideal_s * 1e3},
            {"fraction", ideal_s / tpot_s.median}}},
          {"speculative_decoding", SpecDecodingJson(spec_before, after.spec_decoding, after.speculative_decoding)},
          {"kernels", vt::reach::Snapshot()},
          {"iterations", iterations}};
}

void PrintResults(const json& results) {
  Table table({"batch", "TTFT ms", "p90", "prefill tok/s", "TPOT ms", "p90", "decode tok/s", "latency s",
               "roofline ms", "of roofline"});
  for (const json& r : results) {
    table.AddRow({std::to_string(r["batch_size"].get<int64_t>()), Fixed(r["ttft_ms"]["median"], 2),
                  Fixed(r["ttft_ms"]["p90"], 2), Fixed(r["prefill_tokens_per_s"], 1), Fixed(r["tpot_ms"]["median"], 3),
                  Fixed(r["tpot_ms"]["p90"], 3), Fixed(r["decode_tokens_per_s"], 1),
                  Fixed(r["latency_s"]["median"], 3), Fixed(r["roofline"]["ideal_tpot_ms"], 3),
                  Fixed(r["roofline"]["fraction"], 3)});
  }
  std::printf("%s", table.Render().c_str());
  for (const json& r : results) {
    if (const std::string line = SpecDecodingSummary(r["speculative_decoding"]); !line.empty()) {
      std::printf("batch %lld: %s", static_cast<long long>(r["batch_size"].get<int64_t>()), line.c_str());
    }
  }
}

}  // namespace

int RunLatency(const CommandArgs& args) {
  CliArgs cli("bench latency");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  const LatencyOptions o = ReadOptions(cli);
  if (cli.WasGiven("plot")) CheckPlotterAvailable();
  const EngineConfig config = SweepEngineConfig(cli, o);
  // Measured before the engine takes the device memory for its caches.
  const Bandwidth bandwidth = MeasureMemoryBandwidth(config.device);
  LLMEngine engine(config);
  json report = {{"command", "latency"}, {"config", EngineJson(engine)}};
  report["config"].update({{"input_len", o.input_len}, {"output_len", o.output_len},
                           {"batch_sizes", o.batch_sizes}, {"num_iters", o.num_iters},
                           {"num_iters_warmup", o.num_iters_warmup}, {"temperature", o.temperature}});
  report["memory_bandwidth"] = {{"bytes_per_s", bandwidth.bytes_per_s}, {"method", bandwidth.method}};
  std::fprintf(stderr, "%s on %s (%s): memory bandwidth %.1f GB/s (%s)\n", config.model.c_str(),
               report["config"]["device_name"].get<std::string>().c_str(), config.device.ToString().c_str(),
               bandwidth.bytes_per_s / 1e9, bandwidth.method);
  json results = json::array();
  Plot plot{"vllm-cpp bench latency: " + config.model, "batch size", "tokens/s", {{"decode"}, {"prefill"}}};
  for (int64_t batch : o.batch_sizes) {
    results.push_back(MeasureBatch(engine, o, batch, bandwidth));
    if (o.print_kernels) {
      PrintKernels(results.back()["kernels"], "batch " + std::to_string(batch) + " (all timed iterations)");
    }
    plot.AddPoint(static_cast<double>(batch),
                  {results.back()["decode_tokens_per_s"], results.back()["prefill_tokens_per_s"]});
  }
  report["results"] = results;
  PrintResults(results);
  WriteOutputs(cli, report, plot);
  return 0;
}

}  // namespace vllm::bench
