// NFC of a text straight from utf8proc: what decode(encode(text)) must give back
// (the tokenizer normalizes its input to NFC before splitting it).
#pragma once

#include <utf8proc.h>

#include <cstdlib>
#include <string>

namespace vllm::testing {

inline std::string Nfc(const std::string& text) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace vllm::testing
