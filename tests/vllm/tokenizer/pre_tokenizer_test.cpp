// The split regexes on PCRE2: the pieces of the Qwen2/Qwen3 and Qwen3.5 patterns (the
// expected pieces were checked against Python's `regex` module, whose \s and \p classes
// agree with Oniguruma's, the engine of HF tokenizers), the \s spelling that keeps
// PCRE2 in line with Oniguruma, prefix spaces, and errors.
#include <gtest/gtest.h>

#include "vllm/tokenizer/pre_tokenizer.h"
#include "vt/error.h"

namespace vllm {
namespace {

using Pieces = std::vector<std::string>;

Pieces SplitWith(std::string_view pattern, std::string_view text) {
  PreTokenizer pre;
  pre.AddRegexSplit(pattern, "test");
  return pre.Split(text);
}

TEST(PreTokenizerTest, Qwen2PatternCutsWordsContractionsDigitsAndSpaces) {
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "Hello world's 123"),
            (Pieces{"Hello", " world", "'s", " ", "1", "2", "3"}));
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "I'M OK, it'S"), (Pieces{"I", "'M", " OK", ",", " it", "'S"}));
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "  x\n\n  y  "), (Pieces{" ", " x", "\n\n", " ", " y", "  "}));
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "a\tb\r\n\r\nc!!\n"), (Pieces{"a", "\tb", "\r\n\r\n", "c", "!!\n"}));
}

TEST(PreTokenizerTest, Qwen35PatternKeepsCombiningMarksInsideWords) {
  const std::string namaste = "\u0928\u092E\u0938\u094D\u0924\u0947 \u0926\u0941\u0928\u093F\u092F\u093E";
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, namaste),
            (Pieces{"\u0928\u092E\u0938", "\u094D\u0924", "\u0947", " \u0926", "\u0941\u0928", "\u093F\u092F",
                    "\u093E"}));
  EXPECT_EQ(SplitWith(kQwen35SplitPattern, namaste),
            (Pieces{"\u0928\u092E\u0938\u094D\u0924\u0947", " \u0926\u0941\u0928\u093F\u092F\u093E"}));
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "e\u0301t\u00E9"), (Pieces{"e", "\u0301t\u00E9"}));
  EXPECT_EQ(SplitWith(kQwen35SplitPattern, "e\u0301t\u00E9"), (Pieces{"e\u0301t\u00E9"}));
}

TEST(PreTokenizerTest, WhitespaceIsUnicodeWhiteSpaceAsInOniguruma) {
  // U+180E is whitespace for PCRE2's own \s but not for Oniguruma (nor Unicode 6.3+).
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "x\u180E\u180E!"), (Pieces{"x", "\u180E\u180E!"}));
  // U+3000 and U+00A0 are whitespace for both.
  EXPECT_EQ(SplitWith(kQwen2SplitPattern, "a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000b"}));
  EXPECT_EQ(OnigurumaCompatiblePattern(R"(\s+(?!\S)|[^\s\p{L}]a\\s)"),
            R"([\t-\r\x{85}\p{Z}]+(?![^\t-\r\x{85}\p{Z}])|[^\t-\r\x{85}\p{Z}\p{L}]a\\s)");
  EXPECT_THROW(OnigurumaCompatiblePattern(R"([\S])"), vt::Error);
}

TEST(PreTokenizerTest, GapsBetweenMatchesArePiecesToo) {
  // "Isolated": text the regex does not match stays, as its own piece.
  EXPECT_EQ(SplitWith("[0-9]+", "ab12cd345"), (Pieces{"ab", "12", "cd", "345"}));
  EXPECT_EQ(SplitWith("x*", "axxb"), (Pieces{"a", "xx", "b"}));  // empty matches cut nothing
  EXPECT_TRUE(SplitWith(kQwen2SplitPattern, "").empty());
}

TEST(PreTokenizerTest, PrefixSpaceIsAddedToEveryPieceWithoutOne) {
  PreTokenizer pre;
  pre.AddRegexSplit("[0-9]+", "test");
  pre.AddPrefixSpace();
  EXPECT_EQ(pre.Split("ab12 cd"), (Pieces{" ab", " 12", " cd"}));
}

TEST(PreTokenizerTest, LongWhitespaceRunsDoNotExhaustTheMatchStack) {
  const std::string spaces(200000, ' ');
  const Pieces pieces = SplitWith(kQwen2SplitPattern, "a" + spaces + "b");
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].size(), spaces.size() - 1);
  EXPECT_EQ(pieces[2], " b");
}

TEST(PreTokenizerTest, BadPatternsAndUnknownGgufNamesAreNamed) {
  try {
    SplitWith("(unclosed", "x");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("test: the split regex does not compile"), std::string::npos) << e.what();
  }
  EXPECT_EQ(SplitPatternForGgufPre("qwen35", "m.gguf"), kQwen35SplitPattern);
  EXPECT_EQ(SplitPatternForGgufPre("qwen2", "m.gguf"), kQwen2SplitPattern);
  try {
    SplitPatternForGgufPre("llama-bpe", "m.gguf");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.gguf: tokenizer.ggml.pre = 'llama-bpe' is not a known"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vllm
