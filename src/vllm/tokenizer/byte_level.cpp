#include "byte_level.h"

#include <array>
#include <cstdint>

#include "utf8.h"

namespace vllm::byte_level {
namespace {

struct Alphabet {
  std::array<char32_t, 256> byte_to_cp;
  std::array<int16_t, 324> cp_to_byte;  // code points of the alphabet are < 256 + 68
};

bool StandsForItself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

const Alphabet& GetAlphabet() {
  static const Alphabet alphabet = [] {
    Alphabet a{};
    a.cp_to_byte.fill(-1);
    char32_t next_shifted = 0x100;
    for (int b = 0; b < 256; ++b) {
      a.byte_to_cp[b] = StandsForItself(b) ? static_cast<char32_t>(b) : next_shifted++;
      a.cp_to_byte[a.byte_to_cp[b]] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return alphabet;
}

}  // namespace

std::string Encode(std::string_view bytes) {
  const Alphabet& a = GetAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::AppendCodePoint(out, a.byte_to_cp[static_cast<uint8_t>(c)]);
  return out;
}

std::string DecodeToken(std::string_view token) {
  const Alphabet& a = GetAlphabet();
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const utf8::Sequence seq = utf8::ScanSequence(token, pos);
    if (seq.kind != utf8::Sequence::kValid || seq.code_point >= a.cp_to_byte.size() ||
        a.cp_to_byte[seq.code_point] < 0) {
      return std::string(token);
    }
    out.push_back(static_cast<char>(a.cp_to_byte[seq.code_point]));
    pos += seq.length;
  }
  return out;
}

}  // namespace vllm::byte_level
