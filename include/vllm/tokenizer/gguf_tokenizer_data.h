// The tokenizer part of a GGUF file's metadata (keys tokenizer.ggml.* and
// tokenizer.chat_template), as plain values. Tokenizer::FromGguf builds a tokenizer from
// it; GgufTokenizerDataFromMetadata fills it from a GGUF file's metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vllm {

class GgufMetadata;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special tokens: <|im_start|>, <|endoftext|>
  kUserDefined = 4,  // added tokens that are not special: <think>, <tool_call>
  kUnused = 5,       // padding slots such as "[PAD151669]"
  kByte = 6,
};

struct GgufTokenizerData {
  std::string source;                 // the file, for error messages
  std::string model;                  // tokenizer.ggml.model: "gpt2" is supported
  std::string pre;                    // tokenizer.ggml.pre: "qwen2", "qwen35", ...
  std::vector<std::string> tokens;    // tokenizer.ggml.tokens, byte-level spelled
  std::vector<int32_t> token_types;   // tokenizer.ggml.token_type (GgufTokenType); may be empty
  std::vector<std::string> merges;    // tokenizer.ggml.merges: "left right"
  std::optional<int64_t> bos_token_id, eos_token_id, padding_token_id;
  bool add_bos_token = false;         // tokenizer.ggml.add_bos_token
  bool add_eos_token = false;         // tokenizer.ggml.add_eos_token
  std::string chat_template;          // tokenizer.chat_template
};

// Reads the keys above from a GGUF file's metadata; throws vt::Error naming the file
// and the key when one is missing (model, tokens) or of the wrong type.
GgufTokenizerData GgufTokenizerDataFromMetadata(const GgufMetadata& metadata);

}  // namespace vllm
