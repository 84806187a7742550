// LLMEngine end to end on the HF reference models (tests/data/models): batching,
// chunked prefill and preemption leave greedy outputs unchanged; prompt logprobs
// reproduce HF's logits; seeds reproduce; stop strings and max_tokens end requests
// with the right finish_reason; bad requests are rejected without harming others.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "vllm/engine/llm_engine.h"
#include "vllm/testing/engine_requests.h"
#include "vllm/model_loader/safetensors.h"

namespace vllm {
namespace {

namespace fs = std::filesystem;

std::string ModelDir(const std::string& name) { return std::string(VT_TEST_DATA_DIR) + "/models/" + name; }

struct Reference {
  std::vector<std::vector<int32_t>> prompts, greedy;
  std::vector<vt::Tensor> logits;  // [len, vocab] per prompt
};

Reference LoadReference(const std::string& name) {
  SafetensorsFile file = SafetensorsFile::Open(ModelDir(name) + "/reference.safetensors");
  Reference ref;
  for (int i = 0; file.FindTensor("prompt_ids." + std::to_string(i)); ++i) {
    auto ids = [&](const std::string& key) {
      std::vector<int64_t> v = file.Tensor(*file.FindTensor(key)).ToIntVector();
      return std::vector<int32_t>(v.begin(), v.end());
    };
    ref.prompts.push_back(ids("prompt_ids." + std::to_string(i)));
    ref.greedy.push_back(ids("greedy_ids." + std::to_string(i)));
    ref.logits.push_back(file.Tensor(*file.FindTensor("logits." + std::to_string(i))));
  }
  return ref;
}

EngineConfig Config(const std::string& model_dir) {
  EngineConfig c;
  c.model = model_dir;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 256;
  c.block_size = 4;
  c.num_gpu_blocks_override = 512;
  c.num_threads = 2;
  return c;
}

using testing::GreedyParams;

// Runs every request to completion; returns the finished outputs by id.
std::map<std::string, RequestOutput> RunAll(LLMEngine& engine) { return testing::RunToCompletion(engine); }

class EngineBatchingTest : public ::testing::TestWithParam<std::string> {};

// Each request alone, then all together with a tiny token budget (chunked
// prefill) and a KV pool so small that requests must be preempted.
TEST_P(EngineBatchingTest, GreedyOutputsDoNotDependOnBatchingChunkingOrPreemption) {
  const Reference ref = LoadReference(GetParam());
  const std::string hf = ModelDir(GetParam()) + "/hf";
  const int64_t max_tokens = 12;
  std::vector<std::vector<int32_t>> alone;
  {
    LLMEngine engine(Config(hf));
    for (size_t i = 0; i < ref.prompts.size(); ++i) {
      engine.AddRequest("r", ref.prompts[i], GreedyParams(max_tokens));
      alone.push_back(RunAll(engine).at("r").token_ids);
      // HF's greedy continuation of the same prompt.
      std::vector<int32_t> hf_prefix(ref.greedy[i].begin(), ref.greedy[i].begin() + max_tokens);
      EXPECT_EQ(alone.back(), hf_prefix) << "prompt " << i;
    }
  }
  EngineConfig tight = Config(hf);
  tight.max_num_batched_tokens = 13;
  tight.max_model_len = 120;
  // 100 + 12 tokens need 28 blocks of 4: 34 blocks cannot hold all five at once.
  tight.num_gpu_blocks_override = 34;
  LLMEngine engine(tight);
  for (size_t i = 0; i < ref.prompts.size(); ++i) {
    engine.AddRequest("r" + std::to_string(i), ref.prompts[i], GreedyParams(max_tokens));
  }
  auto together = RunAll(engine);
  EXPECT_GT(engine.stats().num_preemptions, 0) << "the pool was meant to force preemption";
  for (size_t i = 0; i < ref.prompts.size(); ++i) {
    EXPECT_EQ(together.at("r" + std::to_string(i)).token_ids, alone[i]) << "prompt " << i;
    EXPECT_EQ(together.at("r" + std::to_string(i)).finish_reason, "length");
  }
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0) << "pages leaked";
}

INSTANTIATE_TEST_SUITE_P(Models, EngineBatchingTest, ::testing::Values("qwen35_dense_untied", "qwen3"));

TEST(EngineTest, PromptLogprobsOfTheWholeVocabularyReproduceHfLogits) {
  const Reference ref = LoadReference("qwen35_dense_untied");
  LLMEngine engine(Config(ModelDir("qwen35_dense_untied") + "/hf"));
  const size_t p = 2;  // a 17-token prompt
  SamplingParams params = GreedyParams(1);
  params.prompt_logprobs = -1;
  engine.AddRequest("r", ref.prompts[p], params);
  RequestOutput out = RunAll(engine).at("r");
  const vt::Tensor& logits = ref.logits[p];
  const int64_t vocab = logits.size(1);
  ASSERT_EQ(out.prompt_logprobs.size(), ref.prompts[p].size());
  EXPECT_FALSE(out.prompt_logprobs[0].has_value());
  std::vector<float> all = logits.ToFloatVector();
  double worst = 0;
  for (size_t pos = 1; pos < ref.prompts[p].size(); ++pos) {
    ASSERT_TRUE(out.prompt_logprobs[pos].has_value());
    const float* row = all.data() + (pos - 1) * vocab;  // logits at pos - 1 score token pos
    double max = row[0], sum = 0;
    for (int64_t v = 0; v < vocab; ++v) max = std::max<double>(max, row[v]);
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
    ASSERT_EQ(static_cast<int64_t>(out.prompt_logprobs[pos]->size()), vocab);
    for (const auto& [id, lp] : *out.prompt_logprobs[pos]) {
      worst = std::max(worst, std::fabs(lp - (row[id] - max - std::log(sum))));
    }
  }
  // HF's f32 logits vs ours: the models issue holds logits to 1e-4 relative.
  EXPECT_LT(worst, 1e-3);
}

TEST(EngineTest, SeededSamplingIsReproducible) {
  const Reference ref = LoadReference("qwen3");
  auto run = [&](uint64_t seed, uint64_t engine_seed) {
    EngineConfig c = Config(ModelDir("qwen3") + "/hf");
    c.seed = engine_seed;
    LLMEngine engine(c);
    SamplingParams p;
    p.max_tokens = 16;
    p.seed = seed;
    p.ignore_eos = true;
    engine.AddRequest("a", ref.prompts[1], p);
    SamplingParams noise = p;
    noise.seed.reset();
    engine.AddRequest("noise", ref.prompts[2], noise);
    return RunAll(engine).at("a").token_ids;
  };
  EXPECT_EQ(run(42, 1), run(42, 2));
  EXPECT_NE(run(42, 1), run(43, 1));
}

// A byte-level tokenizer covering a model's 320 ids: 256 byte symbols (GPT-2's
// byte-to-unicode map) and 64 merged letter pairs.
void WriteSyntheticTokenizer(const fs::path& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const int cp = printable ? b : next_extra++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 = std::string(1, static_cast<char>(cp));
    } else {
      utf8 = {static_cast<char>(0xc0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3f))};
    }
    vocab[utf8] = b;
  }
  nlohmann::json merges = nlohmann::json::array();
  int id = 256;
  for (char a = 'a'; a < 'i'; ++a) {
    for (char c = 'a'; c < 'i'; ++c) {
      vocab[std::string{a, c}] = id++;
      merges.push_back(std::string{a} + " " + std::string{c});
    }
  }
  nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                               {"use_regex", false}};
  nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+|\\p{N}|\\s+|[^\\s\\p{L}\\p{N}]+"}}},
           {"behavior", "Isolated"}, {"invert", false}},
          byte_level}}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}}};
  std::ofstream(dir / "tokenizer.json") << tok.dump();
}

// The reference model plus a synthetic tokenizer, in a temporary folder.
fs::path ModelWithTokenizer(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("vllm_engine_test_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(ModelDir(name) + "/hf")) {
    fs::path target = dir / entry.path().filename();
    if (!fs::exists(target)) fs::create_symlink(fs::absolute(entry.path()), target);
  }
  WriteSyntheticTokenizer(dir);
  return dir;
}

TEST(EngineTest, StopStringsAndMaxTokensSetTheFinishReason) {
  const Reference ref = LoadReference("qwen35_dense_untied");
  fs::path dir = ModelWithTokenizer("qwen35_dense_untied");
  LLMEngine engine(Config(dir.string()));
  ASSERT_TRUE(engine.has_tokenizer());
  SamplingParams p = GreedyParams(20);
  engine.AddRequest("free", ref.prompts[3], p);
  RequestOutput free = RunAll(engine).at("free");
  EXPECT_EQ(free.finish_reason, "length");
  EXPECT_EQ(free.token_ids.size(), 20u);
  ASSERT_GE(free.text.size(), 6u);
  // Stop at a piece of the text the model is known to produce.
  const std::string stop = free.text.substr(free.text.size() / 2, 2);
  const size_t at = free.text.find(stop);
  p.stop = {stop};
  engine.AddRequest("stopped", ref.prompts[3], p);
  RequestOutput stopped = RunAll(engine).at("stopped");
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.stop_reason, stop);
  EXPECT_EQ(stopped.text, free.text.substr(0, at));
  EXPECT_LT(stopped.token_ids.size(), free.token_ids.size());
  fs::remove_all(dir);
}

// One greedy request with logprobs and prompt logprobs run as kCumulative beside
// the same request as `kind`: the cumulative one's final output, and every output of
// the other.
struct KindRun {
  RequestOutput cumulative;
  std::vector<RequestOutput> outputs;
};

KindRun RunBesideCumulative(RequestOutputKind kind) {
  const Reference ref = LoadReference("qwen35_dense_untied");
  fs::path dir = ModelWithTokenizer("qwen35_dense_untied");
  LLMEngine engine(Config(dir.string()));
  SamplingParams p = GreedyParams(12);
  p.logprobs = 2;
  p.prompt_logprobs = 1;
  engine.AddRequest("cumulative", ref.prompts[2], p);
  p.output_kind = kind;
  engine.AddRequest("other", ref.prompts[2], p);
  KindRun run;
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      if (out.request_id == "other") run.outputs.push_back(std::move(out));
      else if (out.finished) run.cumulative = std::move(out);
    }
  }
  fs::remove_all(dir);
  return run;
}

// vLLM's RequestOutputKind.FINAL_ONLY (non-streaming server requests and the
// generate command): the steps before the last report only their new tokens and
// text, so a long generation does not copy its whole history every step; the final
// output is the same as a cumulative request's.
TEST(EngineTest, FinalOnlyRequestsReportDeltasUntilTheCompleteFinalOutput) {
  const KindRun run = RunBesideCumulative(RequestOutputKind::kFinalOnly);
  std::vector<int32_t> streamed_ids;
  std::string streamed_text;
  for (const RequestOutput& out : run.outputs) {
    streamed_ids.insert(streamed_ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
    streamed_text += out.new_text;
    if (!out.finished) {
      EXPECT_TRUE(out.token_ids.empty() && out.text.empty() && out.logprobs.empty() && out.prompt_token_ids.empty() &&
                  out.prompt_logprobs.empty())
          << "an intermediate final-only output carried its history";
    }
  }
  ASSERT_FALSE(run.outputs.empty());
  const RequestOutput& a = run.cumulative;
  const RequestOutput& b = run.outputs.back();
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.token_ids, a.token_ids);
  EXPECT_EQ(b.text, a.text);
  EXPECT_EQ(b.prompt_token_ids, a.prompt_token_ids);
  EXPECT_EQ(b.logprobs, a.logprobs);
  EXPECT_EQ(b.prompt_logprobs.size(), a.prompt_logprobs.size());
  EXPECT_EQ(streamed_ids, a.token_ids);
  EXPECT_EQ(streamed_text, a.text);
}

// RequestOutputKind::kDelta (streaming responses): every output holds only what is
// new (tokens, their logprobs, text; the prompt and its logprobs in the first), and
// the deltas put together are a cumulative request's final output.
TEST(EngineTest, DeltaRequestsAddUpToTheCumulativeOutput) {
  const KindRun run = RunBesideCumulative(RequestOutputKind::kDelta);
  ASSERT_GT(run.outputs.size(), 1u);
  RequestOutput sum;
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    const RequestOutput& out = run.outputs[i];
    EXPECT_EQ(out.new_token_ids, out.token_ids);
    EXPECT_EQ(out.new_text, out.text);
    EXPECT_EQ(out.logprobs.size(), out.token_ids.size());
    EXPECT_EQ(out.prompt_token_ids.empty(), i > 0) << "the prompt comes with the first output only";
    sum.prompt_token_ids.insert(sum.prompt_token_ids.end(), out.prompt_token_ids.begin(), out.prompt_token_ids.end());
    sum.prompt_logprobs.insert(sum.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
    sum.token_ids.insert(sum.token_ids.end(), out.token_ids.begin(), out.token_ids.end());
    sum.logprobs.insert(sum.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
    sum.text += out.text;
  }
  const RequestOutput& a = run.cumulative;
  EXPECT_TRUE(run.outputs.back().finished);
  EXPECT_EQ(run.outputs.back().finish_reason, a.finish_reason);
  EXPECT_EQ(sum.prompt_token_ids, a.prompt_token_ids);
  EXPECT_EQ(sum.prompt_logprobs.size(), a.prompt_logprobs.size());
  EXPECT_EQ(sum.token_ids, a.token_ids);
  EXPECT_EQ(sum.logprobs, a.logprobs);
  EXPECT_EQ(sum.text, a.text);
}

// A stop string that straddles two tokens: a stream must not send its first part
// before the second token shows it to be a stop (vLLM holds back the longest stop
// string's length minus one byte until it cannot start a match). The deltas then
// add up to the final text, which ends before the stop string.
TEST(EngineTest, StreamsHoldBackWhatMayStartAStopString) {
  const Reference ref = LoadReference("qwen35_dense_untied");
  fs::path dir = ModelWithTokenizer("qwen35_dense_untied");
  LLMEngine engine(Config(dir.string()));
  SamplingParams p = GreedyParams(20);
  p.output_kind = RequestOutputKind::kDelta;
  engine.AddRequest("free", ref.prompts[3], p);
  std::vector<std::string> pieces;  // the text each step added
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) pieces.push_back(out.new_text);
  }
  // The last byte of one step's text and the first of the next one's.
  size_t k = 1;
  while (k + 1 < pieces.size() && (pieces[k].empty() || pieces[k + 1].empty() ||
                                   static_cast<unsigned char>(pieces[k].back()) >= 0x80 ||
                                   static_cast<unsigned char>(pieces[k + 1][0]) >= 0x80)) {
    ++k;
  }
  ASSERT_LT(k + 1, pieces.size()) << "no two ASCII-bounded pieces to straddle";
  std::string before;
  for (size_t i = 0; i <= k; ++i) before += pieces[i];
  const std::string stop = std::string(1, pieces[k].back()) + pieces[k + 1][0];
  const size_t at = (before + pieces[k + 1]).find(stop);
  p.stop = {stop};
  engine.AddRequest("stopped", ref.prompts[3], p);
  std::string streamed;
  RequestOutput last;
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      streamed += out.text;
      if (out.finished) last = std::move(out);
    }
  }
  EXPECT_EQ(last.finish_reason, "stop");
  EXPECT_EQ(streamed, (before + pieces[k + 1]).substr(0, at)) << "stop '" << stop << "'";
  fs::remove_all(dir);
}

TEST(EngineTest, BadRequestsAreRejectedAndOthersContinue) {
  const Reference ref = LoadReference("qwen3");
  LLMEngine engine(Config(ModelDir("qwen3") + "/hf"));
  engine.AddRequest("good", ref.prompts[1], GreedyParams(4));
  EXPECT_THROW(engine.AddRequest("bad-id", {1, 99999}, GreedyParams(4)), std::invalid_argument);
  EXPECT_THROW(engine.AddRequest("too-long", std::vector<int32_t>(300, 1), GreedyParams(4)), std::invalid_argument);
  SamplingParams bad = GreedyParams(4);
  bad.top_p = 2;
  EXPECT_THROW(engine.AddRequest("bad-param", {1, 2}, bad), std::invalid_argument);
  EXPECT_THROW(engine.AddRequest("good", {1, 2}, GreedyParams(4)), std::invalid_argument);
  SamplingParams stop = GreedyParams(4);
  stop.stop = {"x"};
  EXPECT_THROW(engine.AddRequest("no-tokenizer", {1, 2}, stop), std::invalid_argument);
  auto done = RunAll(engine);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done.at("good").token_ids.size(), 4u);
}

TEST(EngineTest, AbortFreesTheRequest) {
  const Reference ref = LoadReference("qwen3");
  LLMEngine engine(Config(ModelDir("qwen3") + "/hf"));
  engine.AddRequest("a", ref.prompts[4], GreedyParams(50));
  engine.Step();
  engine.AbortRequest("a");
  EXPECT_FALSE(engine.HasUnfinishedRequests());
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
}

}  // namespace
}  // namespace vllm
