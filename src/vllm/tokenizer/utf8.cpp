#include "utf8.h"

#include <cstdint>

namespace vllm::utf8 {
namespace {

// Expected length from the lead byte (0: not a lead byte) and the valid range of the
// second byte, which excludes overlongs (E0, F0), surrogates (ED) and > U+10FFFF (F4).
struct LeadInfo {
  int length;
  uint8_t second_lo, second_hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

int LeadLength(uint8_t lead) { return Lead(lead).length; }

Sequence ScanSequence(std::string_view bytes, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t lead = s[pos];
  const LeadInfo info = Lead(lead);
  if (info.length == 1) return {Sequence::kValid, 1, lead};
  if (info.length == 0) return {Sequence::kInvalid, 1, 0};
  char32_t cp = lead & (0xFF >> (info.length + 1));
  for (int i = 1; i < info.length; ++i) {
    if (pos + i >= bytes.size()) return {Sequence::kTruncated, static_cast<size_t>(i), 0};
    const uint8_t b = s[pos + i];
    const bool ok = i == 1 ? (b >= info.second_lo && b <= info.second_hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Sequence::kInvalid, static_cast<size_t>(i), 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Sequence::kValid, static_cast<size_t>(info.length), cp};
}

std::optional<size_t> FindInvalid(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Sequence seq = ScanSequence(bytes, pos);
    if (seq.kind != Sequence::kValid) return pos;
    pos += seq.length;
  }
  return std::nullopt;
}

std::string DecodeLossy(std::string_view bytes) {
  if (!FindInvalid(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Sequence seq = ScanSequence(bytes, pos);
    if (seq.kind == Sequence::kValid) {
      out.append(bytes.substr(pos, seq.length));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
    }
    pos += seq.length;
  }
  return out;
}

size_t IncompleteTailLength(std::string_view bytes) {
  // A truncated character is at most 3 bytes long; its lead byte is one of the last 3.
  const size_t first = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = first; pos < bytes.size(); ++pos) {
    const uint8_t b = static_cast<uint8_t>(bytes[pos]);
    if (b >= 0x80 && b < 0xC0) continue;  // a continuation byte cannot start a character
    const Sequence seq = ScanSequence(bytes, pos);
    if (seq.kind == Sequence::kTruncated) return bytes.size() - pos;
  }
  return 0;
}

void AppendCodePoint(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace vllm::utf8
