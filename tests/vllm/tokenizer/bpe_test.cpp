// BPE merging against a plain reference: repeatedly merge the adjacent pair with the
// lowest rank (the leftmost on ties), one pair at a time, until no pair merges. That is
// the definition HF tokenizers and GPT-2 implement; the model under test uses a heap.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "vllm/tokenizer/bpe.h"
#include "vllm/tokenizer/byte_level.h"
#include "vllm/tokenizer/vocab_index.h"
#include "vt/error.h"

namespace vllm {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// Vocabulary of the 256 bytes plus each merge's result, byte-level spelled.
std::unordered_map<std::string, int32_t> VocabFor(const Merges& spelled_merges) {
  std::unordered_map<std::string, int32_t> vocab;
  for (int b = 0; b < 256; ++b) vocab[byte_level::Encode(std::string(1, static_cast<char>(b)))] = b;
  for (const auto& [l, r] : spelled_merges) vocab.emplace(l + r, static_cast<int32_t>(vocab.size()));
  return vocab;
}

VocabIndex Index(const std::unordered_map<std::string, int32_t>& vocab) {
  return VocabIndex(std::vector<std::pair<std::string, int32_t>>(vocab.begin(), vocab.end()), "test");
}

std::vector<int32_t> ReferenceBpe(const std::string& piece, const Merges& spelled_merges,
                                  const std::unordered_map<std::string, int32_t>& vocab) {
  std::vector<std::string> symbols;
  for (char c : piece) symbols.push_back(byte_level::Encode(std::string(1, c)));
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < spelled_merges.size(); ++i) rank[spelled_merges[i]] = i;
  while (true) {
    size_t best = symbols.size(), best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = rank.find({symbols[i], symbols[i + 1]});
      if (it != rank.end() && it->second < best_rank) {
        best = i;
        best_rank = it->second;
      }
    }
    if (best == symbols.size()) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& s : symbols) ids.push_back(vocab.at(s));
  return ids;
}

// Random merges over a small alphabet, each producing a new token (as trained BPE does).
Merges RandomMerges(std::mt19937& rng, const std::string& alphabet, int count) {
  std::vector<std::string> tokens;
  for (char c : alphabet) tokens.push_back(byte_level::Encode(std::string(1, c)));
  std::set<std::string> known(tokens.begin(), tokens.end());
  Merges merges;
  while (static_cast<int>(merges.size()) < count) {
    const std::string& l = tokens[rng() % tokens.size()];
    const std::string& r = tokens[rng() % tokens.size()];
    if (known.count(l + r) || (l + r).size() > 12) continue;
    merges.emplace_back(l, r);
    known.insert(l + r);
    tokens.push_back(l + r);
  }
  return merges;
}

TEST(BpeTest, MatchesTheReferenceOnRandomMergesAndWords) {
  std::mt19937 rng(1234);
  const std::string alphabet = "ab c\xC3\xA9";  // includes a space and a two-byte character
  for (int trial = 0; trial < 20; ++trial) {
    const Merges merges = RandomMerges(rng, alphabet, 40);
    const auto vocab = VocabFor(merges);
    const BpeModel model(Index(vocab), merges, false, "test");
    for (int w = 0; w < 200; ++w) {
      std::string word;
      const int length = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < length; ++i) word += alphabet[rng() % alphabet.size()];
      std::vector<int32_t> got;
      model.Encode(word, got);
      ASSERT_EQ(got, ReferenceBpe(word, merges, vocab)) << "trial " << trial << " word '" << word << "'";
    }
  }
}

TEST(BpeTest, LowestRankFirstThenLeftmost) {
  const Merges merges = {{"b", "c"}, {"a", "b"}, {"a", "a"}};
  const auto vocab = VocabFor(merges);
  const BpeModel model(Index(vocab), merges, false, "test");
  std::vector<int32_t> ids;
  model.Encode("abc", ids);  // (b,c) ranks before (a,b)
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', vocab.at("bc")}));
  ids.clear();
  model.Encode("aaa", ids);  // leftmost (a,a) first
  EXPECT_EQ(ids, (std::vector<int32_t>{vocab.at("aa"), 'a'}));
  ids.clear();
  model.Encode("", ids);
  EXPECT_TRUE(ids.empty());
}

TEST(BpeTest, IgnoreMergesTakesWholeVocabularyEntries) {
  // "abc" is in the vocabulary, but the merges alone would give "a" + "bc".
  const Merges merges = {{"b", "c"}, {"a", "b"}, {"ab", "c"}};
  const auto vocab = VocabFor(merges);
  std::vector<int32_t> merged, whole;
  BpeModel(Index(vocab), merges, false, "test").Encode("abc", merged);
  BpeModel(Index(vocab), merges, true, "test").Encode("abc", whole);
  EXPECT_EQ(merged, (std::vector<int32_t>{'a', vocab.at("bc")}));
  EXPECT_EQ(whole, (std::vector<int32_t>{vocab.at("abc")}));
}

TEST(BpeTest, ErrorsNameTheMissingByteOrMergeToken) {
  auto vocab = VocabFor({});
  vocab.erase(byte_level::Encode("\n"));
  try {
    BpeModel(Index(vocab), {}, false, "tok.json");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tok.json: model.vocab has no entry for byte 0x0A"), std::string::npos)
        << e.what();
  }
  try {
    BpeModel(Index(VocabFor({})), {{"a", "zz"}}, false, "tok.json");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.merges[0] = 'a zz' needs the token 'zz'"), std::string::npos)
        << e.what();
  }
}

TEST(VocabIndexTest, FindsEverySpellingAndRejectsClashes) {
  const VocabIndex index({{"a", 0}, {"bb", 2}, {"\xC4\xA0the", 5}}, "v.json");
  EXPECT_EQ(index.size(), 6);
  EXPECT_EQ(index.Find("bb"), 2);
  EXPECT_EQ(index.Find("\xC4\xA0the"), 5);
  EXPECT_FALSE(index.Find("b").has_value());
  EXPECT_FALSE(index.Find("").has_value());
  EXPECT_TRUE(index.Has(2));
  EXPECT_FALSE(index.Has(1));
  EXPECT_EQ(index.Spelling(5), "\xC4\xA0the");
  EXPECT_THROW(VocabIndex({{"a", 0}, {"b", 0}}, "v.json"), vt::Error);
  EXPECT_THROW(VocabIndex({{"a", 0}, {"a", 1}}, "v.json"), vt::Error);
  EXPECT_THROW(VocabIndex({{"a", -1}}, "v.json"), vt::Error);
}

}  // namespace
}  // namespace vllm
