// TokenizerSpec from GGUF tokenizer metadata (tokenizer.ggml.*).
//
// Token types decide each id's role: NORMAL (and UNKNOWN, BYTE, UNDEFINED) entries
// form the BPE vocabulary, CONTROL entries are special added tokens, USER_DEFINED
// entries are added tokens that are not special, UNUSED entries (the "[PAD...]" slots
// that pad the vocabulary to the embedding size) decode to nothing. The Qwen
// pre-tokenizers normalise to NFC, as the HF tokenizer.json of those models does, so a
// GGUF and its HF folder encode text identically.
#include "tokenizer_spec.h"
#include "vllm/model_loader/gguf_metadata.h"
#include "vllm/tokenizer/gguf_tokenizer_data.h"
#include "vt/error.h"

namespace vllm {
namespace {

std::optional<int32_t> CheckedId(const GgufTokenizerData& data, const std::optional<int64_t>& id, const char* key) {
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(data.tokens.size())) {
    throw vt::Error(data.source + ": metadata key '" + key + "' = " + std::to_string(*id) +
                    " is not a token id (the vocabulary has " + std::to_string(data.tokens.size()) + " tokens)");
  }
  return static_cast<int32_t>(*id);
}

std::pair<std::string, std::string> SplitMerge(const GgufTokenizerData& data, size_t index) {
  const std::string& merge = data.merges[index];
  // The first space after the first character separates the two sides.
  const size_t space = merge.find(' ', 1);
  if (space == std::string::npos || space + 1 == merge.size()) {
    throw vt::Error(data.source + ": metadata key 'tokenizer.ggml.merges' entry " + std::to_string(index) + " ('" +
                    merge + "') is not two tokens separated by a space");
  }
  return {merge.substr(0, space), merge.substr(space + 1)};
}

void PlaceTokens(const GgufTokenizerData& data, TokenizerSpec& spec) {
  spec.vocab.reserve(data.tokens.size());
  for (size_t i = 0; i < data.tokens.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string& token = data.tokens[i];
    const auto type = data.token_types.empty() ? GgufTokenType::kNormal : static_cast<GgufTokenType>(data.token_types[i]);
    switch (type) {
      case GgufTokenType::kControl:
      case GgufTokenType::kUserDefined:
        spec.added_tokens.push_back({.id = id, .content = token, .special = type == GgufTokenType::kControl});
        break;
      case GgufTokenType::kUnused:
        spec.unused_slots.emplace_back(id, token);
        break;
      case GgufTokenType::kUndefined:
      case GgufTokenType::kNormal:
      case GgufTokenType::kUnknown:
      case GgufTokenType::kByte:
        spec.vocab.emplace_back(token, id);
        break;
      default:
        throw vt::Error(data.source + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                        std::to_string(data.token_types[i]) + " is not a token type (1..6)");
    }
  }
}

// Array values, with the key added to the value's own type error.
const GgufValue& ArrayValue(const GgufMetadata& metadata, const std::string& key) {
  const GgufValue& value = metadata.Get(key);
  if (!value.is_array()) {
    throw vt::Error(metadata.source() + ": metadata key '" + key + "' is " + value.TypeInWords() +
                    ", expected an array");
  }
  return value;
}

std::vector<std::string> StringArray(const GgufMetadata& metadata, const std::string& key) {
  const GgufValue& value = ArrayValue(metadata, key);
  try {
    return value.AsStringArray();
  } catch (const vt::Error& e) {  // "is an array of u32, expected ..."
    throw vt::Error(metadata.source() + ": metadata key '" + key + "' " + e.what());
  }
}

std::vector<int32_t> TokenTypes(const GgufMetadata& metadata) {
  const std::string key = "tokenizer.ggml.token_type";
  if (!metadata.Has(key)) return {};
  std::vector<int32_t> types;
  for (int64_t type : metadata.GetIntArray(key)) {
    if (type < 0 || type > static_cast<int64_t>(GgufTokenType::kByte)) {
      throw vt::Error(metadata.source() + ": metadata key '" + key + "' holds " + std::to_string(type) +
                      ", which is not a token type (0..6)");
    }
    types.push_back(static_cast<int32_t>(type));
  }
  return types;
}

}  // namespace

GgufTokenizerData GgufTokenizerDataFromMetadata(const GgufMetadata& metadata) {
  GgufTokenizerData data;
  data.source = metadata.source();
  data.model = metadata.GetString("tokenizer.ggml.model");
  // llama.cpp also falls back to its "default" (GPT-2) pre-tokenizer when the key is absent.
  data.pre = metadata.FindString("tokenizer.ggml.pre").value_or("default");
  data.tokens = StringArray(metadata, "tokenizer.ggml.tokens");
  data.token_types = TokenTypes(metadata);
  if (metadata.Has("tokenizer.ggml.merges")) data.merges = StringArray(metadata, "tokenizer.ggml.merges");
  data.bos_token_id = metadata.FindInt("tokenizer.ggml.bos_token_id");
  data.eos_token_id = metadata.FindInt("tokenizer.ggml.eos_token_id");
  data.padding_token_id = metadata.FindInt("tokenizer.ggml.padding_token_id");
  data.add_bos_token = metadata.FindBool("tokenizer.ggml.add_bos_token").value_or(false);
  data.add_eos_token = metadata.FindBool("tokenizer.ggml.add_eos_token").value_or(false);
  data.chat_template = metadata.FindString("tokenizer.chat_template").value_or("");
  return data;
}

TokenizerSpec SpecFromGguf(const GgufTokenizerData& data) {
  if (data.model != "gpt2") {
    throw vt::Error(data.source + ": metadata key 'tokenizer.ggml.model' = '" + data.model +
                    "' is not supported (supported: gpt2, byte-level BPE)");
  }
  if (!data.token_types.empty() && data.token_types.size() != data.tokens.size()) {
    throw vt::Error(data.source + ": tokenizer.ggml.token_type has " + std::to_string(data.token_types.size()) +
                    " entries but tokenizer.ggml.tokens has " + std::to_string(data.tokens.size()));
  }
  TokenizerSpec spec;
  spec.source = data.source;
  PlaceTokens(data, spec);
  spec.merges.reserve(data.merges.size());
  for (size_t i = 0; i < data.merges.size(); ++i) spec.merges.push_back(SplitMerge(data, i));
  spec.pre_tokenizer.AddRegexSplit(SplitPatternForGgufPre(data.pre, data.source), data.source);
  if (data.pre != "gpt-2" && data.pre != "default") spec.normalizer = {UnicodeForm::kNFC};
  spec.bos_id = CheckedId(data, data.bos_token_id, "tokenizer.ggml.bos_token_id");
  spec.eos_id = CheckedId(data, data.eos_token_id, "tokenizer.ggml.eos_token_id");
  spec.pad_id = CheckedId(data, data.padding_token_id, "tokenizer.ggml.padding_token_id");
  if (data.add_bos_token) {
    if (!spec.bos_id) throw vt::Error(data.source + ": tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
    spec.prefix_ids = {*spec.bos_id};
  }
  if (data.add_eos_token) {
    if (!spec.eos_id) throw vt::Error(data.source + ": tokenizer.ggml.add_eos_token is true but there is no eos_token_id");
    spec.suffix_ids = {*spec.eos_id};
  }
  spec.chat_template = data.chat_template;
  return spec;
}

}  // namespace vllm
