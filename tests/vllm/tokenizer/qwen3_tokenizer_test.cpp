// The real Qwen3 tokenizer (not in the repository: vllm/testing/shared_data.h):
// encodings identical to HF `tokenizers` on the corpus (expected ids produced by
// tools/oracle/tokenizer_reference.py), also with the Qwen3.5 split regex,
// decode(encode(x)) == NFC(x), and streaming decoding. Tests skip, naming the missing
// file, when the tokenizer or the expected files are absent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "nfc_reference.h"
#include "vllm/testing/shared_data.h"
#include "vllm/tokenizer/detokenizer.h"
#include "vllm/tokenizer/pre_tokenizer.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vllm/tokenizer/tokenizer_spec.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

const std::filesystem::path kQwen3Dir = std::filesystem::path(VT_SHARED_DATA_DIR) / "tokenizers/qwen3";
const std::filesystem::path kDataDir = std::filesystem::path(VT_TEST_DATA_DIR) / "tokenizer";

std::vector<json> ReadJsonLines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

using testing::Nfc;

class Qwen3TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(kQwen3Dir / "tokenizer.json")) {
      tokenizer_ = new Tokenizer(Tokenizer::FromHfDirectory(kQwen3Dir));
    }
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << testing::MissingSharedData(kQwen3Dir / "tokenizer.json");
  }
  // Compares Encode with the ids of an expected file; skips if the file is absent.
  static void ExpectIdsOfFile(const Tokenizer& tokenizer, const std::string& file_name) {
    const std::filesystem::path path = kDataDir / file_name;
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << path << " is absent: run tools/oracle/tokenizer_reference.py on a machine with HF tokenizers";
    }
    const std::vector<json> expected = ReadJsonLines(path);
    ASSERT_GT(expected.size(), 50u);
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string text = expected[i].at("text");
      EXPECT_EQ(tokenizer.Encode(text, false), expected[i].at("ids").get<Ids>()) << file_name << " line " << i + 1;
      EXPECT_EQ(tokenizer.Decode(expected[i].at("ids").get<Ids>()), expected[i].at("decoded").get<std::string>())
          << file_name << " line " << i + 1;
      EXPECT_EQ(tokenizer.Decode(expected[i].at("ids").get<Ids>(), true),
                expected[i].at("decoded_skip_special").get<std::string>())
          << file_name << " line " << i + 1;
    }
  }
  static Tokenizer* tokenizer_;
};
Tokenizer* Qwen3TokenizerTest::tokenizer_ = nullptr;

TEST_F(Qwen3TokenizerTest, LoadsSpecialTokensAndTheChatTemplate) {
  const Tokenizer& tok = *tokenizer_;
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.eos_token_id(), 151645);
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.pad_token_id(), 151643);
  EXPECT_FALSE(tok.bos_token_id().has_value());
  EXPECT_NE(tok.chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_TRUE(tok.IsSpecial(151644));    // <|im_start|>
  EXPECT_FALSE(tok.IsSpecial(151667));   // <think> is added but not special
  EXPECT_EQ(tok.TokenToId("<think>"), 151667);
}

TEST_F(Qwen3TokenizerTest, EncodesKnownStrings) {
  const Tokenizer& tok = *tokenizer_;
  EXPECT_EQ(tok.Encode("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(tok.Encode("<|im_start|>user\n"), (Ids{151644, 872, 198}));
  EXPECT_EQ(tok.Encode("\u4F60\u597D"), (Ids{108386}));
  EXPECT_EQ(tok.Encode(" Hello"), (Ids{21927}));
}

TEST_F(Qwen3TokenizerTest, MatchesHfTokenizersOnTheCorpus) { ExpectIdsOfFile(*tokenizer_, "qwen3_expected.jsonl"); }

TEST_F(Qwen3TokenizerTest, MatchesHfTokenizersWithTheQwen35SplitRegex) {
  std::ifstream in(kQwen3Dir / "tokenizer.json");
  json doc = json::parse(in);
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = std::string(kQwen35SplitPattern);
  std::ifstream config(kQwen3Dir / "tokenizer_config.json");
  const std::string config_text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  ExpectIdsOfFile(Tokenizer::FromHfJson(doc.dump(), config_text, "qwen3-with-qwen35-regex"),
                  "qwen35_regex_expected.jsonl");
}

TEST_F(Qwen3TokenizerTest, DecodeOfEncodeIsTheNfcText) {
  for (const json& line : ReadJsonLines(kDataDir / "corpus.jsonl")) {
    const std::string text = line.at("text");
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text)), Nfc(text)) << text.substr(0, 80);
  }
}

TEST_F(Qwen3TokenizerTest, StreamingOneTokenAtATimeGivesTheDecodedText) {
  for (const json& line : ReadJsonLines(kDataDir / "corpus.jsonl")) {
    const Ids ids = tokenizer_->Encode(line.at("text").get<std::string>());
    IncrementalDetokenizer detok(*tokenizer_, /*skip_special_tokens=*/false);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Add(id);
    EXPECT_EQ(detok.num_held_bytes(), 0u);
    streamed += detok.Finish();
    EXPECT_EQ(streamed, tokenizer_->Decode(ids));
  }
}

}  // namespace
}  // namespace vllm
