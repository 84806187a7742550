// The vocabulary as the constrained decoder sees it: each token id's bytes, prepared
// once per tokenizer (docs/structured_output.md §3), and the token bitmask helpers.
//
// A token bitmask has one bit per token id of the model's vocabulary, packed into
// ceil(vocab_size / 32) uint32 words: id i is bit (i % 32) of word i / 32, set when
// the token may be sampled.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace vllm {
class Tokenizer;
}

namespace vllm::structured_output {

inline int32_t BitmaskWords(int32_t vocab_size) { return (vocab_size + 31) / 32; }
inline bool BitmaskTest(std::span<const uint32_t> mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }
inline void BitmaskSet(std::span<uint32_t> mask, int32_t id) { mask[id >> 5] |= 1u << (id & 31); }

// logits[i] = -inf wherever bit i of `bitmask` is clear. `bitmask` must cover the row
// (32 * words >= logits.size()); throws otherwise. One row of the sampler's [num_reqs,
// vocab] logits; the device version can apply the same words later.
void ApplyTokenBitmask(std::span<float> logits, std::span<const uint32_t> bitmask);

class TokenizerInfo {
 public:
  // token_bytes[id]: what id decodes to, byte for byte. Ids in `stop_token_ids` are
  // allowed only where the grammar can end; ids in `special_token_ids` and ids with no
  // bytes are never allowed. `vocab_size` is the mask width (the model's vocabulary,
  // which may be larger than token_bytes: the extra ids are never allowed).
  TokenizerInfo(std::vector<std::string> token_bytes, std::vector<int32_t> stop_token_ids,
                const std::vector<int32_t>& special_token_ids, int32_t vocab_size);

  // From the engine's tokenizer: special added tokens are excluded; `vocab_size` -1
  // means the tokenizer's.
  static std::shared_ptr<const TokenizerInfo> FromTokenizer(const Tokenizer& tokenizer,
                                                            std::vector<int32_t> stop_token_ids,
                                                            int32_t vocab_size = -1);

  int32_t vocab_size() const { return vocab_size_; }
  int32_t bitmask_words() const { return BitmaskWords(vocab_size_); }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }
  int32_t num_token_bytes() const { return static_cast<int32_t>(token_bytes_.size()); }
  const std::vector<int32_t>& stop_token_ids() const { return stop_token_ids_; }
  bool IsStop(int32_t id) const;
  // Ids that stand for text: not stop, not special, with bytes.
  bool IsNormal(int32_t id) const { return id >= 0 && id < vocab_size_ && BitmaskTest(normal_mask_, id); }
  std::span<const uint32_t> normal_mask() const { return normal_mask_; }

  // The normal tokens sorted by their bytes, and for each the length of the prefix it
  // shares with the one before, so that a walk over them visits each shared prefix
  // once (a trie walked in order).
  std::span<const int32_t> sorted_ids() const { return sorted_ids_; }
  std::span<const int32_t> sorted_lcp() const { return sorted_lcp_; }
  // sorted_ids()[first_byte_begin(b) .. first_byte_begin(b + 1)) start with byte b.
  int32_t first_byte_begin(int b) const { return first_byte_begin_[b]; }

 private:
  int32_t vocab_size_;
  std::vector<std::string> token_bytes_;
  std::vector<int32_t> stop_token_ids_;
  std::vector<uint32_t> normal_mask_;
  std::vector<int32_t> sorted_ids_;
  std::vector<int32_t> sorted_lcp_;
  std::array<int32_t, 257> first_byte_begin_{};
};

}  // namespace vllm::structured_output
