// Everything a Tokenizer is built from, whichever file it came from. The tokenizer.json
// reader (hf_tokenizer_json.cpp) and the GGUF reader (gguf_tokenizer.cpp) fill it; the
// Tokenizer checks and indexes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "added_tokens.h"
#include "normalizer.h"
#include "pre_tokenizer.h"

namespace vllm {

struct TokenizerSpec {
  std::string source;  // the file(s), for error messages
  std::vector<std::pair<std::string, int32_t>> vocab;  // byte-level spelling, id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool ignore_merges = false;
  std::vector<AddedToken> added_tokens;
  std::vector<std::pair<int32_t, std::string>> unused_slots;  // id, spelling; they decode to nothing
  std::vector<UnicodeForm> normalizer;
  PreTokenizer pre_tokenizer;
  std::vector<int32_t> prefix_ids, suffix_ids;  // added around Encode's output on request
  std::optional<int32_t> bos_id, eos_id, pad_id;
  std::string chat_template;
};

// Readers of the two formats; they throw vt::Error naming the file and the key. The
// files are named `folder`/tokenizer.json and `folder`/tokenizer_config.json in errors;
// an empty config text means there is none.
TokenizerSpec SpecFromHfJson(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                             const std::string& folder);
struct GgufTokenizerData;
TokenizerSpec SpecFromGguf(const GgufTokenizerData& data);

}  // namespace vllm
