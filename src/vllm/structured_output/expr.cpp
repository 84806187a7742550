// Expr factories and UTF-8 code point classes as byte sequences.
#include <algorithm>

#include "tokenizer/utf8.h"
#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

Expr Expr::Bytes(const ByteSet& set) {
  Expr e;
  e.kind = Kind::kBytes;
  e.bytes = set;
  return e;
}

Expr Expr::Byte(uint8_t b) {
  ByteSet set;
  set.Add(b);
  return Bytes(set);
}

Expr Expr::Literal(std::string_view bytes) {
  std::vector<Expr> items;
  items.reserve(bytes.size());
  for (char c : bytes) items.push_back(Byte(static_cast<uint8_t>(c)));
  return Seq(std::move(items));
}

Expr Expr::Seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kSeq;
  e.children = std::move(items);
  return e;
}

Expr Expr::Alt(std::vector<Expr> options) {
  if (options.size() == 1) return std::move(options[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.children = std::move(options);
  return e;
}

Expr Expr::Rule(int32_t rule_id) {
  Expr e;
  e.kind = Kind::kRule;
  e.rule = rule_id;
  return e;
}

Expr Expr::Repeat(Expr item, int32_t min, int32_t max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.children.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  utf8::AppendCodePoint(out, cp);
  return out;
}

CodepointRanges Normalize(CodepointRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodepointRanges merged;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodepoint);
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  return merged;
}

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

// [lo, hi] share an encoded length. Splits it until every byte of the encoding ranges
// independently: then the range is exactly the product of per-byte ranges.
void SplitSameLength(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  const size_t n = EncodeUtf8(lo).size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      SplitSameLength(lo, lo | m, out);
      SplitSameLength((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      SplitSameLength(lo, (hi & ~m) - 1, out);
      SplitSameLength(hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = EncodeUtf8(lo), b = EncodeUtf8(hi);
  ByteRanges seq;
  for (size_t k = 0; k < n; ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

CodepointRanges ComplementCodepoints(CodepointRanges ranges) {
  CodepointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : Normalize(std::move(ranges))) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.emplace_back(next, kMaxCodepoint);
  return out;
}

Expr Expr::Utf8(const CodepointRanges& ranges) {
  // Encoded-length boundaries; surrogates (D800-DFFF) are not scalar values.
  static constexpr std::pair<uint32_t, uint32_t> kPieces[] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, kMaxCodepoint}};
  std::vector<ByteRanges> seqs;
  for (auto [lo, hi] : Normalize(ranges)) {
    for (auto [plo, phi] : kPieces) {
      SplitSameLength(std::max(lo, plo), std::min(hi, phi), seqs);
    }
  }
  ByteSet single;  // every one-byte sequence in one set
  std::vector<Expr> options;
  for (const ByteRanges& seq : seqs) {
    if (seq.size() == 1) {
      single.AddRange(seq[0].first, seq[0].second);
      continue;
    }
    std::vector<Expr> items;
    for (auto [lo, hi] : seq) {
      ByteSet set;
      set.AddRange(lo, hi);
      items.push_back(Bytes(set));
    }
    options.push_back(Seq(std::move(items)));
  }
  if (!single.Empty() || options.empty()) options.insert(options.begin(), Bytes(single));
  return Alt(std::move(options));
}

}  // namespace vllm::structured_output
