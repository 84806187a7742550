#include "integer_range.h"

#include <string>
#include <vector>

namespace vllm::structured_output {
namespace {

Expr Digits(char first, char last) {
  ByteSet set;
  set.AddRange(static_cast<uint8_t>(first), static_cast<uint8_t>(last));
  return Expr::Bytes(set);
}

Expr AnyDigits(int32_t count) { return Expr::Repeat(Digits('0', '9'), count, count); }

// Strings s of a's length with a <= s <= b, for digit strings a <= b of equal length.
Expr SameLength(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return Expr::Empty();
  if (a.find_first_not_of('0') == std::string::npos && b.find_first_not_of('9') == std::string::npos) {
    return AnyDigits(static_cast<int32_t>(n));
  }
  const std::string a_rest = a.substr(1), b_rest = b.substr(1);
  if (a[0] == b[0]) return Expr::Seq({Expr::Byte(static_cast<uint8_t>(a[0])), SameLength(a_rest, b_rest)});
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  if (a_rest == zeros && b_rest == nines) return Expr::Seq({Digits(a[0], b[0]), AnyDigits(static_cast<int32_t>(n - 1))});
  std::vector<Expr> options;
  options.push_back(Expr::Seq({Expr::Byte(static_cast<uint8_t>(a[0])), SameLength(a_rest, nines)}));
  if (b[0] - a[0] >= 2) {
    options.push_back(Expr::Seq({Digits(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)),
                                 AnyDigits(static_cast<int32_t>(n - 1))}));
  }
  options.push_back(Expr::Seq({Expr::Byte(static_cast<uint8_t>(b[0])), SameLength(zeros, b_rest)}));
  return Expr::Alt(std::move(options));
}

// Spellings of the integers in [lo, hi], 0 <= lo <= hi; !bounded: every integer >= lo.
// (Plain values, not an optional: GCC 12 -O3 warns of a maybe-uninitialized optional.)
Expr NonNegative(uint64_t lo, bool bounded, uint64_t hi) {
  const std::string low = std::to_string(lo), high = std::to_string(hi);
  const size_t high_length = bounded ? high.size() : low.size();
  std::vector<Expr> options;
  for (size_t length = low.size(); length <= high_length; ++length) {
    const std::string from = length == low.size() ? low : "1" + std::string(length - 1, '0');
    const std::string to = bounded && length == high_length ? high : std::string(length, '9');
    options.push_back(SameLength(from, to));
  }
  if (!bounded && low.size() < static_cast<size_t>(kMaxIntegerDigits)) {  // every longer spelling
    options.push_back(Expr::Seq({Digits('1', '9'), Expr::Repeat(Digits('0', '9'), static_cast<int32_t>(low.size()),
                                                                kMaxIntegerDigits - 1)}));
  }
  return Expr::Alt(std::move(options));
}

}  // namespace

Expr IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Expr> options;
  if (!lo || *lo < 0) {  // negatives: "-" and magnitudes from max(1, -hi) up to -lo
    const uint64_t smallest = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    const uint64_t largest = lo ? static_cast<uint64_t>(-*lo) : 0;
    options.push_back(Expr::Seq({Expr::Byte('-'), NonNegative(smallest, lo.has_value(), largest)}));
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    options.push_back(NonNegative(from, hi.has_value(), hi ? static_cast<uint64_t>(*hi) : 0));
  }
  return Expr::Alt(std::move(options));
}

}  // namespace vllm::structured_output
