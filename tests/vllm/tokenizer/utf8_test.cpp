// UTF-8 scanning: strict validation, lossy decoding by maximal subparts (the expected
// strings are what Python's bytes.decode("utf-8", "replace") gives, which HF's Rust
// from_utf8_lossy matches), and the incomplete-tail length used by streaming.
#include <gtest/gtest.h>

#include "vllm/tokenizer/utf8.h"

namespace vllm {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(Utf8Test, ScanSequenceReadsEveryLengthAndRejectsIllFormedLeads) {
  EXPECT_EQ(utf8::ScanSequence("A", 0).code_point, U'A');
  const utf8::Sequence two = utf8::ScanSequence("\xC3\xA9", 0);
  EXPECT_EQ(two.kind, utf8::Sequence::kValid);
  EXPECT_EQ(two.length, 2u);
  EXPECT_EQ(two.code_point, U'\u00E9');
  EXPECT_EQ(utf8::ScanSequence("\xE2\x82\xAC", 0).code_point, U'\u20AC');
  EXPECT_EQ(utf8::ScanSequence("\xF0\x9F\x98\x80", 0).code_point, U'\U0001F600');
  EXPECT_EQ(utf8::ScanSequence("\x80", 0).kind, utf8::Sequence::kInvalid);  // stray continuation
  EXPECT_EQ(utf8::ScanSequence("\xC0\xAF", 0).kind, utf8::Sequence::kInvalid);  // overlong lead
  EXPECT_EQ(utf8::ScanSequence("\xED\xA0\x80", 0).kind, utf8::Sequence::kInvalid);  // surrogate
  EXPECT_EQ(utf8::ScanSequence("\xF4\x90\x80\x80", 0).kind, utf8::Sequence::kInvalid);  // > U+10FFFF
  const utf8::Sequence truncated = utf8::ScanSequence("\xF0\x9F\x98", 0);
  EXPECT_EQ(truncated.kind, utf8::Sequence::kTruncated);
  EXPECT_EQ(truncated.length, 3u);
}

TEST(Utf8Test, FindInvalidGivesTheOffsetOfTheFirstBadByte) {
  EXPECT_FALSE(utf8::FindInvalid("plain ascii"));
  EXPECT_FALSE(utf8::FindInvalid("caf\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8::FindInvalid(std::string("nul\0inside", 10)));
  EXPECT_EQ(utf8::FindInvalid("ab\xFF"), 2u);
  EXPECT_EQ(utf8::FindInvalid("abc\xE2\x82"), 3u);  // truncated at the end is invalid too
  EXPECT_EQ(utf8::FindInvalid("\xED\xBF\xBF"), 0u);
}

TEST(Utf8Test, DecodeLossyReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(utf8::DecodeLossy("valid \xC3\xA9"), "valid \xC3\xA9");
  // The example of the Unicode standard, chapter 3 ("U+FFFD substitution of maximal subparts").
  EXPECT_EQ(utf8::DecodeLossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + Repeat(kFffd, 3) + "b" + kFffd + "c" + Repeat(kFffd, 2) + "d");
  EXPECT_EQ(utf8::DecodeLossy("\xE0\x80\xAF"), Repeat(kFffd, 3));
  EXPECT_EQ(utf8::DecodeLossy("\xED\xA0\x80x"), Repeat(kFffd, 3) + "x");
  EXPECT_EQ(utf8::DecodeLossy("\xF4\x90\x80\x80"), Repeat(kFffd, 4));
  EXPECT_EQ(utf8::DecodeLossy("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(utf8::DecodeLossy("\xC0\xAF"), Repeat(kFffd, 2));
}

TEST(Utf8Test, IncompleteTailLengthHoldsOnlyCharactersThatCanStillBeCompleted) {
  EXPECT_EQ(utf8::IncompleteTailLength(""), 0u);
  EXPECT_EQ(utf8::IncompleteTailLength("abc"), 0u);
  EXPECT_EQ(utf8::IncompleteTailLength("ab\xE2"), 1u);
  EXPECT_EQ(utf8::IncompleteTailLength("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8::IncompleteTailLength("ab\xE2\x82\xAC"), 0u);
  EXPECT_EQ(utf8::IncompleteTailLength("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::IncompleteTailLength("x\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::IncompleteTailLength("\xC3\xE2\x82"), 2u);  // the stray C3 is not held
  EXPECT_EQ(utf8::IncompleteTailLength("\xE0\x80"), 0u);      // E0 80 can never be completed
  EXPECT_EQ(utf8::IncompleteTailLength("\xFF"), 0u);
  EXPECT_EQ(utf8::IncompleteTailLength("\x80\x80\x80"), 0u);
}

TEST(Utf8Test, AppendCodePointWritesEveryLength) {
  std::string out;
  for (char32_t cp : {U'A', U'\u00E9', U'\u20AC', U'\U0001F600'}) utf8::AppendCodePoint(out, cp);
  EXPECT_EQ(out, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace vllm
