// Malformed tokenizer.json / tokenizer_config.json: each error names the file and the
// key and says what was expected, instead of crashing or loading something wrong.
#include <gtest/gtest.h>

#include <functional>

#include "tiny_tokenizer.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vt/error.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::TinyTokenizerJson;

// Loads the tiny tokenizer after `edit` and returns the error message ("" if none).
std::string LoadError(const std::function<void(json&)>& edit, const json& config = nullptr) {
  TinyTokenizerJson t;
  t.merges = {{"a", "b"}};
  json doc = t.ToJson();
  edit(doc);
  try {
    Tokenizer::FromHfJson(doc.dump(), config.is_null() ? "" : config.dump(), "models/m");
  } catch (const vt::Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "message: " << (message)

TEST(TokenizerJsonErrorsTest, MissingOrWronglyTypedModelKeys) {
  EXPECT_ERROR_HAS(LoadError([](json& d) { d.erase("model"); }), "models/m/tokenizer.json: key 'model' is missing");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"].erase("vocab"); }), "key 'model.vocab' is missing");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"].erase("merges"); }), "key 'model.merges' is missing");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["vocab"] = json::array(); }),
                   "key 'model.vocab' must be an object, found array");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["merges"] = "a b"; }),
                   "key 'model.merges' must be an array, found string");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["vocab"]["a"] = "zero"; }),
                   "key 'model.vocab[\"a\"]' must be an integer, found string");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["type"] = "WordPiece"; }),
                   "key 'model.type' 'WordPiece' is not supported");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["byte_fallback"] = true; }), "key 'model.byte_fallback'");
}

TEST(TokenizerJsonErrorsTest, BadMerges) {
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["merges"][0] = json::array({"a", "zz"}); }),
                   "model.merges[0] = 'a zz' needs the token 'zz', which is not in model.vocab");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["merges"][0] = "a b c"; }),
                   "key 'model.merges[0]' must be two tokens separated by one space");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["merges"][0] = 7; }),
                   "key 'model.merges[0]' must be a string \"left right\" or an array of two strings, found number");
  EXPECT_EQ(LoadError([](json& d) { d["model"]["merges"][0] = "a b"; }), "");  // the older spelling is fine
}

TEST(TokenizerJsonErrorsTest, VocabularyHolesAndClashes) {
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["vocab"].erase("\xC4\x8A"); }),
                   "model.vocab has no entry for byte 0x0A");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["vocab"]["ab"] = 3; }), "which is already the id of");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["model"]["vocab"]["ab"] = -4; }), "has id -4");
}

TEST(TokenizerJsonErrorsTest, UnsupportedPipelineParts) {
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["normalizer"] = {{"type", "Lowercase"}}; }),
                   "key 'normalizer.type' normalizer 'Lowercase' is not supported");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
                   "key 'pre_tokenizer.pretokenizers[0].behavior' 'Removed' is not supported");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(a"}}; }),
                   "models/m/tokenizer.json (pre_tokenizer.pretokenizers[0].pattern): the split regex does not compile");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["decoder"] = {{"type", "WordPiece"}}; }),
                   "key 'decoder.type' 'WordPiece' is not supported");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["post_processor"] = {{"type", "BertProcessing"}}; }),
                   "post-processor 'BertProcessing' is not supported");
}

TEST(TokenizerJsonErrorsTest, BadAddedTokensAndConfig) {
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["added_tokens"] = {{{"id", 300}}}; }),
                   "key 'added_tokens[0].content' is missing");
  EXPECT_ERROR_HAS(LoadError([](json& d) { d["added_tokens"] = {{{"id", "x"}, {"content", "<a>"}}}; }),
                   "key 'added_tokens[0].id' must be an integer, found string");
  EXPECT_ERROR_HAS(LoadError([](json&) {}, {{"eos_token", "<nope>"}}),
                   "models/m/tokenizer_config.json: key 'eos_token' names '<nope>', which is neither");
  EXPECT_ERROR_HAS(LoadError([](json&) {}, {{"add_bos_token", true}}), "key 'add_bos_token' is true but bos_token");
  EXPECT_ERROR_HAS(LoadError([](json&) {}, {{"added_tokens_decoder", {{"abc", {{"content", "<a>"}}}}}}),
                   "key 'added_tokens_decoder.abc' is not a token id");
  EXPECT_ERROR_HAS(LoadError([](json&) {}, {{"chat_template", 5}}), "key 'chat_template' must be a string or a list");
  EXPECT_ERROR_HAS(LoadError([](json&) {}, {{"split_special_tokens", true}}), "key 'split_special_tokens' true");
}

TEST(TokenizerJsonErrorsTest, NotJsonAtAll) {
  try {
    Tokenizer::FromHfJson("{\"model\": ", "", "models/m");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "models/m/tokenizer.json: not valid JSON");
  }
  try {
    Tokenizer::FromHfJson("[1, 2]", "", "models/m");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "models/m/tokenizer.json: must hold a JSON object, found array");
  }
  try {
    Tokenizer::FromHfDirectory("/nonexistent/folder");
    FAIL() << "expected an error";
  } catch (const vt::Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "/nonexistent/folder: no tokenizer.json in this folder");
  }
}

}  // namespace
}  // namespace vllm
