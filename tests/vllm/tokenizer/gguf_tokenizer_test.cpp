// Tokenizers from GGUF tokenizer metadata: token types decide each id's role, the
// pre-tokenizer name picks the split regex, errors name the file and the key; and a
// GGUF written from the real Qwen3 tokenizer encodes exactly like HF (expected ids).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "vllm/model_loader/gguf_writer.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vllm/testing/shared_data.h"
#include "vllm/tokenizer/byte_level.h"
#include "vllm/tokenizer/gguf_tokenizer_data.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vt/error.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

// 256 byte tokens, the merge "a"+"b" (id 256), then <|im_end|> (control), <think>
// (user defined) and a padding slot (unused).
GgufTokenizerData TinyGguf() {
  GgufTokenizerData d;
  d.source = "tiny.gguf";
  d.model = "gpt2";
  d.pre = "qwen2";
  for (int b = 0; b < 256; ++b) d.tokens.push_back(byte_level::Encode(std::string(1, static_cast<char>(b))));
  d.tokens.insert(d.tokens.end(), {"ab", "<|im_end|>", "<think>", "[PAD259]"});
  d.token_types.assign(256, static_cast<int32_t>(GgufTokenType::kNormal));
  for (GgufTokenType t : {GgufTokenType::kNormal, GgufTokenType::kControl, GgufTokenType::kUserDefined,
                          GgufTokenType::kUnused}) {
    d.token_types.push_back(static_cast<int32_t>(t));
  }
  d.merges = {"a b"};
  d.eos_token_id = 257;
  d.padding_token_id = 259;
  d.chat_template = "{{ x }}";
  return d;
}

std::string ErrorOf(const GgufTokenizerData& d) {
  try {
    Tokenizer::FromGguf(d);
  } catch (const vt::Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "message: " << (message)

TEST(GgufTokenizerTest, TokenTypesGiveEachIdItsRole) {
  const Tokenizer tok = Tokenizer::FromGguf(TinyGguf());
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.Encode("ab<think>e\u0301<|im_end|>"), (Ids{256, 258, 0xC3, 0xA9, 257}));  // NFC for qwen2
  EXPECT_TRUE(tok.IsSpecial(257));
  EXPECT_FALSE(tok.IsSpecial(258));
  EXPECT_EQ(tok.Decode(Ids{256, 258, 257, 259}), "ab<think><|im_end|>");  // the unused slot decodes to nothing
  EXPECT_EQ(tok.Decode(Ids{256, 258, 257}, true), "ab<think>");
  EXPECT_EQ(tok.Encode("[PAD259]"), tok.Encode("[PAD259]", false));
  EXPECT_NE(tok.Encode("[PAD259]"), (Ids{259}));  // never produced by encoding
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.chat_template(), "{{ x }}");
  EXPECT_FALSE(tok.bos_token_id().has_value());
}

TEST(GgufTokenizerTest, AddBosTokenPrependsIt) {
  GgufTokenizerData d = TinyGguf();
  d.bos_token_id = 257;
  d.add_bos_token = true;
  EXPECT_EQ(Tokenizer::FromGguf(d).Encode("a"), (Ids{257, 'a'}));
  EXPECT_EQ(Tokenizer::FromGguf(d).Encode("a", false), (Ids{'a'}));
}

TEST(GgufTokenizerTest, MalformedDataIsNamed) {
  GgufTokenizerData d = TinyGguf();
  d.model = "llama";
  EXPECT_ERROR_HAS(ErrorOf(d), "tiny.gguf: metadata key 'tokenizer.ggml.model' = 'llama' is not supported");
  d = TinyGguf();
  d.pre = "mystery";
  EXPECT_ERROR_HAS(ErrorOf(d), "tiny.gguf: tokenizer.ggml.pre = 'mystery' is not a known pre-tokenizer");
  d = TinyGguf();
  d.token_types.pop_back();
  EXPECT_ERROR_HAS(ErrorOf(d), "tokenizer.ggml.token_type has 259 entries but tokenizer.ggml.tokens has 260");
  d = TinyGguf();
  d.token_types[3] = 9;
  EXPECT_ERROR_HAS(ErrorOf(d), "tokenizer.ggml.token_type[3] = 9 is not a token type");
  d = TinyGguf();
  d.merges = {"ab"};
  EXPECT_ERROR_HAS(ErrorOf(d), "'tokenizer.ggml.merges' entry 0 ('ab') is not two tokens");
  d = TinyGguf();
  d.merges = {"a q"};
  d.tokens[256] = "xy";
  EXPECT_ERROR_HAS(ErrorOf(d), "needs the token 'aq'");
  d = TinyGguf();
  d.eos_token_id = 4000;
  EXPECT_ERROR_HAS(ErrorOf(d), "metadata key 'tokenizer.ggml.eos_token_id' = 4000 is not a token id");
  d = TinyGguf();
  d.tokens[256] = "a";
  EXPECT_ERROR_HAS(ErrorOf(d), "tiny.gguf: vocabulary token 'a' has two ids, 97 and 256");
}

TEST(GgufTokenizerTest, MetadataAdapterReadsKeysAndNamesWrongTypes) {
  const GgufTokenizerData tiny = TinyGguf();
  GgufMetadata m("tiny.gguf");
  m.Add("tokenizer.ggml.model", GgufValue::String("gpt2"));
  m.Add("tokenizer.ggml.pre", GgufValue::String("qwen35"));
  m.Add("tokenizer.ggml.tokens", GgufValue::StringArray(tiny.tokens));
  m.Add("tokenizer.ggml.token_type",
        GgufValue::IntArray(GgufType::kInt32, std::vector<int64_t>(tiny.token_types.begin(), tiny.token_types.end())));
  m.Add("tokenizer.ggml.merges", GgufValue::StringArray(tiny.merges));
  m.Add("tokenizer.ggml.eos_token_id", GgufValue::U32(257));
  m.Add("tokenizer.ggml.add_bos_token", GgufValue::Bool(false));
  m.Add("tokenizer.chat_template", GgufValue::String("T"));
  const GgufTokenizerData d = GgufTokenizerDataFromMetadata(m);
  EXPECT_EQ(d.source, "tiny.gguf");
  EXPECT_EQ(d.pre, "qwen35");
  EXPECT_EQ(d.tokens, tiny.tokens);
  EXPECT_EQ(d.token_types, tiny.token_types);
  EXPECT_EQ(d.merges, tiny.merges);
  EXPECT_EQ(d.eos_token_id, 257);
  EXPECT_FALSE(d.bos_token_id.has_value());
  EXPECT_EQ(d.chat_template, "T");
  m.Set("tokenizer.ggml.tokens", GgufValue::IntArray(GgufType::kUint32, {1, 2}));
  try {
    GgufTokenizerDataFromMetadata(m);
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "tiny.gguf: metadata key 'tokenizer.ggml.tokens' is");
  }
  m.Remove("tokenizer.ggml.tokens");
  EXPECT_THROW(GgufTokenizerDataFromMetadata(m), vt::Error);
}

// The real Qwen3 tokenizer through GGUF: tokenizer.ggml.* as the HF -> GGUF converter
// writes them (vocabulary padded to the embedding's 151936 rows), read back by FromPath,
// with the "qwen2" pre-tokenizer (Qwen3's own) and with "qwen35" (compared with HF on
// the same vocabulary with the Qwen3.5 split regex).
void ExpectQwen3GgufEncodesLikeHf(const std::string& pre, const std::string& expected_file) {
  const std::filesystem::path hf_dir = std::filesystem::path(VT_SHARED_DATA_DIR) / "tokenizers/qwen3";
  const std::filesystem::path expected_path = std::filesystem::path(VT_TEST_DATA_DIR) / "tokenizer" / expected_file;
  if (!std::filesystem::exists(hf_dir / "tokenizer.json")) GTEST_SKIP() << testing::MissingSharedData(hf_dir / "tokenizer.json");
  if (!std::filesystem::exists(expected_path)) GTEST_SKIP() << expected_path << " is absent";
  GgufWriter writer;
  ASSERT_TRUE(AddHfTokenizerToGguf(hf_dir.string(), pre, 151936, writer.metadata()));
  const std::filesystem::path gguf_path =
      std::filesystem::temp_directory_path() / ("qwen3_tokenizer_" + pre + "_" + std::to_string(::getpid()) + ".gguf");
  writer.Write(gguf_path.string());
  const Tokenizer from_gguf = Tokenizer::FromPath(gguf_path);
  std::filesystem::remove(gguf_path);

  EXPECT_EQ(from_gguf.vocab_size(), 151936);
  EXPECT_EQ(from_gguf.eos_token_id(), 151645);
  EXPECT_EQ(from_gguf.Decode(Ids{9707, 151700}), "Hello");  // padding slots decode to nothing
  EXPECT_FALSE(from_gguf.chat_template().empty());
  std::ifstream in(expected_path);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const nlohmann::json row = nlohmann::json::parse(line);
    const Ids expected = row.at("ids").get<Ids>();
    EXPECT_EQ(from_gguf.Encode(row.at("text").get<std::string>()), expected) << pre << " line " << lines + 1;
    EXPECT_EQ(from_gguf.Decode(expected), row.at("decoded").get<std::string>()) << pre << " line " << lines + 1;
  }
  EXPECT_GT(lines, 50);
}

TEST(GgufTokenizerTest, Qwen3GgufEncodesLikeHf) { ExpectQwen3GgufEncodesLikeHf("qwen2", "qwen3_expected.jsonl"); }

TEST(GgufTokenizerTest, Qwen35PreTokenizerEncodesLikeHf) {
  ExpectQwen3GgufEncodesLikeHf("qwen35", "qwen35_regex_expected.jsonl");
}

}  // namespace
}  // namespace vllm
