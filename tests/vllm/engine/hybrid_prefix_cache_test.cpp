// Prefix caching for hybrid models (Gated DeltaNet + attention): the random-weight
// Qwen3.5 reference models (dense and MoE) give the same outputs with the cache as
// without it, and a hit skips the computation of the tokens it covers. Shared
// prefixes shorter than one checkpoint interval, exactly at one, between two and
// with more checkpoints than the snapshot pool holds; prompt logprobs, preemption
// and aborts in between; every session ends holding no pages, state slots or
// snapshots beyond cached blocks (ExpectNothingHeld).
//
// Tolerances, as the Qwen3 prefix-cache tests (hf_reference_test.cpp): greedy ids
// identical, and decode and prompt logits within max|got - ref| / max|ref| <= 1e-4 per row. A
// request on a hit computes its chunks from other start positions (and from a state
// that decode steps, not the chunked kernel, may have computed), so the summation
// order differs; where it does not (SharedSystemPrompt..., whose chunks start at the
// same positions with and without the cache) the logits are bitwise equal on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
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
constexpr double kPromptRelTol = 1e-4;  // hf_reference_test.cpp's
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

// After a session's requests have ended, nothing is held: every page is free (cached
// ones sit in the free queue, evictable), every state slot is back, and every valid
// snapshot is keyed by a cached block (so it goes stale, and is reused first, once
// that block is evicted).
void ExpectNothingHeld(const GreedySession& session) {
  const KVCacheManager& kv = session.scheduler().kv_cache_manager();
  const BlockPool& pool = kv.block_pool();
  EXPECT_FALSE(session.scheduler().has_unfinished_requests());
  EXPECT_EQ(kv.num_requests(), 0) << "requests still holding block tables";
  EXPECT_EQ(kv.get_num_free_blocks(), pool.num_blocks() - 1) << "pages leaked (all but the null block are free)";
  EXPECT_EQ(kv.num_free_state_slots(), kv.config().num_state_slots) << "state slots leaked";
  int32_t num_cached = 0;
  for (int32_t id = 1; id < pool.num_blocks(); ++id) num_cached += pool.block(id).block_hash.has_value();
  EXPECT_LE(kv.num_state_snapshots_used(), num_cached);
  EXPECT_LE(kv.num_state_snapshots_used(), kv.config().num_state_snapshots);
}

// The runs' requests `which`, for comparing a subset.
GenerateResult Select(const GenerateResult& run, const std::vector<size_t>& which) {
  GenerateResult out;
  out.stats = run.stats;
  for (size_t i : which) out.requests.push_back(run.requests.at(i));
  return out;
}

class HybridPrefixCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Model& model() const { return *ModelOf(GetParam()).model; }
  Tokens Random(int64_t n, uint32_t seed) const { return RandomTokens(n, seed, model().vocab_size()); }
};

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

// Turn 2 of a chat resends turn 1's prompt (37 tokens, ending mid-block) and answer
// (12 tokens) plus a new message (9). Turn 1 computed 48 tokens (its last answer
// token is never fed), and its decode checkpoint at 48 lets turn 2 start there: it
// computes 10 prompt tokens and 11 decodes instead of 58 and 11.
TEST_P(HybridPrefixCacheTest, MultiTurnChatReusesTheFirstTurnsPromptAndAnswer) {
  const Tokens turn1 = Random(37, 1), message = Random(9, 2);
  std::vector<GenerateResult> runs[2];
  for (bool enable : {false, true}) {
    GreedySession session(model(), CachedOptions(enable), 128);
    const GenerateResult first = session.Run({turn1}, 12);
    const GenerateResult second = session.Run({Concat({turn1, first.requests[0].output_ids, message})}, 12);
    runs[enable] = {first, second};
    ExpectNothingHeld(session);
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
    ExpectNothingHeld(session);
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
    ExpectNothingHeld(session);
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
  ExpectNothingHeld(tiny_session);
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
    ExpectNothingHeld(session);
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

// Prompt logprobs with the cache equal those without it. A request asking for them
// skips the lookup (as in vLLM: its every prompt position must be computed) but
// still checkpoints and caches what it computes; a later plain request hits. Prompts:
// 0: a 40-token prompt; 1: the same, with prompt logprobs (no hit); 2: its first 32
// tokens + 9 others, with prompt logprobs (no hit); 3: prompt 0 + 6 tokens, plain: it
// hits prompt 0's checkpoint at its end (40, a block boundary).
TEST_P(HybridPrefixCacheTest, PromptLogprobsWithTheCacheEqualThoseWithoutIt) {
  const Tokens base = Random(40, 50);
  const std::vector<Tokens> prompts = {base, base, Concat({Tokens(base.begin(), base.begin() + 32), Random(9, 51)}),
                                       Concat({base, Random(6, 52)})};
  GenerateResult runs[2];
  for (bool enable : {false, true}) {
    HarnessOptions options = CachedOptions(enable);
    options.prompt_logits_per_prompt = {false, true, true, false};
    options.arrival_steps = {0, 10, 20, 30};
    GreedySession session(model(), options, 128);
    runs[enable] = session.Run(prompts, 6);
    ExpectNothingHeld(session);
  }
  ExpectSameOutputs(runs[1], runs[0]);
  const testing::RunErrors e = testing::CompareRuns(Select(runs[1], {1, 2}), Select(runs[0], {1, 2}));
  EXPECT_EQ(e.prompt.rows, 40 + 41);
  EXPECT_LE(e.prompt.max_rel, kPromptRelTol) << e.prompt.ToString();
  EXPECT_EQ(e.prompt.argmax_mismatches, 0);
  EXPECT_EQ(runs[1].stats.prefix_cache_hits, 40) << "only prompt 3 looks the cache up";
  EXPECT_EQ(runs[1].stats.num_tokens_computed, runs[0].stats.num_tokens_computed - 40);
  EXPECT_EQ(ChunksAfterHit(runs[1].requests[3], 40), (std::vector<int64_t>{4, 2}));
}

// Aborts in between. With a budget of 16 tokens a step: request 0 (32 shared tokens +
// 13) is aborted after its first chunk (0-16, checkpointed at 16); request 1 (the 32
// shared + 9) starts on that checkpoint and is aborted mid-decode (its prompt's
// checkpoints 32 and 40 stay); request 2 (the 32 shared + 11) hits 32 and request 3
// (request 1's prompt again) hits 40. The requests that ran to the end have the
// outputs of a run without the cache (same arrivals and aborts), the aborted ones
// the same first tokens, and nothing stays held.
TEST_P(HybridPrefixCacheTest, AbortedRequestsLeaveUsableCheckpointsAndHoldNothing) {
  const Tokens shared = Random(32, 40);
  const std::vector<Tokens> prompts = {Concat({shared, Random(13, 41)}), Concat({shared, Random(9, 42)}),
                                       Concat({shared, Random(11, 43)}), Concat({shared, Random(9, 42)})};
  GenerateResult runs[2];
  for (bool enable : {false, true}) {
    HarnessOptions options = CachedOptions(enable);
    options.max_num_batched_tokens = 16;
    options.arrival_steps = {0, 0, 9, 10};
    options.abort_steps = {1, 8};
    GreedySession session(model(), options, 128);
    runs[enable] = session.Run(prompts, 8);
    ExpectNothingHeld(session);
    EXPECT_TRUE(runs[enable].requests[0].output_ids.empty()) << "aborted mid-prompt";
    const size_t aborted_decode = runs[enable].requests[1].output_ids.size();
    EXPECT_GT(aborted_decode, 0u);
    EXPECT_LT(aborted_decode, 8u) << "aborted mid-decode";
  }
  ExpectSameOutputs(Select(runs[1], {2, 3}), Select(runs[0], {2, 3}));
  const std::vector<int32_t>& a = runs[1].requests[1].output_ids;
  const std::vector<int32_t>& b = runs[0].requests[1].output_ids;
  const size_t n = std::min(a.size(), b.size());
  EXPECT_EQ(Tokens(a.begin(), a.begin() + n), Tokens(b.begin(), b.begin() + n));
  EXPECT_EQ(runs[1].stats.prefix_cache_hits, 16 + 32 + 40);
  EXPECT_EQ(ChunksAfterHit(runs[1].requests[2], 32), (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(ChunksAfterHit(runs[1].requests[3], 40), (std::vector<int64_t>{1}));
}

// A shared prefix longer than the snapshot pool covers: 96 tokens hold six interval
// checkpoints (16 .. 96), and with the first prompt's last-boundary (100) and decode
// (104) ones it wants eight, in a pool of three. Least recently used go first, so 96,
// 100 and 104 survive and the second prompt (same 96 tokens, another tail) starts at
// 96. With a pool of two, 96 is evicted as well and nothing hits (the blocks are
// cached, but a hybrid hit needs the state too). Outputs equal those without the
// cache either way.
TEST_P(HybridPrefixCacheTest, ASharedPrefixLongerThanTheSnapshotPoolHitsItsLatestSurvivingCheckpoint) {
  const Tokens prefix = Random(96, 60);
  const std::vector<Tokens> prompts = {Concat({prefix, Random(5, 61)}), Concat({prefix, Random(7, 62)})};
  HarnessOptions plain = CachedOptions(false);
  plain.arrival_steps = {0, 20};
  const GenerateResult reference = GreedySession(model(), plain, 128).Run(prompts, 6);
  for (int32_t pool : {3, 2}) {
    HarnessOptions options = CachedOptions(true);
    options.num_state_snapshots = pool;
    options.arrival_steps = {0, 20};
    GreedySession session(model(), options, 128);
    const GenerateResult run = session.Run(prompts, 6);
    ExpectSameOutputs(run, reference);
    ExpectNothingHeld(session);
    EXPECT_EQ(run.stats.prefix_cache_hits, pool == 3 ? 96 : 0) << "pool of " << pool;
    EXPECT_EQ(run.stats.num_tokens_computed, reference.stats.num_tokens_computed - (pool == 3 ? 96 : 0));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HybridPrefixCacheTest, ::testing::Values("qwen35_dense_untied", "qwen35_moe"),
                         [](const auto& info) { return testing::VariantTestName(info.param); });

}  // namespace
}  // namespace vllm
