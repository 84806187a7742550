#include "number_range.h"

#include <utility>
#include <vector>

#include "integer_range.h"

namespace vllm::structured_output {
namespace {

Expr Digits(int32_t min) {
  ByteSet digit;
  digit.AddRange('0', '9');
  return Expr::Repeat(Expr::Bytes(digit), min, -1);
}

Expr AnyFraction() { return Expr::Optional(Expr::Seq({Expr::Byte('.'), Digits(1)})); }
Expr ZeroFraction() { return Expr::Optional(Expr::Seq({Expr::Byte('.'), Expr::Repeat(Expr::Byte('0'), 1, -1)})); }
Expr NonZeroFraction() {  // "." zeros, then a non-zero digit, then any digits: unambiguous
  ByteSet nonzero;
  nonzero.AddRange('1', '9');
  return Expr::Seq({Expr::Byte('.'), Expr::Repeat(Expr::Byte('0'), 0, -1), Expr::Bytes(nonzero), Digits(0)});
}

// The non-negative y (no sign) with A <(=) y <(=) B; A >= 0, B absent = unbounded.
std::optional<Expr> NonNegative(NumberBound a, std::optional<NumberBound> b) {
  std::vector<Expr> options;
  if (b && b->value < a.value) return std::nullopt;
  if (b && b->value == a.value) {
    if (a.exclusive || b->exclusive) return std::nullopt;
    return Expr::Seq({IntegerRange(a.value, a.value), ZeroFraction()});
  }
  options.push_back(Expr::Seq({IntegerRange(a.value, a.value), a.exclusive ? NonZeroFraction() : AnyFraction()}));
  if (!b) {
    options.push_back(Expr::Seq({IntegerRange(a.value + 1, std::nullopt), AnyFraction()}));
  } else {
    if (a.value + 1 <= b->value - 1) options.push_back(Expr::Seq({IntegerRange(a.value + 1, b->value - 1), AnyFraction()}));
    if (!b->exclusive) options.push_back(Expr::Seq({IntegerRange(b->value, b->value), ZeroFraction()}));
  }
  return Expr::Alt(std::move(options));
}

}  // namespace

std::optional<Expr> NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<Expr> sides;
  // x >= 0: from max(lo, 0) (0 inclusive when lo is negative or absent).
  if (!hi || hi->value >= 0) {
    const NumberBound a = lo && lo->value >= 0 ? *lo : NumberBound{0, false};
    if (auto e = NonNegative(a, hi)) sides.push_back(std::move(*e));
  }
  // x < 0 as "-" y, y > 0: y > -hi (or >= when hi is inclusive), y < -lo (or <=).
  if (!lo || lo->value < 0) {
    const NumberBound a = hi && hi->value < 0 ? NumberBound{-hi->value, hi->exclusive} : NumberBound{0, true};
    std::optional<NumberBound> b;
    if (lo) b = NumberBound{-lo->value, lo->exclusive};
    if (auto e = NonNegative(a, b)) sides.push_back(Expr::Seq({Expr::Byte('-'), std::move(*e)}));
  }
  if (sides.empty()) return std::nullopt;
  return Expr::Alt(std::move(sides));
}

}  // namespace vllm::structured_output
