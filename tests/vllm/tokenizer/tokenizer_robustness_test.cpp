// Robustness: corrupted tokenizer.json documents load or fail with vt::Error (never a
// crash or another exception type); random text round-trips through encode and
// decode; invalid UTF-8 is always refused; concurrent encoding gives the ids of
// sequential encoding (the piece cache is shared by threads).
#include <gtest/gtest.h>


#include <random>
#include <thread>

#include "nfc_reference.h"
#include "tiny_tokenizer.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vllm/tokenizer/utf8.h"
#include "vt/error.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

// With `lstrip`, <y> swallows the whitespace before it (so text does not round-trip).
std::string TinyJsonText(bool lstrip) {
  testing::TinyTokenizerJson t;
  t.merges = {{"a", "b"}, {"ab", "c"}, {" ", "a"}, {"\xC3", "\xA9"}};
  t.AddToken("<|x|>", true);
  t.AddToken("<y>", false, {{"lstrip", lstrip}});
  return t.ToJson().dump();
}

Tokenizer Tiny() { return Tokenizer::FromHfJson(TinyJsonText(false), "", "tiny"); }

using testing::Nfc;

// Random text from pieces that exercise every stage: words, spaces, digits, added
// tokens (whole and broken), combining marks, CJK, emoji, controls.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "a",  "b",  "c",    "abc",       " ",      "  ",     "\n",       "\t",   "\r\n", "1",    "42",   "'s",
      "'T", "!",  "...",  "<|x|>",     "<|x",    "<y>",    " <y>",     "e",    "\u0301", "\u00E9", "\u4F60",
      "\u0E01\u0E34", "\U0001F600", "\u200D", "\u00A0", "\u3000", "\u180E", std::string(1, '\0'), "\x7F"};
  std::string text;
  const int n = static_cast<int>(rng() % 30);
  for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
  return text;
}

TEST(TokenizerRobustnessTest, CorruptedTokenizerJsonLoadsOrThrowsVtError) {
  const std::string good = TinyJsonText(true);
  // What a flipped byte becomes; sizeof counts the terminating NUL, a corruption too.
  constexpr char kFlips[] = "{}[]\":,0-9aZ \\\xC3\xFF";
  std::mt19937 rng(99);
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = good;
    if (trial % 4 == 0) {
      bad.resize(rng() % bad.size());  // truncated
    } else {
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
        bad[rng() % bad.size()] = kFlips[rng() % sizeof(kFlips)];
      }
    }
    try {
      const Tokenizer tok = Tokenizer::FromHfJson(bad, "", "fuzzed");
      tok.Decode(tok.Encode("ab c <|x|> \u00E9"));
      ++loaded;
    } catch (const vt::Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << " threw a non-vt::Error: " << e.what();
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);
}

TEST(TokenizerRobustnessTest, RandomTextDecodesBackToItsNfcForm) {
  const Tokenizer tok = Tiny();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string text = RandomText(rng);
    ASSERT_EQ(tok.Decode(tok.Encode(text)), Nfc(text)) << "trial " << trial;
  }
}

TEST(TokenizerRobustnessTest, RandomBytesAreEncodedIffTheyAreValidUtf8) {
  const Tokenizer tok = Tiny();
  std::mt19937 rng(17);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes(rng() % 12, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 4 == 0 ? 0x80 + rng() % 0x80 : rng() % 256);
    const bool valid = !utf8::FindInvalid(bytes).has_value();
    if (valid) {
      EXPECT_EQ(tok.Decode(tok.Encode(bytes)), Nfc(bytes));
    } else {
      EXPECT_THROW(tok.Encode(bytes), vt::Error);
    }
  }
}

TEST(TokenizerRobustnessTest, ConcurrentEncodingMatchesSequentialEncoding) {
  const Tokenizer tok = Tiny();
  std::mt19937 rng(3);
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) texts.push_back(RandomText(rng));
  std::vector<Ids> expected;
  for (const std::string& text : texts) expected.push_back(Tiny().Encode(text));  // a fresh cache each
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i * (t + 1) + round) % texts.size();
          if (tok.Encode(texts[k]) != expected[k]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace vllm
