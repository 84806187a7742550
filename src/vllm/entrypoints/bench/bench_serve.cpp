// `vllm-cpp bench serve`: an OpenAI-protocol load generator (vLLM's `vllm bench
// serve`). Requests are streamed (serve_client.h) from many connections at once:
//
//   arrivals     --request-rate inf sends every request at the start; a rate R
//                draws exponential gaps of mean 1/R s (a Poisson process, seeded);
//   concurrency  at most --max-concurrency requests in flight (a request that has
//                arrived waits for one to finish); a comma-separated list sweeps.
//
// Reported as vLLM reports it: successful and failed requests, duration, request,
// output and total token throughput, and TTFT, TPOT ((latency - ttft) / (output
// tokens - 1), per request), ITL (gaps between streamed events) and end-to-end
// latency: mean, median, p99. Throughputs and latencies count successful requests
// only. Prompts: random token ids (sent as a list of ids to /v1/completions) or a
// dataset file's text (bench_dataset.h).
//
// --num-turns T > 1: --num-prompts conversations of T turns. A conversation's turns
// run one after another, each resending the whole history (every earlier prompt
// and the answer streamed back) plus a new prompt, as a chat client does; the
// conversations run side by side (up to --max-concurrency at once). TTFT is also
// reported per turn, where prefix caching shows: without it a turn's TTFT grows
// with its history. The history is text, so random prompts need --tokenizer.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "bench_commands.h"
#include "bench_dataset.h"
#include "bench_report.h"
#include "serve_client.h"

namespace vllm::bench {
namespace {

using nlohmann::json;

struct ServeOptions {
  ServeTarget target;
  std::string model;
  bool chat = false;  // the endpoint takes "messages" rather than "prompt"
  DatasetOptions dataset;
  double request_rate = std::numeric_limits<double>::infinity();
  std::vector<int64_t> max_concurrency;  // 0: unlimited
  double temperature = 0;
  int64_t num_turns = 1;
};

void DeclareArgs(CliArgs& cli) {
  cli.AddOption("base-url", "the server, http://HOST[:PORT][/PREFIX]", "http://127.0.0.1:8000");
  cli.AddOption("endpoint", "/v1/completions or /v1/chat/completions", "/v1/completions");
  cli.AddOption("model", "the model name sent in each request (the server's served model name)");
  cli.AddOption("num-prompts", "requests to send (with --num-turns: conversations)", "1000");
  cli.AddOption("num-turns",
                "turns per conversation: each resends the history (prompts and streamed answers) plus a new prompt",
                "1");
  cli.AddOption("request-rate", "requests per second (a Poisson process), or inf: all at once", "inf");
  cli.AddOption("max-concurrency", "most requests in flight; a comma-separated list sweeps (1,8,64); 0 = no limit", "0");
  cli.AddOption("random-input-len", "prompt tokens of random prompts", "1024");
  cli.AddOption("random-output-len", "tokens asked for per request (for a file: replaces each entry's own)", "128");
  cli.AddOption("random-vocab-size",
                "random prompt ids are drawn from [0, this) when no --tokenizer is given "
                "(the low ids are ordinary tokens in byte-level BPE vocabularies)", "1000");
  cli.AddOption("dataset", "random, or a JSONL / ShareGPT JSON file of prompts", "random");
  cli.AddOption("tokenizer", "tokenizer folder or .gguf: random ids span its vocabulary, ShareGPT lengths use it");
  cli.AddOption("seed", "seed of the prompts and of the arrival times", "0");
  cli.AddOption("temperature", "sampling temperature sent with each request", "0");
  cli.AddOption("api-key", "sent as 'Authorization: Bearer KEY'", "");
  cli.AddOption("request-timeout", "seconds to wait for a connection and for each read", "600");
  AddReportArgs(cli);
}

double ParseRate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double rate = 0;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(rate > 0) || !std::isfinite(rate)) {
    throw CliError("bench serve: --request-rate must be a positive number of requests per second or inf, got '" +
                   text + "'");
  }
  return rate;
}

ServeOptions ReadOptions(const CliArgs& cli, const Tokenizer* tokenizer) {
  ServeOptions o;
  if (!cli.WasGiven("model")) throw CliError("bench serve: give --model, the model name the server serves");
  o.target = ParseServeTarget(cli.GetString("base-url"), cli.GetString("endpoint"));
  o.target.api_key = cli.GetString("api-key");
  o.target.timeout_s = cli.GetDouble("request-timeout");
  if (!(o.target.timeout_s > 0)) throw CliError("bench serve: --request-timeout must be > 0 seconds");
  o.model = cli.GetString("model");
  o.chat = o.target.path.find("chat/completions") != std::string::npos;
  o.request_rate = ParseRate(cli.GetString("request-rate"));
  o.max_concurrency = ParseSweep(cli.GetString("max-concurrency"), "max-concurrency", 0);
  o.temperature = cli.GetDouble("temperature");
  o.dataset = {.dataset = cli.GetString("dataset"), .num_prompts = cli.GetInt("num-prompts"),
               .input_len = cli.GetInt("random-input-len"), .output_len = cli.GetInt("random-output-len"),
               .force_output_len = cli.WasGiven("random-output-len"),
               .vocab_size = tokenizer ? tokenizer->vocab_size() : cli.GetInt("random-vocab-size"),
               .seed = static_cast<uint64_t>(cli.GetInt("seed"))};
  o.num_turns = cli.GetInt("num-turns");
  if (o.num_turns < 1) throw CliError("bench serve: --num-turns must be >= 1");
  if (o.num_turns > 1 && o.dataset.dataset == "random" && tokenizer == nullptr) {
    throw CliError("bench serve: --num-turns > 1 resends the history as text, so random prompts need --tokenizer");
  }
  o.dataset.num_prompts *= o.num_turns;  // a prompt for every turn of every conversation
  if (o.dataset.input_len < 1 || o.dataset.output_len < 1) {
    throw CliError("bench serve: --random-input-len and --random-output-len must be >= 1");
  }
  if (tokenizer && cli.WasGiven("random-vocab-size")) {
    throw CliError("bench serve: give --tokenizer or --random-vocab-size, not both (the tokenizer sets the vocabulary)");
  }
  return o;
}

// The request body of one prompt: token ids or text to /v1/completions, text as
// one user message to /v1/chat/completions.
json RequestBody(const ServeOptions& o, const BenchPrompt& p, const Tokenizer* tokenizer) {
  json body = {{"model", o.model}, {"max_tokens", p.output_len}, {"temperature", o.temperature}, {"ignore_eos", true}};
  if (!o.chat) {
    body["prompt"] = p.prompt_text.empty() ? json(p.prompt_ids) : json(p.prompt_text);
    return body;
  }
  std::string text = p.prompt_text;
  if (text.empty()) {
    if (!tokenizer) throw CliError("bench serve: random prompts to a chat endpoint are text, which needs --tokenizer");
    text = tokenizer->Decode(p.prompt_ids);
  }
  body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  return body;
}

// Seconds from the start at which each request arrives.
std::vector<double> ArrivalTimes(int64_t n, double rate, uint64_t seed) {
  std::vector<double> at(n, 0.0);
  if (std::isinf(rate)) return at;
  std::mt19937_64 rng(seed ^ 0x5bd1e995u);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (double& a : at) a = t += gap(rng);
  return at;
}

// Runs `worker` on `count` threads and waits for them all.
template <typename Worker>
void RunOnThreads(int64_t count, const Worker& worker) {
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < count; ++i) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
}

// The text of a prompt (a random one decoded).
std::string PromptText(const BenchPrompt& p, const Tokenizer* tokenizer) {
  if (!p.prompt_text.empty()) return p.prompt_text;
  if (!tokenizer) throw CliError("bench serve: random prompts as text need --tokenizer");
  return tokenizer->Decode(p.prompt_ids);
}

// Turn `turn` of a conversation: the history (earlier prompts and answers) and the
// new prompt, as messages for a chat endpoint or one concatenated text otherwise.
json TurnBody(const ServeOptions& o, const std::vector<std::string>& history, const BenchPrompt& p,
              const Tokenizer* tokenizer) {
  json body = {{"model", o.model}, {"max_tokens", p.output_len}, {"temperature", o.temperature}, {"ignore_eos", true}};
  const std::string text = PromptText(p, tokenizer);
  if (o.chat) {
    json messages = json::array();
    for (size_t i = 0; i < history.size(); ++i) {
      messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", history[i]}});
    }
    messages.push_back({{"role", "user"}, {"content", text}});
    body["messages"] = messages;
  } else {
    std::string prompt;
    for (const std::string& part : history) prompt += part;
    body["prompt"] = prompt + text;
  }
  return body;
}

// --num-turns > 1: results[c * turns + t] is turn t of conversation c.
std::vector<ServeRequestResult> RunConversations(const ServeOptions& o, const std::vector<BenchPrompt>& prompts,
                                                 const Tokenizer* tokenizer, int64_t concurrency, double* duration_s) {
  const int64_t turns = o.num_turns, conversations = static_cast<int64_t>(prompts.size()) / turns;
  const std::vector<double> arrivals = ArrivalTimes(conversations, o.request_rate, o.dataset.seed);
  std::vector<ServeRequestResult> results(prompts.size());
  std::atomic<int64_t> next{0}, done{0};
  ProgressBar bar("serve conversations, concurrency " +
                      (concurrency ? std::to_string(concurrency) : std::string("unlimited")),
                  static_cast<int64_t>(prompts.size()));
  std::mutex bar_mutex;
  const Clock::time_point start = Clock::now();
  const auto worker = [&] {
    for (int64_t c; (c = next++) < conversations;) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(arrivals[c])));
      std::vector<std::string> history;
      for (int64_t t = 0; t < turns; ++t) {
        const BenchPrompt& p = prompts[c * turns + t];
        ServeRequestResult& r = results[c * turns + t];
        r = SendStreamingRequest(o.target, TurnBody(o, history, p, tokenizer), p.num_prompt_tokens());
        r.start_s = SecondsBetween(start, Clock::now()) - r.latency_s;
        {
          std::lock_guard<std::mutex> lock(bar_mutex);
          bar.Update(++done);
        }
        if (!r.success) break;  // the conversation ends with its failed turn
        history.push_back(PromptText(p, tokenizer));
        history.push_back(r.output_text);
      }
    }
  };
  RunOnThreads(concurrency > 0 ? std::min(concurrency, conversations) : conversations, worker);
  *duration_s = SecondsBetween(start, Clock::now());
  bar.Finish();
  return results;
}

// TTFT and prompt tokens of the successful requests of each turn.
json ByTurn(const std::vector<ServeRequestResult>& results, int64_t turns) {
  json by_turn = json::array();
  for (int64_t t = 0; t < turns; ++t) {
    std::vector<double> ttft, prompt_tokens;
    for (size_t i = static_cast<size_t>(t); i < results.size(); i += static_cast<size_t>(turns)) {
      if (!results[i].success) continue;
      ttft.push_back(results[i].ttft_s);
      prompt_tokens.push_back(static_cast<double>(results[i].prompt_tokens));
    }
    by_turn.push_back({{"turn", t + 1}, {"ttft_ms", SummaryJson(Summarize(ttft), 1e3)},
                       {"prompt_tokens", SummaryJson(Summarize(prompt_tokens))}});
  }
  return by_turn;
}

std::vector<ServeRequestResult> RunLoad(const ServeOptions& o, const std::vector<json>& bodies,
                                        const std::vector<int64_t>& prompt_tokens, int64_t concurrency,
                                        double* duration_s) {
  const auto n = static_cast<int64_t>(bodies.size());
  const std::vector<double> arrivals = ArrivalTimes(n, o.request_rate, o.dataset.seed);
  std::vector<ServeRequestResult> results(n);
  std::atomic<int64_t> next{0}, done{0};
  ProgressBar bar("serve concurrency " + (concurrency ? std::to_string(concurrency) : std::string("unlimited")), n);
  std::mutex bar_mutex;
  const Clock::time_point start = Clock::now();
  const auto worker = [&] {
    for (int64_t i; (i = next++) < n;) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(arrivals[i])));
      results[i] = SendStreamingRequest(o.target, bodies[i], prompt_tokens[i]);
      results[i].start_s = SecondsBetween(start, Clock::now()) - results[i].latency_s;
      std::lock_guard<std::mutex> lock(bar_mutex);
      bar.Update(++done);
    }
  };
  RunOnThreads(concurrency > 0 ? std::min(concurrency, n) : n, worker);
  *duration_s = SecondsBetween(start, Clock::now());
  bar.Finish();
  return results;
}

json Metrics(const std::vector<ServeRequestResult>& results, double duration_s, int64_t concurrency, double rate) {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, input_tokens = 0, output_tokens = 0;
  std::map<std::string, int64_t> errors;
  for (const ServeRequestResult& r : results) {
    if (!r.success) {
      ++errors[r.error.substr(0, 120)];
      continue;
    }
    ++completed;
    input_tokens += r.prompt_tokens;
    output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.latency_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.output_tokens > 1) tpot.push_back((r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1));
  }
  return {{"max_concurrency", concurrency},
          {"request_rate", std::isinf(rate) ? json("inf") : json(rate)},
          {"completed", completed},
          {"failed", static_cast<int64_t>(results.size()) - completed},
          {"errors", errors},
          {"duration_s", duration_s},
          {"total_input_tokens", input_tokens},
          {"total_output_tokens", output_tokens},
          {"request_throughput", static_cast<double>(completed) / duration_s},
          {"output_throughput", static_cast<double>(output_tokens) / duration_s},
          {"total_token_throughput", static_cast<double>(input_tokens + output_tokens) / duration_s},
          {"ttft_ms", SummaryJson(Summarize(ttft), 1e3)},
          {"tpot_ms", SummaryJson(Summarize(tpot), 1e3)},
          {"itl_ms", SummaryJson(Summarize(itl), 1e3)},
          {"e2el_ms", SummaryJson(Summarize(e2el), 1e3)}};
}

void PrintResult(const json& m) {
  const auto line = [](const char* name, const std::string& value) { std::printf("%-40s%s\n", name, value.c_str()); };
  std::printf("============ Serving Benchmark Result ============\n");
  line("Successful requests:", std::to_string(m["completed"].get<int64_t>()));
  line("Failed requests:", std::to_string(m["failed"].get<int64_t>()));
  const int64_t c = m["max_concurrency"];
  line("Maximum request concurrency:", c ? std::to_string(c) : "unlimited");
  line("Benchmark duration (s):", Fixed(m["duration_s"], 2));
  line("Total input tokens:", std::to_string(m["total_input_tokens"].get<int64_t>()));
  line("Total generated tokens:", std::to_string(m["total_output_tokens"].get<int64_t>()));
  line("Request throughput (req/s):", Fixed(m["request_throughput"], 2));
  line("Output token throughput (tok/s):", Fixed(m["output_throughput"], 2));
  line("Total Token throughput (tok/s):", Fixed(m["total_token_throughput"], 2));
  for (const auto& [key, title] : {std::pair{"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}, {"itl_ms", "ITL"}}) {
    std::printf("----- %s (ms) -----\n", title);
    line(("Mean " + std::string(title) + " (ms):").c_str(), Fixed(m[key]["mean"], 2));
    line(("Median " + std::string(title) + " (ms):").c_str(), Fixed(m[key]["median"], 2));
    line(("P99 " + std::string(title) + " (ms):").c_str(), Fixed(m[key]["p99"], 2));
  }
  if (m.contains("by_turn")) {
    std::printf("----- TTFT by turn (ms) -----\n");
    for (const json& t : m["by_turn"]) {
      line(("Turn " + std::to_string(t["turn"].get<int64_t>()) + " median TTFT (ms), prompt tokens:").c_str(),
           Fixed(t["ttft_ms"]["median"], 2) + ", " + Fixed(t["prompt_tokens"]["median"], 0));
    }
  }
  for (const auto& [error, count] : m["errors"].items()) std::printf("failed x%lld: %s\n", count.get<long long>(), error.c_str());
  std::printf("==================================================\n");
}

}  // namespace

int RunServe(const CommandArgs& args) {
  CliArgs cli("bench serve");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  std::optional<Tokenizer> tokenizer;
  if (cli.WasGiven("tokenizer")) tokenizer = Tokenizer::FromPath(cli.GetString("tokenizer"));
  const Tokenizer* tok = tokenizer ? &*tokenizer : nullptr;
  const ServeOptions o = ReadOptions(cli, tok);
  if (cli.WasGiven("plot")) CheckPlotterAvailable();
  const std::vector<BenchPrompt> prompts = LoadPrompts(o.dataset, tok);
  std::vector<json> bodies;
  std::vector<int64_t> prompt_tokens;
  if (o.num_turns == 1) {  // conversations build each turn's body from the answers before it
    for (const BenchPrompt& p : prompts) {
      bodies.push_back(RequestBody(o, p, tok));
      prompt_tokens.push_back(p.num_prompt_tokens());
    }
  }
  json report = {{"command", "serve"},
                 {"config",
                  {{"base_url", cli.GetString("base-url")}, {"endpoint", o.target.path}, {"model", o.model},
                   {"dataset", o.dataset.dataset}, {"num_prompts", o.dataset.num_prompts / o.num_turns},
                   {"num_turns", o.num_turns},
                   {"random_input_len", o.dataset.input_len}, {"random_output_len", o.dataset.output_len},
                   {"max_concurrency", o.max_concurrency}, {"temperature", o.temperature},
                   {"build", BuildJson()}}}};
  json results = json::array();
  Plot plot{"vllm-cpp bench serve: " + o.model, "max concurrency", "tokens/s", {{"output"}, {"total"}}};
  for (int64_t concurrency : o.max_concurrency) {
    double duration_s = 0;
    const std::vector<ServeRequestResult> runs = o.num_turns > 1
                                                     ? RunConversations(o, prompts, tok, concurrency, &duration_s)
                                                     : RunLoad(o, bodies, prompt_tokens, concurrency, &duration_s);
    results.push_back(Metrics(runs, duration_s, concurrency, o.request_rate));
    if (o.num_turns > 1) results.back()["by_turn"] = ByTurn(runs, o.num_turns);
    PrintResult(results.back());
    const double x = concurrency ? static_cast<double>(concurrency) : static_cast<double>(prompts.size());
    plot.AddPoint(x, {results.back()["output_throughput"], results.back()["total_token_throughput"]});
  }
  report["results"] = results;
  WriteOutputs(cli, report, plot);
  return 0;
}

}  // namespace vllm::bench
