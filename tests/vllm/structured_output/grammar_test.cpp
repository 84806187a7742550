// Regex, choice and GBNF front ends and the matcher's byte-level behaviour: regex
// matching agrees with std::regex on random strings, GBNF grammars (left recursion,
// multi-line rules, classes, bounded repetition) accept what they should, UTF-8 classes
// are exact, rollback restores the state, and errors name the construct.
#include <gtest/gtest.h>

#include <regex>

#include "structured_testing.h"
#include "vllm/tokenizer/utf8.h"
#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::structured_output {
namespace {

class Matcher {
 public:
  explicit Matcher(Grammar g)
      : compiled_(std::make_shared<const CompiledGrammar>(std::move(g), testing::SyntheticVocab())) {}
  bool FullMatch(std::string_view text) const {
    GrammarMatcher m(compiled_);
    return m.AcceptBytes(text) && m.CanTerminate();
  }
  std::shared_ptr<const CompiledGrammar> compiled() const { return compiled_; }

 private:
  std::shared_ptr<const CompiledGrammar> compiled_;
};

TEST(RegexGrammarTest, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "a(b|c)*d", "[a-c]{2,4}x?", "(ab)+|c", "\\d+(\\.\\d{1,2})?", "[^a]b*", ".{3}", "(a|b)*abb", "x{0,3}y{2,}",
      "(?:ab|a)(?:ba|b)?", "a*?b+?", "[\\d.]+", "(a|)+b", "((a|b)(c|d)){2}", "[a\\-c]*", "\\.\\*\\\\?", ""};
  const std::string alphabet = "abcdxy.0123*\\-";
  std::mt19937 rng(11);
  for (const std::string& p : patterns) {
    const Matcher m(GrammarFromRegex(p));
    const std::regex reference(p);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 9);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % (i % 2 ? 6 : alphabet.size())];
      EXPECT_EQ(m.FullMatch(s), std::regex_match(s, reference)) << "pattern " << p << " on \"" << s << "\"";
    }
  }
}

TEST(RegexGrammarTest, AnchorsAtTheEndsAndUnicode) {
  const Matcher m(GrammarFromRegex("^[é-ë]\\w\\s.$"));
  EXPECT_TRUE(m.FullMatch("éa 中"));
  EXPECT_TRUE(m.FullMatch("ë_\t\xF0\x9F\x98\x80"));
  EXPECT_FALSE(m.FullMatch("ìa b"));
  EXPECT_FALSE(m.FullMatch("éa \n"));  // . is not a newline
  EXPECT_FALSE(m.FullMatch("éa \xC3"));  // half a character
  EXPECT_TRUE(Matcher(GrammarFromRegex("a\\$")).FullMatch("a$"));
}

TEST(RegexGrammarTest, UnsupportedConstructsNameThemselves) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a^b", "anchor '^'"}, {"a$b", "anchor '$'"},       {"(?=a)b", "lookaround"},   {"(a)\\1", "escape \\1"},
      {"\\bfoo", "escape \\b"}, {"a{3,2}", "n < m"},        {"[z-a]", "out of order"},  {"(ab", "missing ')'"},
      {"ab)", "unbalanced"},  {"*a", "nothing to repeat"}, {"a++", "possessive"},      {"[[:alpha:]]", "POSIX"},
  };
  for (const auto& [pattern, what] : cases) {
    try {
      GrammarFromRegex(pattern);
      ADD_FAILURE() << "no error for " << pattern;
    } catch (const StructuredOutputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << pattern << ": " << e.what();
    }
  }
}

TEST(ChoiceGrammarTest, OnlyTheChoicesAndPrefixesOfThem) {
  const Matcher m(GrammarFromChoices({"yes", "no", "no way", "ü"}));
  for (const char* s : {"yes", "no", "no way", "ü"}) EXPECT_TRUE(m.FullMatch(s)) << s;
  for (const char* s : {"", "ye", "no ", "yess", "u"}) EXPECT_FALSE(m.FullMatch(s)) << s;
  EXPECT_THROW(GrammarFromChoices({}), StructuredOutputError);
}

// Random walks over token masks: every finished output matches (std::regex as the
// reference; the choice list), on both vocabularies.
void CheckRegexAndChoiceWalks(const std::shared_ptr<const TokenizerInfo>& vocab, int walks) {
  const std::vector<std::string> patterns = {"[a-z]{2,5}(,[0-9]+)*",  "(foo|bar)+baz?", "\\d{3}-\\d{2}-\\d{4}",
                                             "[A-Z][a-z ]{0,12}\\.", "(ab|a)*c",        "\"[^\"]{0,6}\""};
  std::mt19937 rng(13);
  for (const std::string& p : patterns) {
    auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromRegex(p), vocab);
    int finished = 0;
    for (int w = 0; w < walks; ++w) {
      GrammarMatcher m(compiled);
      const testing::WalkResult r = testing::RandomWalk(m, rng, 60, 0.5);
      if (!r.terminated) continue;
      ++finished;
      EXPECT_TRUE(std::regex_match(testing::Wide(r.text), std::wregex(testing::Wide(p)))) << p << " produced \"" << r.text << "\"";
    }
    EXPECT_GT(finished, walks / 2) << p;
  }
  const std::vector<std::string> choices = {"positive", "negative", "neutral", "neg", "中立"};
  auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromChoices(choices), vocab);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(compiled);
    const testing::WalkResult r = testing::RandomWalk(m, rng, 20, 0.5);
    ASSERT_TRUE(r.terminated);
    EXPECT_NE(std::find(choices.begin(), choices.end(), r.text), choices.end()) << r.text;
  }
}

TEST(RegexGrammarTest, WalksMatchOnASyntheticVocabulary) { CheckRegexAndChoiceWalks(testing::SyntheticVocab(), 100); }

TEST(RegexGrammarTest, WalksMatchOnTheQwen3Vocabulary) {
  auto vocab = testing::Qwen3Vocab();
  if (!vocab) GTEST_SKIP() << vllm::testing::MissingSharedData(testing::kQwen3Dir / "tokenizer.json");
  CheckRegexAndChoiceWalks(vocab, 50);
}

TEST(GbnfGrammarTest, ParsesLlamaCppSyntax) {
  const Matcher arithmetic(GrammarFromGbnf(R"G(# left recursion, multi-line alternatives
root ::= expr
expr ::= expr "+" term
       | term
term ::= term "*" factor | factor
factor ::= [0-9]+ | "(" expr ")" | "-" factor
)G"));
  for (const char* s : {"1", "1+2*3", "(1+2)*-3", "12*(3+4)+5"}) EXPECT_TRUE(arithmetic.FullMatch(s)) << s;
  for (const char* s : {"", "1+", "(1", "1**2", "a"}) EXPECT_FALSE(arithmetic.FullMatch(s)) << s;

  const Matcher misc(GrammarFromGbnf(
      "root ::= greeting ( \" \"\n  name )? \"!\"{1,3}\n"
      "greeting ::= \"h\\x65llo\" | \"\\u4E2D\"  # comment\n"
      "name ::= [A-Z] [a-z\\-]{0,4} | [^\\x00-\\x7F]\n"));
  for (const char* s : {"hello!", "hello Ann-e!!", "中 é!!!"}) EXPECT_TRUE(misc.FullMatch(s)) << s;
  for (const char* s : {"hello", "hello ann!", "hello Annabel!", "hello!!!!"}) EXPECT_FALSE(misc.FullMatch(s)) << s;
}

TEST(GbnfGrammarTest, ErrorsNameTheRuleOrLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= a\n", "rule 'a' used on line 1 is never defined"},
      {"start ::= \"x\"\n", "no 'root' rule"},
      {"root ::= \"x\"\nroot ::= \"y\"\n", "defined twice"},
      {"root ::= \"x\n", "unterminated string literal on line 1"},
      {"root ::= [a-\n", "line 1"},
      {"root \"x\"\n", "expected '::='"},
      {"root ::= \"a\" )\n", "unexpected ')'"},
      {"root ::= x\nx ::= x\n", "unsatisfiable"},
  };
  for (const auto& [text, what] : cases) {
    try {
      GrammarFromGbnf(text);
      ADD_FAILURE() << "no error for " << text;
    } catch (const StructuredOutputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << text << ": " << e.what();
    }
  }
}

// Expr::Utf8 accepts exactly the encodings of the code points in its ranges.
TEST(GrammarTest, Utf8ClassesAreExact) {
  const CodepointRanges ranges = {{0x41, 0x5A}, {0x7F0, 0x812}, {0xD000, 0xE100}, {0xFFF0, 0x10010}, {0x10FF00, 0x10FFFF}};
  for (const CodepointRanges& r : {ranges, ComplementCodepoints(ranges)}) {
    GrammarBuilder b;
    const Matcher m(b.Build(b.AddRule("root", Expr::Utf8(r)), "test"));
    std::mt19937 rng(5);
    for (int i = 0; i < 3000; ++i) {
      uint32_t cp = rng() % 0x110000;
      if (i % 2) cp = r[rng() % r.size()].first + (rng() % 3) - 1;
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
      std::string bytes;
      utf8::AppendCodePoint(bytes, cp);
      const bool in = std::any_of(r.begin(), r.end(), [&](auto p) { return p.first <= cp && cp <= p.second; });
      EXPECT_EQ(m.FullMatch(bytes), in) << std::hex << cp;
    }
    EXPECT_FALSE(m.FullMatch("\xED\xA0\x80"));  // an encoded surrogate
    EXPECT_FALSE(m.FullMatch("\xC0\x80"));      // an overlong form
  }
}

TEST(GrammarTest, RollbackRestoresTheState) {
  auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromJsonObject(), testing::SyntheticVocab());
  std::mt19937 rng(9);
  const int32_t words = compiled->tokenizer().bitmask_words();
  for (int trial = 0; trial < 30; ++trial) {
    GrammarMatcher m(compiled);
    const testing::WalkResult r = testing::RandomWalk(m, rng, 40);
    const int32_t back = static_cast<int32_t>(rng() % (r.ids.size() + 1));
    m.Rollback(back);
    GrammarMatcher replay(compiled);
    for (size_t k = 0; k + back < r.ids.size(); ++k) ASSERT_TRUE(replay.AcceptToken(r.ids[k]));
    std::vector<uint32_t> a(words), b(words);
    m.FillNextTokenBitmask(a);
    replay.FillNextTokenBitmask(b);
    EXPECT_EQ(a, b);
    EXPECT_EQ(m.IsTerminated(), replay.IsTerminated());
    EXPECT_EQ(m.CanTerminate(), replay.CanTerminate());
  }
  GrammarMatcher m(compiled);
  EXPECT_THROW(m.Rollback(1), std::invalid_argument);
}

}  // namespace
}  // namespace vllm::structured_output
