// TokenizerSpec from GGUF tokenizer metadata (tokenizer.ggml.*).
//
// Token types decide each id's role: NORMAL (and UNKNOWN, BYTE, UNDEFINED) entries
// form the BPE vocabulary, CONTROL entries are special added tokens, USER_DEFINED
// entries are added tokens that are not special, UNUSED entries (the "[PAD...]" slots
// that pad the vocabulary to the embedding size) decode to nothing. The Qwen
// pre-tokenizers normalise to NFC, as the HF tokenizer.json of those models does, so a
// GGUF and its HF folder encode text identically.
#include <unordered_map>

#include "tokenizer_spec.h"
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
  std::unordered_map<std::string, int32_t>& vocab = spec.vocab;
  vocab.reserve(data.tokens.size());
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
        if (auto [it, inserted] = vocab.emplace(token, id); !inserted) {
          throw vt::Error(data.source + ": tokenizer.ggml.tokens[" + std::to_string(i) + "] = '" + token +
                          "' repeats tokenizer.ggml.tokens[" + std::to_string(it->second) + "]");
        }
        break;
      default:
        throw vt::Error(data.source + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                        std::to_string(data.token_types[i]) + " is not a token type (1..6)");
    }
  }
}

}  // namespace

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
