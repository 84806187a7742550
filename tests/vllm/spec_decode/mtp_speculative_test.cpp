// MTP speculative decoding end to end (LLMEngine with --speculative-config): greedy
// outputs equal decoding without speculation on the demo model (a trained head:
// drafts often accepted) and on random-weight Qwen3.5 dense and MoE models with
// random heads (drafts mostly rejected: the Gated DeltaNet rollback runs at almost
// every step), alone, batched, chunked and preempted, for k = 1, 2, 3; sampled
// outputs follow the target's distribution; logprobs, stop tokens and the batch-size
// switch; the config's errors.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "vllm/testing/model_fixtures.h"
#include "vllm/engine/llm_engine.h"
#include "vllm/testing/engine_requests.h"

namespace vllm {
namespace {

std::string DemoHf() { return std::string(VLLM_DEMO_MODEL_DIR) + "/hf"; }
std::string ReferenceHf(const std::string& name) { return std::string(VT_TEST_DATA_DIR) + "/models/" + name + "/hf"; }

// A random-weight Qwen3.5 MoE (GDN + attention) with a random one-layer MTP module.
const std::string& MoeWithMtp() {
  static const std::string folder = [] {
    ModelConfig c = testing::MoeConfig(testing::MoeDims{});
    c.mtp_num_hidden_layers = 1;
    return testing::WriteHfFolder(testing::FixtureFolder() + "/moe_with_mtp", c,
                                  {.dtype = vt::DType::kF32, .seed = 5, .with_tokenizer = false});
  }();
  return folder;
}

EngineConfig Config(const std::string& model, std::optional<int64_t> k) {
  EngineConfig c;
  c.model = model;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 256;
  c.block_size = 4;
  c.num_gpu_blocks_override = 512;
  c.num_threads = 2;
  c.on_log = [](const std::string&) {};
  // Drafting at every step (0: never disabled), so that the counts below do not depend
  // on the measured policy.
  if (k) c.speculative_config = SpeculativeConfig{.num_speculative_tokens = *k, .disable_by_batch_size = 0};
  return c;
}

SamplingParams Greedy(int64_t max_tokens) { return testing::GreedyParams(max_tokens); }
std::map<std::string, RequestOutput> RunAll(LLMEngine& engine) { return testing::RunToCompletion(engine); }

std::vector<std::vector<int32_t>> Prompts(const std::string& model, LLMEngine& engine) {
  if (model == DemoHf()) {
    return {engine.Encode("The history of"), engine.Encode("He said that the"),
            engine.Encode("In the morning, the people of the city went to the market and"),
            engine.Encode("It was"), engine.Encode("The committee will meet on Monday to discuss the new")};
  }
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {1, 5, 17, 30, 9}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back(static_cast<int32_t>(rng() % 28));
    prompts.push_back(p);
  }
  return prompts;
}

// Each prompt alone, or all at once, through `config`; outputs by prompt index.
std::vector<std::vector<int32_t>> Generate(const EngineConfig& config, bool together, int64_t max_tokens,
                                           EngineStats* stats = nullptr) {
  LLMEngine engine(config);
  const std::vector<std::vector<int32_t>> prompts = Prompts(config.model, engine);
  std::vector<std::vector<int32_t>> out(prompts.size());
  if (together) {
    for (size_t i = 0; i < prompts.size(); ++i) engine.AddRequest(std::to_string(i), prompts[i], Greedy(max_tokens));
    auto done = RunAll(engine);
    for (size_t i = 0; i < prompts.size(); ++i) out[i] = done.at(std::to_string(i)).token_ids;
  } else {
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine.AddRequest("r", prompts[i], Greedy(max_tokens));
      out[i] = RunAll(engine).at("r").token_ids;
    }
  }
  if (stats) *stats = engine.stats();
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0) << "pages leaked";
  return out;
}

struct Case {
  std::string model;
  int64_t k;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " k=" << c.k; }
};

class MtpGreedyTest : public ::testing::TestWithParam<Case> {};

TEST_P(MtpGreedyTest, OutputsEqualDecodingWithoutSpeculation) {
  const auto [model, k] = GetParam();
  const int64_t max_tokens = 24;
  const std::vector<std::vector<int32_t>> reference = Generate(Config(model, std::nullopt), false, max_tokens);
  EngineStats alone_stats, together_stats, tight_stats;
  EXPECT_EQ(Generate(Config(model, k), false, max_tokens, &alone_stats), reference) << "alone";
  EXPECT_EQ(Generate(Config(model, k), true, max_tokens, &together_stats), reference) << "batched";
  // Chunked prefill and a pool too small for all at once (preemption).
  EngineConfig tight = Config(model, k);
  tight.max_num_batched_tokens = 11;
  tight.num_gpu_blocks_override = 24;
  tight.max_model_len = 80;
  EXPECT_EQ(Generate(tight, true, max_tokens, &tight_stats), reference) << "chunked and preempted";
  EXPECT_GT(tight_stats.num_preemptions, 0) << "the pool was meant to force preemption";
  for (const EngineStats* s : {&alone_stats, &together_stats, &tight_stats}) {
    EXPECT_TRUE(s->speculative_decoding);
    EXPECT_GT(s->spec_decoding.num_drafts, 0);
    EXPECT_LE(s->spec_decoding.num_accepted_tokens, s->spec_decoding.num_draft_tokens);
    const std::vector<int64_t>& per_pos = s->spec_decoding.num_accepted_tokens_per_pos;
    for (size_t i = 1; i < per_pos.size(); ++i) EXPECT_LE(per_pos[i], per_pos[i - 1]) << "position " << i;
  }
  if (model == DemoHf()) {
    // The trained head agrees with the trunk about half the time.
    const SpecDecodingStats& s = alone_stats.spec_decoding;
    EXPECT_GT(s.num_accepted_tokens, s.num_draft_tokens / 5) << s.num_accepted_tokens << " of " << s.num_draft_tokens;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MtpGreedyTest,
                         ::testing::Values(Case{DemoHf(), 1}, Case{DemoHf(), 2}, Case{DemoHf(), 3},
                                           Case{ReferenceHf("qwen35_dense_untied"), 1},
                                           Case{ReferenceHf("qwen35_dense_untied"), 3}, Case{MoeWithMtp(), 2}),
                         [](const auto& info) {
                           const std::string& m = info.param.model;
                           const std::string name = m == DemoHf() ? "demo" : m == MoeWithMtp() ? "moe" : "dense";
                           return name + "_k" + std::to_string(info.param.k);
                         });

// The joint distribution of the first two tokens (the second one verified against
// the first step's draft) with and without speculation, from many seeds: a
// two-sample chi-square over the cells (top_k 3: at most 9).
TEST(MtpSamplingTest, SampledTokensFollowTheTargetDistribution) {
  constexpr int kSamples = 1500;
  auto joint = [&](std::optional<int64_t> k, EngineStats& stats) {
    EngineConfig config = Config(DemoHf(), k);
    config.max_num_seqs = 256;
    config.num_gpu_blocks_override = 2048;
    LLMEngine engine(config);
    const std::vector<int32_t> prompt = engine.Encode("The history of the");
    for (int i = 0; i < kSamples; ++i) {
      SamplingParams p;
      p.temperature = 1.0;
      p.top_k = 3;
      p.max_tokens = 3;  // the second token comes from verifying a draft
      p.ignore_eos = true;
      p.seed = 1000 + i;
      engine.AddRequest(std::to_string(i), prompt, p);
    }
    std::map<std::pair<int32_t, int32_t>, int> counts;
    for (const auto& [id, out] : RunAll(engine)) ++counts[{out.token_ids[0], out.token_ids[1]}];
    stats = engine.stats();
    return counts;
  };
  EngineStats plain_stats, spec_stats;
  auto plain = joint(std::nullopt, plain_stats);
  auto spec = joint(1, spec_stats);
  std::map<std::pair<int32_t, int32_t>, std::pair<int, int>> cells;
  for (const auto& [cell, n] : plain) cells[cell].first = n;
  for (const auto& [cell, n] : spec) cells[cell].second = n;
  double chi2 = 0;
  for (const auto& [cell, n] : cells) {
    chi2 += static_cast<double>(n.first - n.second) * (n.first - n.second) / (n.first + n.second);
  }
  // df <= 8: 31.8 is its 1e-4 quantile.
  EXPECT_LT(chi2, 31.8) << cells.size() << " cells";
  EXPECT_GE(cells.size(), 4u) << "the distribution was meant to spread";
  const SpecDecodingStats& s = spec_stats.spec_decoding;
  EXPECT_EQ(s.num_drafts, kSamples) << "every request verifies its second token";
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens) << "some drafts must be rejected";
}

TEST(MtpSpeculativeTest, LogprobsAndStopTokensAreThoseWithoutSpeculation) {
  auto run = [](std::optional<int64_t> k, const SamplingParams& params) {
    LLMEngine engine(Config(DemoHf(), k));
    engine.AddRequest("r", engine.Encode("In the morning, the people of the city"), params);
    return RunAll(engine).at("r");
  };
  SamplingParams p = Greedy(20);
  p.logprobs = 2;
  const RequestOutput plain = run(std::nullopt, p);
  // A stop token inside what a step accepts ends the request there.
  p.stop_token_ids = {plain.token_ids[9]};
  const RequestOutput plain_stopped = run(std::nullopt, p);
  for (int64_t k : {1, 3}) {
    const RequestOutput stopped = run(k, p);
    EXPECT_EQ(stopped.token_ids, plain_stopped.token_ids) << "k " << k;
    EXPECT_EQ(stopped.finish_reason, "stop");
    ASSERT_EQ(stopped.logprobs.size(), stopped.token_ids.size());
    for (size_t i = 0; i < stopped.logprobs.size(); ++i) {
      ASSERT_EQ(stopped.logprobs[i].size(), plain_stopped.logprobs[i].size()) << "token " << i;
      for (size_t j = 0; j < stopped.logprobs[i].size(); ++j) {
        EXPECT_EQ(stopped.logprobs[i][j].first, plain_stopped.logprobs[i][j].first);
        EXPECT_NEAR(stopped.logprobs[i][j].second, plain_stopped.logprobs[i][j].second, 1e-4);
      }
    }
  }
}

TEST(MtpSpeculativeTest, NoDraftsWhileMoreRequestsRunThanDisableByBatchSize) {
  EngineConfig config = Config(DemoHf(), 2);
  config.speculative_config->disable_by_batch_size = 1;
  EngineStats limited, unlimited;
  const auto reference = Generate(Config(DemoHf(), std::nullopt), true, 16);
  EXPECT_EQ(Generate(config, true, 16, &limited), reference);
  Generate(Config(DemoHf(), 2), true, 16, &unlimited);
  // Five requests run together until the shorter ones finish: drafting only at the end.
  EXPECT_LT(limited.spec_decoding.num_drafts, unlimited.spec_decoding.num_drafts / 2);
}

// The measured policy (the default) changes when drafts are made, never the tokens.
TEST(MtpSpeculativeTest, TheMeasuredPolicyLeavesGreedyOutputsUnchanged) {
  EngineConfig config = Config(DemoHf(), 2);
  config.speculative_config->disable_by_batch_size.reset();
  EngineStats stats;
  EXPECT_EQ(Generate(config, true, 40, &stats), Generate(Config(DemoHf(), std::nullopt), true, 40));
  EXPECT_GT(stats.spec_decoding.num_drafts, 0) << "the policy starts by drafting";
}

TEST(SpeculativeConfigTest, ParsesVllmsJsonAndNamesWhatIsWrong) {
  const SpeculativeConfig c = ParseSpeculativeConfig(R"({"method": "mtp", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.num_speculative_tokens, 3);
  EXPECT_FALSE(c.disable_by_batch_size.has_value()) << "unset: the measured policy";
  EXPECT_EQ(ParseSpeculativeConfig(R"({"method":"mtp","num_speculative_tokens":1,"disable_by_batch_size":8})")
                .disable_by_batch_size,
            8);
  auto error = [](const std::string& json) {
    try {
      ParseSpeculativeConfig(json);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(R"({"method": "eagle", "num_speculative_tokens": 1})").find("eagle"), std::string::npos);
  EXPECT_NE(error(R"({"method": "mtp", "num_speculative_tokens": 0})").find("num_speculative_tokens"),
            std::string::npos);
  EXPECT_NE(error(R"({"method": "mtp", "num_speculative_tokens": 1, "model": "x"})").find("'model'"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_speculative_tokens": 1})").find("method"), std::string::npos);
  EXPECT_NE(error("[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(error("{").find("JSON object"), std::string::npos);
}

TEST(SpeculativeConfigTest, AModelWithoutAnMtpModuleIsRefusedNamingIt) {
  const std::string model = ReferenceHf("qwen35_moe");
  try {
    LLMEngine engine(Config(model, 1));
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("mtp_num_hidden_layers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vllm
