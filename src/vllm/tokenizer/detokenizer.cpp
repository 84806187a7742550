#include "vllm/tokenizer/detokenizer.h"

#include "utf8.h"

namespace vllm {

IncrementalDetokenizer::IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens,
                                               std::span<const int32_t> prompt_ids)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {
  // Only the prompt's last few tokens can hold the start of its last character.
  std::string tail;
  const size_t first = prompt_ids.size() > 4 ? prompt_ids.size() - 4 : 0;
  for (size_t i = first; i < prompt_ids.size(); ++i) {
    if (prompt_ids[i] < 0 || tokenizer_.HasToken(prompt_ids[i])) tail.append(tokenizer_.TokenBytes(prompt_ids[i]));
  }
  held_ = tail.substr(tail.size() - utf8::IncompleteTailLength(tail));
}

std::string IncrementalDetokenizer::TakeFinalText() {
  const size_t final_bytes = held_.size() - utf8::IncompleteTailLength(held_);
  std::string text = utf8::DecodeLossy(std::string_view(held_).substr(0, final_bytes));
  held_.erase(0, final_bytes);
  output_text_.append(text);
  return text;
}

std::string IncrementalDetokenizer::Add(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (id >= 0 && !tokenizer_.HasToken(id)) continue;  // padding rows past the vocabulary
    if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) continue;
    held_.append(tokenizer_.TokenBytes(id));
  }
  return TakeFinalText();
}

std::string IncrementalDetokenizer::Finish() {
  std::string text = utf8::DecodeLossy(held_);
  held_.clear();
  output_text_.append(text);
  return text;
}

}  // namespace vllm
