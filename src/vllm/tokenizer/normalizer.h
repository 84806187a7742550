// Unicode normalisation of the text between added tokens (HF "normalizer"), by utf8proc.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace vllm {

enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };

// `text` (valid UTF-8) put through each form in turn.
std::string NormalizeUnicode(std::string_view text, std::span<const UnicodeForm> forms);

}  // namespace vllm
