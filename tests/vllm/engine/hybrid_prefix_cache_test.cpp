// Prefix caching for hybrid models (Gated DeltaNet + attention): the random-weight
// Qwen3.5 reference models (dense and MoE) give the same outputs with the cache as
// without it, and a hit skips the computation of the tokens it covers.
//
// Tolerances, as the Qwen3 prefix-cache tests (hf_reference_test.cpp): greedy ids
// identical, and decode logits within max|got - ref| / max|ref| <= 1e-4 per row. A
// request on a hit computes its chunks from other start positions (and from a state
// that decode steps, not the chunked kernel, may have computed), so the summation
// order differs; where it does not (SharedSystemPrompt..., whose chunks start at the
// same positions with and without the cache) the logits are bitwise equal on the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "vllm/engine/llm_engine.h"
#include "vllm/testing/engine_harness.h"
#include "vllm/testing/model_reference.h"

namespace vllm {
namespace {

using testing::GenerateResult;
using testing::GreedySession;
using testing::HarnessOptions;

constexpr double kDecodeRelTol = 1e-4;
using Tokens = std::vector<int32_t>;

struct Loaded {
  LoadedModel loaded;
  std::unique_ptr<Model> model;
};

const Loaded& ModelOf(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[name];
  if (!slot) {
    slot = std::make_unique<Loaded>();
    slot->loaded = LoadModel(testing::LoadReference(name).hf_folder);
    slot->model = testing::CreateModel(slot->loaded, {});
  }
  return *slot;
}

Tokens RandomTokens(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab) - 1);
  Tokens t(n);
  for (int32_t& x : t) x = id(gen);
  return t;
}

Tokens Concat(std::initializer_list<Tokens> parts) {
  Tokens all;
  for (const Tokens& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// Pages of 4 tokens, a checkpoint every 16, and room for every snapshot wanted.
HarnessOptions CachedOptions(bool enable) {
  return {.block_size = 4,
          .max_num_batched_tokens = 64,
          .max_num_seqs = 4,
          .prompt_logits = false,
          .enable_prefix_caching = enable,
          .num_state_snapshots = enable ? 64 : 0,
          .state_checkpoint_interval = 16};
}

// The sizes of the chunks that computed the prompt of a request whose first
// `num_hit` tokens were prefix-cache hits.
std::vector<int64_t> ChunksAfterHit(const testing::RequestTrace& trace, int64_t num_hit) {
  std::vector<int64_t> sizes;
  for (int64_t size : trace.chunk_sizes) {
    if (num_hit >= static_cast<int64_t>(trace.prompt_ids.size())) break;
    sizes.push_back(size);
    num_hit += size;
  }
  return sizes;
}

void ExpectSameOutputs(const GenerateResult& cached, const GenerateResult& plain) {
  const testing::RunErrors e = testing::CompareRuns(cached, plain);
  EXPECT_EQ(e.greedy_mismatches, 0);
  EXPECT_LE(e.decode.max_rel, kDecodeRelTol) << e.decode.ToString();
}

class HybridPrefixCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Model& model() const { return *ModelOf(GetParam()).model; }
  Tokens Random(int64_t n, uint32_t seed) const { return RandomTokens(n, seed, model().vocab_size()); }
};

// Turn 2 of a chat resends turn 1's prompt (37 tokens, ending mid-block) and answer
// (12 tokens) plus a new message (9). Turn 1 computed 48 tokens (its last answer
// token is never fed), and its decode checkpoint at 48 lets turn 2 start there: it
// computes 10 prompt tokens and 11 decodes instead of 58 and 11.
// --state-checkpoint-interval 0 (the default): 512 on the CPU, the step's token
// budget on a GPU (at least 512), rounded up to a block multiple; a given one stays.
TEST(CheckpointIntervalTest, DefaultIs512OnTheCpuAndTheTokenBudgetOnAGpu) {
  EngineConfig c;
  EXPECT_EQ(ResolveCheckpointInterval(c), 512);
  c.block_size = 48;
  EXPECT_EQ(ResolveCheckpointInterval(c), 528);
  c.device = vt::ParseDevice("cuda:0");
  c.max_num_batched_tokens = 1000;
  EXPECT_EQ(ResolveCheckpointInterval(c), 960);
  c.block_size = 16;
  c.max_num_batched_tokens = 8192;
  EXPECT_EQ(ResolveCheckpointInterval(c), 8192);
  c.max_num_batched_tokens = 300;
  EXPECT_EQ(ResolveCheckpointInterval(c), 512);
  c.device = vt::ParseDevice("rocm:0");
  c.max_num_batched_tokens = 2048;
  EXPECT_EQ(ResolveCheckpointInterval(c), 2048);
  c.state_checkpoint_interval = 96;
  EXPECT_EQ(ResolveCheckpointInterval(c), 96);
}

TEST_P(HybridPrefixCacheTest, MultiTurnChatReusesTheFirstTurnsPromptAndAnswer) {
  const Tokens turn1 = Random(37, 1), message = Random(9, 2);
  std::vector<GenerateResult> runs[2];
  for (bool enable : {false, true}) {
    GreedySession session(model(), CachedOptions(enable), 128);
    const GenerateResult first = session.Run({turn1}, 12);
    const GenerateResult second = session.Run({Concat({turn1, first.requests[0].output_ids, message})}, 12);
    runs[enable] = {first, second};
  }
  ExpectSameOutputs(runs[1][0], runs[0][0]);
  ExpectSameOutputs(runs[1][1], runs[0][1]);
  EXPECT_EQ(runs[1][0].stats.num_tokens_computed, 37 + 11);
  EXPECT_EQ(runs[1][1].stats.prefix_cache_hits, 48);
  EXPECT_EQ(runs[1][1].stats.num_tokens_computed, 10 + 11) << "the hit skipped 48 tokens";
  EXPECT_EQ(runs[0][1].stats.num_tokens_computed, 58 + 11);
  EXPECT_EQ(runs[1][0].requests[0].PromptChunkSizes(), (std::vector<int64_t>{16, 16, 4, 1}))
      << "chunks end at the checkpoints 16, 32 and the prompt's last block boundary 36";
  EXPECT_EQ(ChunksAfterHit(runs[1][1].requests[0], 48), (std::vector<int64_t>{8, 2}));
}

// Two 49-token requests share a 32-token system prompt; the second arrives after the
// first finished and starts on the checkpoint at 32. Every chunk (budget 16) starts
// and ends at the same positions with and without the cache (checkpoints 16, 32 and
// 48), so the logits are bitwise equal.
TEST_P(HybridPrefixCacheTest, SharedSystemPromptAcrossRequestsIsBitwiseEqual) {
  const Tokens system = Random(32, 3);
  const std::vector<Tokens> prompts = {Concat({system, Random(17, 4)}), Concat({system, Random(17, 5)})};
  GenerateResult runs[2];
  for (bool enable : {false, true}) {
    HarnessOptions options = CachedOptions(enable);
    options.max_num_batched_tokens = 16;
    options.arrival_steps = {0, 12};
    GreedySession session(model(), options, 128);
    runs[enable] = session.Run(prompts, 8);
  }
  ExpectSameOutputs(runs[1], runs[0]);
  EXPECT_EQ(runs[1].stats.prefix_cache_hits, 32);
  EXPECT_EQ(ChunksAfterHit(runs[1].requests[1], 32), (std::vector<int64_t>{16, 1}));
  for (int r = 0; r < 2; ++r) {
    const std::vector<float>& a = runs[1].requests[r].decode_logits;
    const std::vector<float>& b = runs[0].requests[r].decode_logits;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "request " << r;
  }
}

// A prompt ending mid-block, sent again, starts on the checkpoint of its last block
// boundary (36 of 37 tokens); a prefix of it that stops before that boundary finds
// only the interval checkpoint at 16.
TEST_P(HybridPrefixCacheTest, PromptsEndingMidBlockHitTheirLastBoundary) {
  const Tokens prompt = Random(37, 6);
  const Tokens shorter = Concat({Tokens(prompt.begin(), prompt.begin() + 30), Random(5, 7)});
  GenerateResult runs[2];
  for (bool enable : {false, true}) {
    HarnessOptions options = CachedOptions(enable);
    options.arrival_steps = {0, 20, 40};
    GreedySession session(model(), options, 128);
    runs[enable] = session.Run({prompt, prompt, shorter}, 6);
  }
  ExpectSameOutputs(runs[1], runs[0]);
  EXPECT_EQ(ChunksAfterHit(runs[1].requests[1], 36), (std::vector<int64_t>{1}));
  EXPECT_EQ(ChunksAfterHit(runs[1].requests[2], 16), (std::vector<int64_t>{16, 3}));
  EXPECT_EQ(runs[1].stats.prefix_cache_hits, 36 + 16);
}

// Two snapshots for three prompts sent twice: snapshots are evicted (least recently
// used first) and reused while requests run; outputs stay those without the cache,
// and fewer tokens hit than with room for every snapshot.
TEST_P(HybridPrefixCacheTest, SnapshotEvictionUnderATinyBudget) {
  std::vector<Tokens> prompts;
  for (uint32_t i = 0; i < 3; ++i) prompts.push_back(Random(40, 10 + i));
  for (uint32_t i = 0; i < 3; ++i) prompts.push_back(prompts[i]);
  HarnessOptions plain = CachedOptions(false), tiny = CachedOptions(true), roomy = CachedOptions(true);
  tiny.num_state_snapshots = 2;
  for (HarnessOptions* o : {&plain, &tiny, &roomy}) o->arrival_steps = {0, 20, 40, 60, 80, 100};
  const GenerateResult reference = GreedySession(model(), plain, 128).Run(prompts, 6);
  GreedySession tiny_session(model(), tiny, 128);
  const GenerateResult evicting = tiny_session.Run(prompts, 6);
  const GenerateResult kept = GreedySession(model(), roomy, 128).Run(prompts, 6);
  ExpectSameOutputs(evicting, reference);
  ExpectSameOutputs(kept, reference);
  EXPECT_EQ(kept.stats.prefix_cache_hits, 3 * 36);
  EXPECT_LT(evicting.stats.prefix_cache_hits, kept.stats.prefix_cache_hits);
  EXPECT_LE(tiny_session.scheduler().kv_cache_manager().num_state_snapshots_used(), 2);
}

// Too few pages for four requests sharing a prefix: requests are preempted and
// recomputed (from their own checkpoints when those survive), with the outputs of a
// run without the cache.
TEST_P(HybridPrefixCacheTest, PreemptedRequestsResumeWithTheSameOutputs) {
  const Tokens shared = Random(24, 20);
  std::vector<Tokens> prompts;
  for (uint32_t i = 0; i < 4; ++i) prompts.push_back(Concat({shared, Random(9 + i, 21 + i)}));
  GenerateResult runs[2];
  for (bool enable : {false, true}) {
    HarnessOptions options = CachedOptions(enable);
    options.max_num_batched_tokens = 24;
    options.num_blocks = 30;
    options.arrival_steps = {0, 0, 3, 3};
    GreedySession session(model(), options, 128);
    runs[enable] = session.Run(prompts, 20);
  }
  ExpectSameOutputs(runs[1], runs[0]);
  EXPECT_GT(runs[1].stats.num_preemptions, 0);
  EXPECT_GT(runs[1].stats.prefix_cache_hits, 0);
}

// Through LLMEngine with its defaults (pages of 16, checkpoints every 512): turn 1
// (40 tokens) checkpoints the state at 32, the last boundary before its end; turn 2
// starts there, and the engine's counters say so (vllm:prefix_cache_* come from them).
TEST_P(HybridPrefixCacheTest, TheEngineCountsTheHitsAndTheTokensItComputed) {
  const Tokens turn1 = Random(40, 30), message = Random(5, 31);
  std::vector<int32_t> answers[2][2];
  for (bool enable : {false, true}) {
    EngineConfig config;
    config.model = testing::LoadReference(GetParam()).hf_folder;
    config.enable_prefix_caching = enable;
    config.cpu_kv_cache_bytes = 64 << 20;
    config.num_threads = 1;
    config.on_log = [](const std::string&) {};
    LLMEngine engine(config);
    EXPECT_EQ(engine.prefix_caching_enabled(), enable);
    SamplingParams params;
    params.temperature = 0;
    params.max_tokens = 8;
    params.ignore_eos = true;
    Tokens prompt = turn1;
    for (int turn = 0; turn < 2; ++turn) {
      const int64_t computed = engine.stats().num_tokens_computed;
      engine.AddRequest("turn" + std::to_string(turn), prompt, params);
      while (engine.HasUnfinishedRequests()) {
        for (const RequestOutput& out : engine.Step()) {
          if (out.finished) answers[enable][turn] = out.token_ids;
        }
      }
      const int64_t expected = turn == 0 || !enable ? static_cast<int64_t>(prompt.size()) + 7 : 21 + 7;
      EXPECT_EQ(engine.stats().num_tokens_computed - computed, expected) << "turn " << turn;
      prompt = Concat({prompt, answers[enable][turn], message});
    }
    EXPECT_EQ(engine.stats().prefix_cache_hits, enable ? 32 : 0);
  }
  EXPECT_EQ(answers[1][0], answers[0][0]);
  EXPECT_EQ(answers[1][1], answers[0][1]);
}

INSTANTIATE_TEST_SUITE_P(Models, HybridPrefixCacheTest, ::testing::Values("qwen35_dense_untied", "qwen35_moe"),
                         [](const auto& info) { return testing::VariantTestName(info.param); });

}  // namespace
}  // namespace vllm
