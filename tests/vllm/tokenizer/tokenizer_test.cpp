// vllm::Tokenizer on small tokenizer.json documents built in the test: the encoding
// pipeline (added tokens before BPE, NFC, split regex, BPE), added-token options with
// HF's semantics, decoding, special ids from tokenizer_config.json, and bad input.
#include <gtest/gtest.h>

#include "tiny_tokenizer.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vt/error.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;
using testing::TinyTokenizerJson;

Tokenizer Build(const TinyTokenizerJson& t, const nlohmann::json& config = nullptr) {
  return Tokenizer::FromHfJson(t.ToJson().dump(), config.is_null() ? "" : config.dump(), "tiny");
}

// Ids of each byte of `s`: what a tokenizer without merges gives.
Ids ByteIds(const std::string& s) {
  Ids ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

Ids Concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(TokenizerTest, EncodesPiecesWithMergesAndDecodesBack) {
  TinyTokenizerJson t;
  t.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  const Tokenizer tok = Build(t);
  // Pieces "hello", " world": merges never cross the regex's piece boundary.
  const Ids ids = tok.Encode("hello world");
  EXPECT_EQ(ids, Concat({{t.Id("hello"), t.Id(" w")}, ByteIds("orld")}));
  EXPECT_EQ(tok.Decode(ids), "hello world");
  EXPECT_EQ(tok.IdToToken(t.Id(" w")), "\xC4\xA0w");  // "Ġw"
  EXPECT_EQ(tok.TokenToId("\xC4\xA0w"), t.Id(" w"));
  EXPECT_EQ(tok.TokenBytes(t.Id(" w")), " w");
  EXPECT_EQ(tok.vocab_size(), t.NumModelTokens());
}

TEST(TokenizerTest, AddedTokensAreFoundBeforeBpeLongestFirstAndNeverSplit) {
  TinyTokenizerJson t;
  t.merges = {{"<", "|"}};
  const int start = t.AddToken("<|im_start|>", true);
  const int end = t.AddToken("<|im_end|>", true);
  const int think = t.AddToken("<think>", false);
  const int longer = t.AddToken("<think><think>", false);
  const Tokenizer tok = Build(t);
  EXPECT_EQ(tok.Encode("<|im_start|>user<|im_end|>"), Concat({{start}, ByteIds("user"), {end}}));
  EXPECT_EQ(tok.Encode("a<think><think><think>b"), Concat({ByteIds("a"), {longer, think}, ByteIds("b")}));
  // A broken token is plain text (and "<|" merges as usual).
  EXPECT_EQ(tok.Encode("<|im_end"), Concat({{t.Id("<|")}, ByteIds("im_end")}));
  EXPECT_TRUE(tok.IsSpecial(start));
  EXPECT_FALSE(tok.IsSpecial(think));
  EXPECT_EQ(tok.Decode(Ids{start, 'h', 'i', end}), "<|im_start|>hi<|im_end|>");
  EXPECT_EQ(tok.Decode(Ids{start, 'h', 'i', think, end}, /*skip_special_tokens=*/true), "hi<think>");
}

TEST(TokenizerTest, TextBetweenAddedTokensIsNormalisedSeparately) {
  TinyTokenizerJson t;
  const int sep = t.AddToken("<s>", true);
  const Tokenizer tok = Build(t);
  // NFD "e" + U+0301 becomes NFC U+00E9; across an added token nothing composes.
  EXPECT_EQ(tok.Encode("e\u0301"), ByteIds("\u00E9"));
  EXPECT_EQ(tok.Encode("e<s>\u0301"), Concat({ByteIds("e"), {sep}, ByteIds("\u0301")}));
  EXPECT_EQ(tok.Decode(tok.Encode("Cafe\u0301 \u212B")), "Caf\u00E9 \u00C5");
}

TEST(TokenizerTest, LstripRstripAndSingleWordFollowHf) {
  TinyTokenizerJson t;
  const int mask = t.AddToken("<mask>", false, {{"lstrip", true}, {"rstrip", true}});
  const int word = t.AddToken("ony", false, {{"single_word", true}});
  const Tokenizer tok = Build(t);
  // lstrip/rstrip: the surrounding whitespace (tabs and U+3000 too) belongs to the token.
  EXPECT_EQ(tok.Encode("Hi <mask> there"), Concat({ByteIds("Hi"), {mask}, ByteIds("there")}));
  EXPECT_EQ(tok.Encode("a\t<mask>\u3000b"), Concat({ByteIds("a"), {mask}, ByteIds("b")}));
  // single_word: only where no word character touches it.
  EXPECT_EQ(tok.Encode("ony, Anthony ony"), Concat({{word}, ByteIds(", Anthony "), {word}}));
  EXPECT_EQ(tok.Encode("\u0301ony"), ByteIds("\u0301ony"));  // a combining mark is a word character
}

TEST(TokenizerTest, NormalizedAddedTokensAreMatchedInNormalisedText) {
  TinyTokenizerJson t;
  const int cafe = t.AddToken("caf\u00E9", false, {{"normalized", true}});
  const int raw = t.AddToken("x\u0301", false, {{"normalized", false}});
  const Tokenizer tok = Build(t);
  EXPECT_EQ(tok.Encode("a cafe\u0301"), Concat({ByteIds("a "), {cafe}}));
  EXPECT_EQ(tok.Encode("x\u0301"), (Ids{raw}));  // raw match, before NFC
}

TEST(TokenizerTest, Qwen35PatternAndByteLevelRegexAreHonoured) {
  TinyTokenizerJson t;
  t.pre_tokenizer["pretokenizers"][0]["pattern"]["Regex"] = std::string(kQwen35SplitPattern);
  t.merges = {{"\xCC", "\x81"}, {"e", "\u0301"}};
  // Under qwen35 "e" + U+0301 stays one piece (NFC would compose it, so turn NFC off).
  t.normalizer = nullptr;
  EXPECT_EQ(Build(t).Encode("e\u0301"), (Ids{t.Id("e\u0301")}));
  t.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(Build(t).Encode("hi"), ByteIds(" hi"));
}

TEST(TokenizerTest, ConfigGivesSpecialIdsTemplateAndBos) {
  TinyTokenizerJson t;
  const int eot = t.AddToken("<|endoftext|>", true);
  const int im_end = t.AddToken("<|im_end|>", true);
  nlohmann::json config = {{"bos_token", nullptr},
                           {"eos_token", "<|im_end|>"},
                           {"pad_token", {{"content", "<|endoftext|>"}}},
                           {"add_bos_token", false},
                           {"chat_template", "{{ messages }}"}};
  Tokenizer tok = Build(t, config);
  EXPECT_EQ(tok.eos_token_id(), im_end);
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.pad_token_id(), eot);
  EXPECT_FALSE(tok.bos_token_id().has_value());
  EXPECT_EQ(tok.bos_token(), "");
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
  EXPECT_EQ(tok.Encode("a"), ByteIds("a"));
  config["bos_token"] = "<|endoftext|>";
  config["add_bos_token"] = true;
  config["chat_template"] = nlohmann::json::array({{{"name", "tool_use"}, {"template", "T"}},
                                                   {{"name", "default"}, {"template", "D"}}});
  tok = Build(t, config);
  EXPECT_EQ(tok.Encode("a"), (Ids{eot, 'a'}));
  EXPECT_EQ(tok.Encode("a", /*add_special_tokens=*/false), ByteIds("a"));
  EXPECT_EQ(tok.chat_template(), "D");
}

TEST(TokenizerTest, TemplateProcessingAddsItsSpecialTokens) {
  TinyTokenizerJson t;
  const int bos = t.AddToken("<s>", true);
  const int eos = t.AddToken("</s>", true);
  t.post_processor = {{"type", "TemplateProcessing"},
                      {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}},
                                  {{"SpecialToken", {{"id", "</s>"}}}}}},
                      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {bos}}}},
                                          {"</s>", {{"id", "</s>"}, {"ids", {eos}}}}}}};
  EXPECT_EQ(Build(t).Encode("a"), (Ids{bos, 'a', eos}));
}

TEST(TokenizerTest, InvalidUtf8AndUnknownIdsAreErrorsThatSayWhere) {
  const Tokenizer tok = Build(TinyTokenizerJson{});
  try {
    tok.Encode("ok\xC3(");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (byte 0xC3 at offset 2"), std::string::npos) << e.what();
  }
  for (int32_t bad : {-1, 256, 1 << 30}) {
    try {
      tok.Decode(Ids{'a', bad});
      FAIL() << "expected an error for id " << bad;
    } catch (const vt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("token id " + std::to_string(bad) + " is out of range"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(tok.TokenBytes(300), vt::Error);
}

TEST(TokenizerTest, DecodingPartialCharactersGivesReplacementCharacters) {
  const Tokenizer tok = Build(TinyTokenizerJson{});
  const Ids euro = ByteIds("\u20AC");  // three byte tokens
  EXPECT_EQ(tok.Decode(euro), "\u20AC");
  EXPECT_EQ(tok.Decode(Ids{euro[0], euro[1]}), "\uFFFD");
  EXPECT_EQ(tok.Decode(Ids{euro[0], 'a'}), "\uFFFDa");
}

TEST(TokenizerTest, EveryByteStringRoundTripsWhenValid) {
  const Tokenizer tok = Build(TinyTokenizerJson{});
  using namespace std::string_literals;
  const std::string text = "nul\0, tab\t, del\x7F, \u00A0, \u2028, \U0001F600 end"s;
  EXPECT_EQ(tok.Decode(tok.Encode(text)), text);
}

}  // namespace
}  // namespace vllm
