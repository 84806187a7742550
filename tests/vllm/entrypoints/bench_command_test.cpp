// `vllm-cpp bench latency` and `bench throughput` on the tiny test models: the JSON
// report's fields and counts, the sweeps, the plot, the datasets and the roofline
// byte count. No timing is asserted, only that times are positive and consistent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vllm/entrypoints/bench/bench_dataset.h"
#include "vllm/entrypoints/bench/bench_report.h"
#include "vllm/entrypoints/bench/roofline.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"

namespace vllm {
namespace {

using nlohmann::json;

std::string ModelDir(const char* name) { return std::string(VT_TEST_DATA_DIR) + "/models/" + name + "/hf"; }
std::string TokenizerDir() { return std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer"; }

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" + name))
      .string();
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return json::parse(in);
}

bool HasGnuplot() { return std::system("gnuplot --version >/dev/null 2>&1") == 0; }

bool IsPng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::string(magic + 1, 3) == "PNG";
}

TEST(BenchLatencyTest, SweepReportsEveryBatchWithConsistentTimesAndRoofline) {
  const std::string out = TempPath("latency.json");
  ASSERT_EQ(RunBenchCommand({"latency", "--model", ModelDir("qwen35_dense_untied"), "--input-len", "9", "--output-len",
                             "4", "--batch-size", "1,3", "--num-iters", "3", "--num-iters-warmup", "1", "--threads", "1",
                             "--output-json", out}),
            0);
  const json report = ReadJson(out);
  EXPECT_EQ(report["command"], "latency");
  const json& config = report["config"];
  EXPECT_EQ(config["device"], "cpu");
  EXPECT_EQ(config["dtype"], "f32");
  EXPECT_FALSE(config["weight_format"].get<std::string>().empty());
  EXPECT_GT(config["weight_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(config["build"]["commit"].get<std::string>().empty());
  EXPECT_EQ(config["batch_sizes"], json({1, 3}));
  EXPECT_EQ(config["max_num_seqs"], 3);     // sized to the largest batch
  EXPECT_EQ(config["max_model_len"], 13);   // one request: input + output
  EXPECT_GT(report["memory_bandwidth"]["bytes_per_s"].get<double>(), 0);
  ASSERT_EQ(report["results"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& r = report["results"][i];
    EXPECT_EQ(r["batch_size"], i == 0 ? 1 : 3);
    ASSERT_EQ(r["iterations"].size(), 3u);
    for (const json& it : r["iterations"]) {
      EXPECT_GT(it["ttft_s"].get<double>(), 0);
      EXPECT_GT(it["latency_s"].get<double>(), it["ttft_s"].get<double>());
      EXPECT_NEAR(it["tpot_s"].get<double>() * 3, it["latency_s"].get<double>() - it["ttft_s"].get<double>(), 1e-12);
    }
    EXPECT_EQ(r["latency_s"]["count"], 3);
    EXPECT_EQ(r["decode_step_ms"]["count"], 9);  // output 4: one token from the prefill, 3 decode steps x 3 iterations
    const double tpot_ms = r["tpot_ms"]["median"];
    EXPECT_NEAR(r["decode_tokens_per_s"].get<double>(), r["batch_size"].get<double>() / (tpot_ms / 1e3), 1e-6);
    EXPECT_NEAR(r["prefill_tokens_per_s"].get<double>(), 9 * r["batch_size"].get<double>() / (r["ttft_ms"]["median"].get<double>() / 1e3), 1e-6);
    const json& roof = r["roofline"];
    EXPECT_GT(roof["step_bytes"]["weights"].get<double>(), 0);
    EXPECT_GT(roof["step_bytes"]["kv_cache"].get<double>(), 0);  // the model has full-attention layers
    EXPECT_GT(roof["step_bytes"]["state"].get<double>(), 0);     // and Gated DeltaNet layers
    EXPECT_NEAR(roof["fraction"].get<double>(), roof["ideal_tpot_ms"].get<double>() / tpot_ms, 1e-9);
    EXPECT_FALSE(r["kernels"].empty());  // the reach counters of the timed iterations
  }
  // More sequences read more KV cache and state per step, the same weights but for the embedding rows.
  EXPECT_GT(report["results"][1]["roofline"]["step_bytes"]["kv_cache"].get<double>(),
            report["results"][0]["roofline"]["step_bytes"]["kv_cache"].get<double>());
}

TEST(BenchLatencyTest, PlotIsAPngOfTheSweep) {
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed (tools/install_deps.sh installs gnuplot-nox)";
  const std::string png = TempPath("latency.png");
  std::filesystem::remove(png);
  ASSERT_EQ(RunBenchCommand({"latency", "--model", ModelDir("qwen3"), "--input-len", "4", "--output-len", "2",
                             "--batch-size", "1,2,4", "--num-iters", "1", "--num-iters-warmup", "0", "--threads", "1",
                             "--plot", png}),
            0);
  EXPECT_TRUE(IsPng(png)) << png;
}

TEST(BenchLatencyTest, BadFlagsAreRefusedByName) {
  const std::string model = ModelDir("qwen3");
  const auto error_of = [&](std::vector<std::string> args) -> std::string {
    args.insert(args.begin(), "latency");
    try {
      RunBenchCommand(args);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({"--model", model, "--batch-size", "1,0"}).find("--batch-size"), std::string::npos);
  EXPECT_NE(error_of({"--model", model, "--batch-size", "1,x"}).find("--batch-size"), std::string::npos);
  EXPECT_NE(error_of({"--model", model, "--output-len", "1"}).find("--output-len"), std::string::npos);
  EXPECT_NE(error_of({"--model", model, "--batch-size", "8", "--max-num-seqs", "4"}).find("--max-num-seqs"),
            std::string::npos);
  EXPECT_NE(error_of({"--input-len", "4"}).find("--model"), std::string::npos);
  // The profiler capture needs a GPU and a decode step that exists.
  EXPECT_NE(error_of({"--model", model, "--profile-decode-step", "1"}).find("needs a GPU"), std::string::npos);
  EXPECT_NE(error_of({"--model", model, "--output-len", "4", "--profile-decode-step", "4"}).find("--profile-decode-step"),
            std::string::npos);
  EXPECT_NE(error_of({"--model", model, "--no-such-flag", "1"}).find("--no-such-flag"), std::string::npos);
  try {
    RunBenchCommand({"fastest"});
    ADD_FAILURE() << "an unknown subcommand ran";
  } catch (const CliError& e) {
    EXPECT_NE(std::string(e.what()).find("fastest"), std::string::npos);
  }
}

// --speculative-config reaches the engine through the flags every command shares: the
// report counts the drafts (the demo model's head is trained: some are accepted), and
// without the flag the field is null; a bad config is refused naming the key.
TEST(BenchLatencyTest, SpeculativeConfigDraftsAndTheReportCountsThem) {
  const std::string out = TempPath("spec.json");
  ASSERT_EQ(RunBenchCommand({"latency", "--model", std::string(VLLM_DEMO_MODEL_DIR) + "/hf", "--input-len", "16",
                             "--output-len", "32", "--num-iters", "1", "--num-iters-warmup", "0", "--threads", "1",
                             "--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2})",
                             "--output-json", out}),
            0);
  const json spec = ReadJson(out)["results"][0]["speculative_decoding"];
  ASSERT_TRUE(spec.is_object()) << spec.dump();
  EXPECT_GT(spec["num_drafts"].get<int64_t>(), 0);
  EXPECT_GT(spec["num_accepted_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(spec["acceptance_rate_per_pos"].size(), 2u);
  ASSERT_EQ(RunBenchCommand({"latency", "--model", std::string(VLLM_DEMO_MODEL_DIR) + "/hf", "--input-len", "16",
                             "--output-len", "4", "--num-iters", "1", "--num-iters-warmup", "0", "--threads", "1",
                             "--output-json", out}),
            0);
  EXPECT_TRUE(ReadJson(out)["results"][0]["speculative_decoding"].is_null());
  try {
    RunBenchCommand({"latency", "--model", ModelDir("qwen3"), "--speculative-config",
                     R"({"method": "mtp", "num_speculative_tokens": 1, "draft_model": "x"})"});
    ADD_FAILURE() << "an unknown key was accepted";
  } catch (const CliError& e) {
    EXPECT_NE(std::string(e.what()).find("'draft_model'"), std::string::npos) << e.what();
  }
}

// --print-kernels lists each run's reach counters on stderr; without it, nothing.
TEST(BenchThroughputTest, PrintKernelsListsWhatEachRunReached) {
  for (const bool print : {false, true}) {
    std::vector<std::string> args = {"throughput", "--model", ModelDir("qwen3"), "--num-prompts", "2", "--input-len",
                                     "5", "--output-len", "2", "--threads", "1"};
    if (print) args.push_back("--print-kernels");
    ::testing::internal::CaptureStderr();
    ASSERT_EQ(RunBenchCommand(args), 0);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("kernels reached, 2 prompts:") != std::string::npos, print) << err;
    EXPECT_EQ(err.find("ModelRunner::ArgmaxOnDevice") != std::string::npos, print) << err;
  }
}

TEST(BenchThroughputTest, SweepCountsEveryTokenOfEveryRun) {
  const std::string out = TempPath("throughput.json");
  ASSERT_EQ(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--num-prompts", "2,5", "--input-len", "7",
                             "--output-len", "3", "--threads", "1", "--output-json", out}),
            0);
  const json report = ReadJson(out);
  EXPECT_EQ(report["command"], "throughput");
  EXPECT_EQ(report["config"]["num_prompts"], json({2, 5}));
  ASSERT_EQ(report["results"].size(), 2u);
  for (const json& r : report["results"]) {
    const int64_t n = r["num_prompts"];
    EXPECT_EQ(r["prompt_tokens"], 7 * n);
    EXPECT_EQ(r["output_tokens"], 3 * n);
    const double elapsed = r["elapsed_s"];
    ASSERT_GT(elapsed, 0);
    EXPECT_NEAR(r["requests_per_s"].get<double>(), n / elapsed, 1e-9);
    EXPECT_NEAR(r["total_tokens_per_s"].get<double>(), 10.0 * n / elapsed, 1e-9);
    EXPECT_NEAR(r["output_tokens_per_s"].get<double>(), 3.0 * n / elapsed, 1e-9);
    // One prefill step gives every request its first token; the other two are decode
    // steps of the whole batch.
    const json& decode = r["decode_at_full_batch"];
    ASSERT_TRUE(decode.is_object()) << r.dump();
    EXPECT_EQ(decode["batch"], n);
    EXPECT_EQ(decode["steps"], 2);
    EXPECT_NEAR(decode["tokens_per_s"].get<double>(), 1e3 * n / decode["median_step_ms"].get<double>(), 1e-6);
    ASSERT_EQ(decode["step_ms"].size(), 2u);  // each step, in order; their median is median_step_ms
    EXPECT_NEAR(decode["median_step_ms"].get<double>(),
                (decode["step_ms"][0].get<double>() + decode["step_ms"][1].get<double>()) / 2, 1e-9);
    // The step's phases (each median on its own) are parts of it.
    const double phases = decode["median_schedule_ms"].get<double>() + decode["median_execute_ms"].get<double>() +
                          decode["median_outputs_ms"].get<double>();
    EXPECT_GT(decode["median_execute_ms"].get<double>(), 0.0);
    EXPECT_LE(phases, 2.0 * decode["median_step_ms"].get<double>());
    // Which runner paths and kernels the run reached (--print-kernels prints them).
    EXPECT_GT(r["kernels"].value("ModelRunner::ArgmaxOnDevice", 0), 0) << r["kernels"].dump();
  }
}

TEST(BenchThroughputTest, JsonlAndShareGptDatasetsSetPromptsAndOutputLengths) {
  const std::string jsonl = TempPath("prompts.jsonl"), sharegpt = TempPath("sharegpt.json");
  std::ofstream(jsonl) << "{\"prompt_token_ids\": [1, 2, 3], \"output_len\": 2}\n\n"
                       << "{\"prompt\": \"hello there\", \"max_tokens\": 5}\n";
  std::ofstream(sharegpt) << R"([{"conversations": [{"from": "human", "value": "abc"}, {"from": "gpt", "value": "abcd"}]},
                               {"conversations": [{"from": "human", "value": "only one turn"}]},
                               {"id": "no conversations"}])";
  const std::string out = TempPath("dataset.json");
  ASSERT_EQ(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--tokenizer", TokenizerDir(),
                             "--dataset", jsonl, "--num-prompts", "3", "--threads", "1", "--output-json", out}),
            0);
  json r = ReadJson(out)["results"][0];
  const Tokenizer tokenizer = Tokenizer::FromPath(TokenizerDir());
  const int64_t hello = static_cast<int64_t>(tokenizer.Encode("hello there").size());
  EXPECT_EQ(r["prompt_tokens"], 3 + hello + 3);  // the file's two prompts, then the first again
  EXPECT_EQ(r["output_tokens"], 2 + 5 + 2);
  // --output-len replaces each entry's own length.
  ASSERT_EQ(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--tokenizer", TokenizerDir(), "--dataset",
                             jsonl, "--num-prompts", "2", "--output-len", "4", "--threads", "1", "--output-json", out}),
            0);
  EXPECT_EQ(ReadJson(out)["results"][0]["output_tokens"], 8);
  // ShareGPT: entries without two turns are skipped; the reply's token count is the output length.
  ASSERT_EQ(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--tokenizer", TokenizerDir(), "--dataset",
                             sharegpt, "--num-prompts", "2", "--threads", "1", "--output-json", out}),
            0);
  r = ReadJson(out)["results"][0];
  EXPECT_EQ(r["prompt_tokens"], 2 * static_cast<int64_t>(tokenizer.Encode("abc").size()));
  EXPECT_EQ(r["output_tokens"], 2 * static_cast<int64_t>(tokenizer.Encode("abcd").size()));
}

// --structured-outputs constrains every request: with a choice of two one-token
// answers each request stops after at most a few tokens (its grammar completes), not
// at --output-len; a value that is not a constraint is refused naming it.
TEST(BenchThroughputTest, StructuredOutputsConstrainEveryRequest) {
  const std::string out = TempPath("structured.json");
  ASSERT_EQ(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--tokenizer", TokenizerDir(), "--num-prompts",
                             "3", "--input-len", "5", "--output-len", "40", "--threads", "1", "--structured-outputs",
                             R"({"choice": ["a", "b"]})", "--output-json", out}),
            0);
  const json report = ReadJson(out);
  EXPECT_EQ(report["config"]["structured_outputs"], json({{"choice", {"a", "b"}}}));
  const int64_t output_tokens = report["results"][0]["output_tokens"];
  EXPECT_GE(output_tokens, 3);
  EXPECT_LE(output_tokens, 3 * 2);  // "a" or "b": one token each, maybe EOS-free completion after
  for (const char* bad : {R"({"regex": 3})", R"({"json_schema": {}})", R"({"json": {}, "regex": "a"})", "not json"}) {
    try {
      RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--tokenizer", TokenizerDir(), "--num-prompts", "1",
                       "--structured-outputs", bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const CliError& e) {
      EXPECT_NE(std::string(e.what()).find("--structured-outputs"), std::string::npos) << e.what();
    }
  }
}

TEST(BenchThroughputTest, BadDatasetsNameTheFileAndLine) {
  const std::string bad = TempPath("bad.jsonl");
  std::ofstream(bad) << "{\"prompt_token_ids\": [1, 2]}\n{\"output_len\": 3}\n";
  try {
    RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--dataset", bad, "--num-prompts", "1"});
    ADD_FAILURE() << "a line without a prompt was accepted";
  } catch (const CliError& e) {
    EXPECT_NE(std::string(e.what()).find(bad + ":2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--dataset", bad + ".missing"}), CliError);
  // Text prompts need a tokenizer; the model folder has none.
  const std::string text = TempPath("text.jsonl");
  std::ofstream(text) << "{\"prompt\": \"hi\"}\n";
  EXPECT_THROW(RunBenchCommand({"throughput", "--model", ModelDir("qwen3"), "--dataset", text, "--num-prompts", "1"}),
               CliError);
}

TEST(BenchReportTest, PercentilesInterpolateAsNumpy) {
  const bench::Summary s = bench::Summarize({4, 1, 3, 2});
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.7);   // numpy.percentile([1, 2, 3, 4], 90)
  EXPECT_DOUBLE_EQ(s.p99, 3.97);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_EQ(bench::Summarize({}).count, 0);
  EXPECT_EQ(bench::ParseSweep("1,16,64", "batch-size"), (std::vector<int64_t>{1, 16, 64}));
  EXPECT_EQ(bench::ParseSweep("0", "max-concurrency", 0), (std::vector<int64_t>{0}));
  EXPECT_THROW(bench::ParseSweep("", "batch-size"), CliError);
  EXPECT_THROW(bench::ParseSweep("1,,2", "batch-size"), CliError);
  EXPECT_THROW(bench::ParseSweep("2.5", "batch-size"), CliError);
}

// Decode bytes of the MoE model: all weights but the embedding table and the
// experts no token is routed to (the expected share under uniform routing).
TEST(BenchRooflineTest, DecodeBytesCountRoutedExpertsAndGatheredEmbeddingRows) {
  EngineConfig config;
  config.model = ModelDir("qwen35_moe");
  config.num_threads = 1;
  config.max_model_len = 64;
  config.max_num_seqs = 4;
  LLMEngine engine(config);
  const ModelConfig& c = engine.model_config();
  ASSERT_TRUE(c.is_moe());
  double experts = 0, embedding = 0, all = 0;
  for (const auto& [name, t] : engine.loaded_model().weights.all()) {
    const auto bytes = static_cast<double>(vt::BytesFor(t.dtype(), t.numel()));
    all += bytes;
    if (name.find("mlp.experts.") != std::string::npos) experts += bytes;
    if (name == "embed_tokens.weight") embedding = bytes;
  }
  ASSERT_GT(experts, 0);
  const double k = static_cast<double>(c.num_experts_per_tok), e = static_cast<double>(c.num_experts);
  for (int64_t batch : {1, 3}) {
    const bench::StepBytes b = bench::DecodeStepBytes(engine, batch, 10);
    const double routed = experts * (1 - std::pow(1 - k / e, static_cast<double>(batch)));
    const double rows = c.tie_word_embeddings ? embedding : embedding / c.vocab_size * batch;
    EXPECT_NEAR(b.weights, all - experts - embedding + routed + rows, 1e-6 * all) << batch;
    EXPECT_DOUBLE_EQ(b.kv_cache, batch * c.num_layers_of(LayerType::kFullAttention) * 10.0 * c.num_key_value_heads *
                                     c.head_dim * 2 * 4);
    EXPECT_GT(b.state, 0);
  }
}

}  // namespace
}  // namespace vllm
