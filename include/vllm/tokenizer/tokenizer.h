// vllm::Tokenizer: byte-level BPE (GPT-2 style, as used by Qwen2/Qwen3/Qwen3.5) with the
// semantics of HF `tokenizers`, built from an HF tokenizer.json (+ tokenizer_config.json)
// or from GGUF tokenizer metadata.
//
// Encoding: raw text -> added tokens found and kept whole (<|im_start|>, <think>, ...)
// -> each stretch between them Unicode-normalised (NFC for Qwen) -> cut by the split
// regex -> each piece encoded by BPE on its bytes. Decoding: ids -> each token's bytes
// -> UTF-8 text (ill-formed bytes become U+FFFD, as HF does).
//
// A Tokenizer is immutable after construction, cheap to copy (shared state) and safe to
// use from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vllm {

struct ChatTemplateTokens;
struct GgufTokenizerData;
struct TokenizerSpec;

class Tokenizer {
 public:
  // An HF folder (tokenizer.json, optionally tokenizer_config.json and
  // chat_template.jinja) or a .gguf file.
  static Tokenizer FromPath(const std::filesystem::path& path);
  static Tokenizer FromHfDirectory(const std::filesystem::path& dir);
  // tokenizer.json and tokenizer_config.json contents (the config may be empty);
  // `source` names them in error messages.
  static Tokenizer FromHfJson(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                              const std::string& source);
  static Tokenizer FromGguf(const GgufTokenizerData& data);
  explicit Tokenizer(TokenizerSpec&& spec);

  // Token ids of `text` (valid UTF-8; otherwise throws, naming the byte offset). Added
  // and special tokens written in the text are recognised. `add_special_tokens` adds
  // what the tokenizer's configuration asks for (a BOS for some models; nothing for Qwen).
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const;

  // The text of `ids`; throws for an id that has no token, naming it.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The raw bytes one token stands for (possibly part of a UTF-8 character; empty for
  // unused GGUF slots); throws for an id that has no token.
  std::string_view TokenBytes(int32_t id) const;
  // Whether `id` names a token (unused GGUF slots included).
  bool HasToken(int32_t id) const;
  // Whether `id` is a special added token (skipped by skip_special_tokens).
  bool IsSpecial(int32_t id) const;
  // The id of a vocabulary spelling ("Ġthe") or an added token's content ("<|im_end|>").
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The vocabulary spelling or added-token content of `id`; throws for an id without one.
  std::string_view IdToToken(int32_t id) const;

  // Number of ids: the highest id + 1 (the model's embedding may have more rows).
  int32_t vocab_size() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  // The tokens' text, empty when the tokenizer has none (what chat templates see).
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  const std::string& pad_token() const;
  // The chat template source (Jinja), empty when the files carry none.
  const std::string& chat_template() const;
  // Where this tokenizer was loaded from, for messages.
  const std::string& source() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// The special tokens a chat template sees (bos_token, eos_token, pad_token): those the
// tokenizer has (chat_template.h).
ChatTemplateTokens ChatTemplateTokensOf(const Tokenizer& tokenizer);

}  // namespace vllm
