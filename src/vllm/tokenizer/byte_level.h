// GPT-2's byte-level alphabet: every byte gets a printable code point so that a BPE
// vocabulary can be written as text. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for
// themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are mapped, in
// increasing order, to U+0100, U+0101, ... (so the space 0x20 is U+0120 'Ġ' and the
// newline 0x0A is U+010A 'Ċ').
#pragma once

#include <string>
#include <string_view>

namespace vllm::byte_level {

// The byte-level spelling (UTF-8) of a raw byte string: "hi there" -> "hiĠthere".
std::string Encode(std::string_view bytes);

// The bytes a vocabulary entry stands for. As HF's ByteLevel decoder does, a token made
// only of byte-level characters maps back to its bytes; any other token (for example an
// added token such as "<|im_start|>" with a character outside the alphabet) is taken as
// its own UTF-8 bytes.
std::string DecodeToken(std::string_view token);

}  // namespace vllm::byte_level
