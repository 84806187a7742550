// UTF-8 scanning shared by the tokenizer and the detokenizer.
//
// Validation is strict (RFC 3629): no overlong forms, no surrogates, nothing above
// U+10FFFF. Lossy decoding replaces each "maximal subpart" of an ill-formed sequence
// with one U+FFFD, the Unicode recommended practice that Rust's String::from_utf8_lossy
// (used by HF tokenizers' decoders) and Python's errors="replace" also follow, so our
// decoded text matches theirs byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vllm::utf8 {

// What starts at one byte position of a byte string.
struct Sequence {
  enum Kind { kValid, kInvalid, kTruncated } kind;
  // kValid: the encoded character's length. kInvalid: the maximal subpart's length (>= 1),
  // to be replaced by one U+FFFD. kTruncated: the bytes up to the end of the string, a
  // valid beginning of a character that needs more bytes.
  size_t length;
  char32_t code_point;  // kValid only
};

Sequence ScanSequence(std::string_view bytes, size_t pos);

// The length (1 to 4) of the character that a byte `lead` starts, 0 if no character
// starts with it; the bytes that follow are not looked at.
int LeadLength(uint8_t lead);

// The offset of the first byte that is not part of a well-formed character, if any.
std::optional<size_t> FindInvalid(std::string_view bytes);

// `bytes` as valid UTF-8, ill-formed parts replaced by U+FFFD.
std::string DecodeLossy(std::string_view bytes);

// The length of a trailing incomplete (but so far valid) character: 0 to 3 bytes that
// a later byte may complete.
size_t IncompleteTailLength(std::string_view bytes);

// Appends the UTF-8 encoding of `cp` (a valid scalar value).
void AppendCodePoint(std::string& out, char32_t cp);

}  // namespace vllm::utf8
