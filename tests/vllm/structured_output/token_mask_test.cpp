// The token bitmask: on states reached by random walks, the mask computed with the
// position cache equals a brute-force check of every token id (AcceptToken, then
// Rollback); stop tokens only where the grammar can end; special and padding ids
// never; ApplyTokenBitmask. MaskTimePerToken prints the mask cost on the Qwen3
// vocabulary (no timing is asserted).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <thread>

#include "structured_testing.h"
#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::structured_output {
namespace {

using testing::json;

std::vector<uint32_t> BruteForceMask(GrammarMatcher& m) {
  const TokenizerInfo& tok = m.compiled().tokenizer();
  std::vector<uint32_t> mask(tok.bitmask_words(), 0);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (m.AcceptToken(id)) {
      BitmaskSet(mask, id);
      m.Rollback(1);
    }
  }
  return mask;
}

std::vector<Grammar> SampleGrammars(std::mt19937& rng, int num_schemas) {
  std::vector<Grammar> grammars;
  grammars.push_back(GrammarFromJsonObject());
  grammars.push_back(GrammarFromRegex("(ab|[0-9]{2,3}\"?)*x[^a]{0,3}"));
  grammars.push_back(GrammarFromRegex("[a-z ]+"));  // tokens that leave the class: rejected when the cache is built
  grammars.push_back(GrammarFromChoices({"true", "trueish", "null", "{\"a\": 1}"}));
  grammars.push_back(GrammarFromGbnf("root ::= item (\", \" item)*\nitem ::= \"\\\"\" [a-z ]* \"\\\"\" | [0-9]+ | root\n"));
  for (int i = 0; i < num_schemas; ++i) {
    JsonSchemaOptions options;
    options.max_whitespace = std::array{0, 2, -1}[rng() % 3];
    grammars.push_back(GrammarFromJsonSchema(testing::RandomRootSchema(rng), options));
  }
  return grammars;
}

// Walks each grammar and compares the two masks at every `stride`-th step.
void CheckMasksAgainstBruteForce(const std::shared_ptr<const TokenizerInfo>& vocab, int num_schemas, int steps,
                                 int stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(vocab->bitmask_words());
  int num_compared = 0;
  for (Grammar& g : SampleGrammars(rng, num_schemas)) {
    auto compiled = std::make_shared<const CompiledGrammar>(std::move(g), vocab);
    GrammarMatcher m(compiled);
    std::string text;
    for (int step = 0; step < steps && !m.IsTerminated(); ++step) {
      m.FillNextTokenBitmask(mask);
      if (step % stride == 0) {
        ASSERT_EQ(mask, BruteForceMask(m)) << "after \"" << text << "\" in\n" << compiled->grammar().ToString();
        ++num_compared;
      }
      for (int32_t id : vocab->stop_token_ids()) EXPECT_EQ(BitmaskTest(mask, id), m.CanTerminate());
      const std::vector<int32_t> allowed = testing::AllowedIds(mask, vocab->vocab_size());
      ASSERT_FALSE(allowed.empty()) << "after \"" << text << "\"";
      int32_t id = allowed[rng() % allowed.size()];
      if (vocab->IsStop(id) && step < steps / 2 && allowed.size() > 1) id = allowed[(rng() % (allowed.size() - 1))];
      ASSERT_TRUE(m.AcceptToken(id));
      if (!m.IsTerminated()) text += vocab->token_bytes(id);
    }
  }
  EXPECT_GT(num_compared, num_schemas);
}

TEST(TokenMaskTest, EqualsBruteForceOnASyntheticVocabulary) {
  CheckMasksAgainstBruteForce(testing::SyntheticVocab(), 60, 40, 1, 21);
}

TEST(TokenMaskTest, EqualsBruteForceOnTheQwen3Vocabulary) {
  auto vocab = testing::Qwen3Vocab();
  if (!vocab) GTEST_SKIP() << vllm::testing::MissingSharedData(testing::kQwen3Dir / "tokenizer.json");
  CheckMasksAgainstBruteForce(vocab, 6, 30, 5, 22);
}

TEST(TokenMaskTest, StopOnlyWhereTheGrammarCanEndAndNeverSpecialOrPadding) {
  const auto vocab = testing::SyntheticVocab();
  auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromChoices({"ab", "abab"}), vocab);
  GrammarMatcher m(compiled);
  const int32_t stop = vocab->stop_token_ids()[0];
  std::vector<uint32_t> mask(vocab->bitmask_words());
  const auto allowed = [&] {
    m.FillNextTokenBitmask(mask);
    return testing::AllowedIds(mask, vocab->vocab_size());
  };
  const std::vector<int32_t> at_start = allowed();
  EXPECT_EQ(std::find(at_start.begin(), at_start.end(), stop), at_start.end());
  ASSERT_TRUE(m.AcceptBytes("a"));
  EXPECT_EQ(allowed(), std::vector<int32_t>{'b'});
  EXPECT_FALSE(m.AcceptToken(stop));
  ASSERT_TRUE(m.AcceptBytes("b"));
  const std::vector<int32_t> at_end = allowed();
  EXPECT_NE(std::find(at_end.begin(), at_end.end(), stop), at_end.end());
  EXPECT_NE(std::find(at_end.begin(), at_end.end(), int32_t{'a'}), at_end.end());
  for (int32_t id : at_end) EXPECT_TRUE(vocab->IsNormal(id) || id == stop) << id;
  ASSERT_TRUE(m.AcceptToken(stop));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.AcceptToken('a'));
  EXPECT_EQ(allowed(), std::vector<int32_t>{stop});
  m.Rollback(1);
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.AcceptBytes("ab"));
  EXPECT_TRUE(m.CanTerminate());
}

TEST(TokenMaskTest, ApplyTokenBitmaskSetsDisallowedLogitsToMinusInfinity) {
  std::vector<float> logits(70);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.5f - 3.0f;
  std::vector<uint32_t> mask(BitmaskWords(70), 0);
  for (int32_t id : {0, 5, 31, 32, 63, 64, 69}) BitmaskSet(mask, id);
  mask[1] = ~0u;  // a full word is skipped, not rewritten
  const std::vector<float> before = logits;
  ApplyTokenBitmask(logits, mask);
  for (int32_t i = 0; i < 70; ++i) {
    if (BitmaskTest(mask, i)) {
      EXPECT_EQ(logits[i], before[i]) << i;
    } else {
      EXPECT_EQ(logits[i], -std::numeric_limits<float>::infinity()) << i;
    }
  }
  EXPECT_THROW(ApplyTokenBitmask(logits, std::span<const uint32_t>(mask).first(2)), std::invalid_argument);
}

// Matchers on several threads share one CompiledGrammar whose cache is still empty:
// each computes the masks that a serial run on a separate grammar computes.
TEST(TokenMaskTest, ThreadsShareACompiledGrammar) {
  const auto vocab = testing::SyntheticVocab();
  std::mt19937 rng(31);
  const json schema = testing::RandomRootSchema(rng);
  auto serial = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(schema), vocab);
  std::vector<std::vector<int32_t>> walks;
  std::vector<std::vector<std::vector<uint32_t>>> expected;
  for (int w = 0; w < 8; ++w) {
    GrammarMatcher m(serial);
    walks.push_back(testing::RandomWalk(m, rng, 60).ids);
    GrammarMatcher replay(serial);
    expected.emplace_back();
    for (int32_t id : walks.back()) {
      expected.back().emplace_back(vocab->bitmask_words());
      replay.FillNextTokenBitmask(expected.back().back());
      ASSERT_TRUE(replay.AcceptToken(id));
    }
  }
  auto shared = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(schema), vocab);
  std::vector<int> mismatches(walks.size(), 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < walks.size(); ++w) {
    threads.emplace_back([&, w] {
      GrammarMatcher m(shared);
      std::vector<uint32_t> mask(vocab->bitmask_words());
      for (size_t k = 0; k < walks[w].size(); ++k) {
        m.FillNextTokenBitmask(mask);
        mismatches[w] += mask != expected[w][k];
        m.AcceptToken(walks[w][k]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(walks.size(), 0));
}

// PrecomputeMasks called on several threads splits the positions: together the calls
// claim each position once and leave the whole cache computed, and the masks are
// those of a grammar whose entries were computed on first use.
TEST(TokenMaskTest, ConcurrentPrecomputesSplitThePositions) {
  const auto vocab = testing::SyntheticVocab();
  std::mt19937 rng(7);
  const json schema = testing::RandomRootSchema(rng);
  auto lazy = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(schema), vocab);
  auto shared = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(schema), vocab);
  std::vector<int32_t> claimed(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < claimed.size(); ++t) {
    threads.emplace_back([&, t] { claimed[t] = shared->PrecomputeMasks(); });
  }
  for (std::thread& t : threads) t.join();
  int32_t total = 0;
  for (int32_t c : claimed) {
    EXPECT_GE(c, 0);
    total += c;
  }
  EXPECT_EQ(total, shared->grammar().num_positions());
  EXPECT_TRUE(shared->MasksComplete());
  EXPECT_EQ(shared->PrecomputeMasks(), 0);  // nothing left to claim

  GrammarMatcher expected(lazy), actual(shared);
  const std::vector<int32_t> walk = testing::RandomWalk(expected, rng, 60).ids;
  GrammarMatcher replay(lazy);
  std::vector<uint32_t> want(vocab->bitmask_words()), got(vocab->bitmask_words());
  for (int32_t id : walk) {
    replay.FillNextTokenBitmask(want);
    actual.FillNextTokenBitmask(got);
    ASSERT_EQ(got, want);
    ASSERT_TRUE(replay.AcceptToken(id));
    ASSERT_TRUE(actual.AcceptToken(id));
  }
}

// Prints the mask time per generated token on the Qwen3 vocabulary: the first walk
// over a grammar fills its cache, later walks reuse it.
TEST(TokenMaskTest, MaskTimePerToken) {
  auto vocab = testing::Qwen3Vocab();
  if (!vocab) GTEST_SKIP() << vllm::testing::MissingSharedData(testing::kQwen3Dir / "tokenizer.json");
  const json schema = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
      "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                  "required": ["city"]}},
    "required": ["name", "age", "tags"]})");
  std::mt19937 rng(4);
  using Clock = std::chrono::steady_clock;
  for (const char* kind : {"json_schema", "json_object"}) {
    auto compiled = std::make_shared<const CompiledGrammar>(
        std::string(kind) == "json_schema" ? GrammarFromJsonSchema(schema) : GrammarFromJsonObject(), vocab);
    {
      CompiledGrammar fresh(Grammar(compiled->grammar()), vocab);
      const auto t0 = Clock::now();
      fresh.PrecomputeMasks();
      std::printf("[ mask     ] %s: the whole cache (%d positions) in %.1f ms, %.1f MB\n", kind,
                  fresh.grammar().num_positions(), 1e3 * std::chrono::duration<double>(Clock::now() - t0).count(),
                  fresh.CacheBytes() / 1e6);
    }
    for (const char* pass : {"cold cache", "warm cache"}) {
      std::vector<uint32_t> mask(vocab->bitmask_words());
      double mask_seconds = 0;
      int num_masks = 0;
      for (int walk = 0; walk < 10; ++walk) {
        GrammarMatcher m(compiled);
        for (int step = 0; step < 120 && !m.IsTerminated(); ++step) {
          const auto t0 = Clock::now();
          m.FillNextTokenBitmask(mask);
          mask_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
          ++num_masks;
          const std::vector<int32_t> allowed = testing::AllowedIds(mask, vocab->vocab_size());
          int32_t id = allowed[rng() % allowed.size()];
          if (m.CanTerminate() && rng() % 3 == 0) id = vocab->stop_token_ids()[0];
          ASSERT_TRUE(m.AcceptToken(id));
        }
      }
      std::printf("[ mask     ] %s, %s: %.1f us per token over %d tokens (vocabulary %d), cache %.1f MB\n", kind, pass,
                  1e6 * mask_seconds / num_masks, num_masks, vocab->vocab_size(), compiled->CacheBytes() / 1e6);
    }
  }
}

}  // namespace
}  // namespace vllm::structured_output
