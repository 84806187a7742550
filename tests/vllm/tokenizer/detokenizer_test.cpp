// IncrementalDetokenizer: never emits half a UTF-8 character, emits impossible bytes
// as U+FFFD at once, and the pieces it emits add up to Tokenizer::Decode of all ids.
// The tiny tokenizer has one token per byte, so characters split across tokens freely.
#include <gtest/gtest.h>

#include <random>

#include "tiny_tokenizer.h"
#include "vllm/tokenizer/utf8.h"
#include "vllm/tokenizer/detokenizer.h"
#include "vt/error.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;
using testing::TinyTokenizerJson;

struct TinyWithSpecial {
  Tokenizer tokenizer;
  int32_t special;
  int32_t emoji_head;  // the first three bytes of U+1F600 as one token
};

TinyWithSpecial MakeTiny() {
  TinyTokenizerJson t;
  t.merges = {{"\xF0", "\x9F"}, {"\xF0\x9F", "\x98"}};
  const int32_t special = t.AddToken("<|im_end|>", true);
  return {Tokenizer::FromHfJson(t.ToJson().dump(), "", "tiny"), special, t.Id("\xF0\x9F\x98")};
}

Ids ByteIds(const std::string& s) {
  Ids ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

TEST(DetokenizerTest, HoldsAnEmojiBackUntilItsLastByte) {
  const TinyWithSpecial tiny = MakeTiny();
  IncrementalDetokenizer detok(tiny.tokenizer);
  const Ids ids = ByteIds("\U0001F600!");
  EXPECT_EQ(detok.Add(ids[0]), "");
  EXPECT_EQ(detok.Add(ids[1]), "");
  EXPECT_EQ(detok.Add(ids[2]), "");
  EXPECT_EQ(detok.num_held_bytes(), 3u);
  EXPECT_EQ(detok.Add(ids[3]), "\U0001F600");
  EXPECT_EQ(detok.Add(ids[4]), "!");
  EXPECT_EQ(detok.Finish(), "");
  EXPECT_EQ(detok.output_text(), "\U0001F600!");
}

TEST(DetokenizerTest, BytesThatCanNeverBeACharacterAreEmittedAsReplacement) {
  const TinyWithSpecial tiny = MakeTiny();
  IncrementalDetokenizer detok(tiny.tokenizer);
  EXPECT_EQ(detok.Add(0xFF), "\uFFFD");
  EXPECT_EQ(detok.Add(0xE2), "");
  EXPECT_EQ(detok.Add('x'), "\uFFFDx");  // E2 followed by 'x' is broken for good
  EXPECT_EQ(detok.Add(0xE2), "");
  EXPECT_EQ(detok.Finish(), "\uFFFD");   // the stream ended inside a character
}

TEST(DetokenizerTest, SkipsSpecialTokensOnlyWhenAsked) {
  const TinyWithSpecial tiny = MakeTiny();
  IncrementalDetokenizer skipping(tiny.tokenizer, /*skip_special_tokens=*/true);
  IncrementalDetokenizer keeping(tiny.tokenizer, /*skip_special_tokens=*/false);
  const Ids ids = {'o', 'k', tiny.special};
  EXPECT_EQ(skipping.Add(ids), "ok");
  EXPECT_EQ(keeping.Add(ids), "ok<|im_end|>");
}

TEST(DetokenizerTest, IdsPastTheVocabularyAddNoTextAndNegativeIdsAreErrors) {
  const TinyWithSpecial tiny = MakeTiny();
  IncrementalDetokenizer detok(tiny.tokenizer);
  const int32_t past = tiny.tokenizer.vocab_size();
  EXPECT_EQ(detok.Add(Ids{'o', past, past + 500, 'k'}), "ok");
  EXPECT_THROW(detok.Add(-1), vt::Error);
  EXPECT_THROW(tiny.tokenizer.Decode(Ids{past}), vt::Error);  // an explicit Decode names the id
}

TEST(DetokenizerTest, APromptEndingInsideACharacterIsCompletedByTheOutput) {
  const TinyWithSpecial tiny = MakeTiny();
  const Ids euro = ByteIds("\u20AC");
  IncrementalDetokenizer detok(tiny.tokenizer, true, Ids{'h', 'i', euro[0]});
  EXPECT_EQ(detok.num_held_bytes(), 1u);
  EXPECT_EQ(detok.Add(euro[1]), "");
  EXPECT_EQ(detok.Add(euro[2]), "\u20AC");
}

TEST(DetokenizerTest, RandomStreamsAddUpToDecodeAndEmitOnlyWholeCharacters) {
  const TinyWithSpecial tiny = MakeTiny();
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {"a", "\u00E9", "\u20AC", "\U0001F600", "\xFF", "\xE2\x82", "\xF0\x9F\x98"};
  for (int trial = 0; trial < 300; ++trial) {
    Ids ids;
    const int num_pieces = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < num_pieces; ++i) {
      const Ids more = ByteIds(pieces[rng() % pieces.size()]);
      ids.insert(ids.end(), more.begin(), more.end());
      if (rng() % 5 == 0) ids.push_back(tiny.special);
      if (rng() % 5 == 0) ids.insert(ids.end(), {tiny.emoji_head, 0x80});  // U+1F600 in two tokens
    }
    IncrementalDetokenizer detok(tiny.tokenizer, /*skip_special_tokens=*/false);
    std::string streamed;
    size_t pos = 0;
    while (pos < ids.size()) {
      const size_t step = std::min<size_t>(ids.size() - pos, 1 + rng() % 3);
      const std::string text = detok.Add(std::span<const int32_t>(ids.data() + pos, step));
      ASSERT_FALSE(utf8::FindInvalid(text).has_value()) << "trial " << trial;
      streamed += text;
      pos += step;
    }
    streamed += detok.Finish();
    ASSERT_EQ(streamed, tiny.tokenizer.Decode(ids)) << "trial " << trial;
    ASSERT_EQ(detok.output_text(), streamed);
  }
}

}  // namespace
}  // namespace vllm
