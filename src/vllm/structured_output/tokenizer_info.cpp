#include "vllm/structured_output/tokenizer_info.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "vllm/tokenizer/tokenizer.h"

namespace vllm::structured_output {

void ApplyTokenBitmask(std::span<float> logits, std::span<const uint32_t> bitmask) {
  if (bitmask.size() * 32 < logits.size()) {
    throw std::invalid_argument("ApplyTokenBitmask: a bitmask of " + std::to_string(bitmask.size()) +
                                " words covers " + std::to_string(bitmask.size() * 32) +
                                " tokens, fewer than the logits row's " + std::to_string(logits.size()));
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t word = bitmask[w];
    if (word == ~0u) continue;
    const size_t end = std::min(n, w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (!((word >> (i & 31)) & 1u)) logits[i] = kNegInf;
    }
  }
}

TokenizerInfo::TokenizerInfo(std::vector<std::string> token_bytes, std::vector<int32_t> stop_token_ids,
                             const std::vector<int32_t>& special_token_ids, int32_t vocab_size)
    : vocab_size_(vocab_size), token_bytes_(std::move(token_bytes)), stop_token_ids_(std::move(stop_token_ids)) {
  if (vocab_size_ < static_cast<int32_t>(token_bytes_.size())) {
    throw std::invalid_argument("TokenizerInfo: vocab_size " + std::to_string(vocab_size_) + " is smaller than the " +
                                std::to_string(token_bytes_.size()) + " tokens given");
  }
  for (int32_t id : stop_token_ids_) {
    if (id < 0 || id >= vocab_size_) {
      throw std::invalid_argument("TokenizerInfo: stop token id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(vocab_size_));
    }
  }
  normal_mask_.assign(bitmask_words(), 0);
  for (int32_t id = 0; id < num_token_bytes(); ++id) {
    if (!token_bytes_[id].empty()) BitmaskSet(normal_mask_, id);
  }
  for (int32_t id : special_token_ids) {
    if (id >= 0 && id < vocab_size_) normal_mask_[id >> 5] &= ~(1u << (id & 31));
  }
  for (int32_t id : stop_token_ids_) normal_mask_[id >> 5] &= ~(1u << (id & 31));

  for (int32_t id = 0; id < num_token_bytes(); ++id) {
    if (IsNormal(id)) sorted_ids_.push_back(id);
  }
  std::sort(sorted_ids_.begin(), sorted_ids_.end(),
            [&](int32_t a, int32_t b) { return token_bytes_[a] < token_bytes_[b]; });
  sorted_lcp_.assign(sorted_ids_.size(), 0);
  for (size_t i = 1; i < sorted_ids_.size(); ++i) {
    const std::string& a = token_bytes_[sorted_ids_[i - 1]];
    const std::string& b = token_bytes_[sorted_ids_[i]];
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    sorted_lcp_[i] = static_cast<int32_t>(l);
  }
  // first_byte_begin_[b]: the first sorted index whose first byte is >= b.
  size_t i = 0;
  for (int b = 0; b <= 256; ++b) {
    while (i < sorted_ids_.size() && static_cast<uint8_t>(token_bytes_[sorted_ids_[i]][0]) < b) ++i;
    first_byte_begin_[b] = static_cast<int32_t>(b == 256 ? sorted_ids_.size() : i);
  }
}

bool TokenizerInfo::IsStop(int32_t id) const {
  return std::find(stop_token_ids_.begin(), stop_token_ids_.end(), id) != stop_token_ids_.end();
}

std::shared_ptr<const TokenizerInfo> TokenizerInfo::FromTokenizer(const Tokenizer& tokenizer,
                                                                 std::vector<int32_t> stop_token_ids,
                                                                 int32_t vocab_size) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<int32_t> special;
  for (int32_t id = 0; id < n; ++id) {
    if (!tokenizer.HasToken(id)) continue;
    if (tokenizer.IsSpecial(id)) {
      special.push_back(id);
      continue;
    }
    bytes[id] = std::string(tokenizer.TokenBytes(id));
  }
  return std::make_shared<const TokenizerInfo>(std::move(bytes), std::move(stop_token_ids), special,
                                               vocab_size < 0 ? n : vocab_size);
}

}  // namespace vllm::structured_output
