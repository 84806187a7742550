#include "number_range.h"

#include <cctype>
#include <utility>
#include <vector>

#include "integer_range.h"

namespace vllm::structured_output {
namespace {

Expr DigitsIn(char lo, char hi) {
  ByteSet set;
  set.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return Expr::Bytes(set);
}
Expr Digits(int32_t min) { return Expr::Repeat(DigitsIn('0', '9'), min, -1); }

// One bound's fraction digits still to match (no trailing zero: "" is exactly 0).
struct FractionSide {
  std::string digits;
  bool exclusive;
  FractionSide Rest() const { return {digits.empty() ? "" : digits.substr(1), exclusive}; }
};

// Digit strings D with lo <(=) 0.D <(=) hi (a side absent: unconstrained): whether
// D = "" is in, and the non-empty ones (nullopt: none).
struct FractionDigits {
  bool empty;
  std::optional<Expr> nonempty;
};

// D possibly empty as one Expr (nullopt: no D at all).
std::optional<Expr> AnyOf(FractionDigits f) {
  if (!f.nonempty) return f.empty ? std::optional<Expr>(Expr::Empty()) : std::nullopt;
  return f.empty ? Expr::Optional(std::move(*f.nonempty)) : std::move(*f.nonempty);
}

FractionDigits Between(std::optional<FractionSide> lo, std::optional<FractionSide> hi) {
  if (lo && lo->digits.empty() && !lo->exclusive) lo.reset();  // >= 0 holds for every D
  if (hi && hi->digits.empty()) {  // the rest must be zeros, and may not be (exclusive)
    if (hi->exclusive || lo) return {false, std::nullopt};
    return {true, Expr::Repeat(Expr::Byte('0'), 1, -1)};
  }
  if (!lo && !hi) return {true, Digits(1)};
  if (lo && lo->digits.empty() && !hi) {  // > 0: zeros, then a non-zero digit
    return {false, Expr::Seq({Expr::Repeat(Expr::Byte('0'), 0, -1), DigitsIn('1', '9'), Digits(0)})};
  }
  // D = "" is 0: below any lower bound left (non-zero, or 0 exclusive), below hi's non-zero digits.
  const bool empty = !lo;
  const int l0 = lo ? (lo->digits.empty() ? 0 : lo->digits[0] - '0') : -1;
  const int h0 = hi ? hi->digits[0] - '0' : 10;
  std::vector<Expr> options;
  if (l0 + 1 <= h0 - 1) options.push_back(Expr::Seq({DigitsIn(static_cast<char>('0' + l0 + 1), static_cast<char>('0' + h0 - 1)), Digits(0)}));
  const auto then = [&](int digit, FractionDigits rest) {
    if (auto tail = AnyOf(std::move(rest))) options.push_back(Expr::Seq({Expr::Byte(static_cast<uint8_t>('0' + digit)), std::move(*tail)}));
  };
  if (lo && hi && l0 == h0) {
    then(l0, Between(lo->Rest(), hi->Rest()));
  } else {
    if (lo) then(l0, Between(lo->Rest(), std::nullopt));  // a digit above l0 freed the lower side
    if (hi) then(h0, Between(std::nullopt, hi->Rest()));
  }
  if (options.empty()) return {empty, std::nullopt};
  return {empty, Expr::Alt(std::move(options))};
}

int CompareMagnitudes(const NumberBound& a, const NumberBound& b) {
  if (a.integer != b.integer) return a.integer < b.integer ? -1 : 1;
  const size_t n = std::max(a.fraction.size(), b.fraction.size());
  for (size_t i = 0; i < n; ++i) {
    const char x = i < a.fraction.size() ? a.fraction[i] : '0', y = i < b.fraction.size() ? b.fraction[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// The non-negative y (no sign) with A <(=) y <(=) B; A >= 0, B absent = unbounded.
std::optional<Expr> NonNegative(const NumberBound& a, const std::optional<NumberBound>& b) {
  if (b) {
    const int order = CompareMagnitudes(a, *b);
    if (order > 0 || (order == 0 && (a.exclusive || b->exclusive))) return std::nullopt;
  }
  std::vector<Expr> options;
  // Integer parts [lo, hi] spelled with the fractions f: none (f.empty) or "." D.
  const auto add = [&](int64_t lo, std::optional<int64_t> hi, FractionDigits f) {
    std::vector<Expr> spellings;
    if (f.empty) spellings.push_back(Expr::Empty());
    if (f.nonempty) spellings.push_back(Expr::Seq({Expr::Byte('.'), std::move(*f.nonempty)}));
    if (!spellings.empty()) options.push_back(Expr::Seq({IntegerRange(lo, hi), Expr::Alt(std::move(spellings))}));
  };
  const FractionSide lower{a.fraction, a.exclusive};
  if (b && b->integer == a.integer) {
    add(a.integer, a.integer, Between(lower, FractionSide{b->fraction, b->exclusive}));
  } else {
    add(a.integer, a.integer, Between(lower, std::nullopt));
    if (!b) {
      add(a.integer + 1, std::nullopt, {true, Digits(1)});
    } else {
      if (a.integer + 1 <= b->integer - 1) add(a.integer + 1, b->integer - 1, {true, Digits(1)});
      add(b->integer, b->integer, Between(std::nullopt, FractionSide{b->fraction, b->exclusive}));
    }
  }
  if (options.empty()) return std::nullopt;
  return Expr::Alt(std::move(options));
}

NumberBound Mirrored(NumberBound b) {
  b.negative = !b.negative;
  return b;
}

}  // namespace

std::optional<NumberBound> DecimalOf(const std::string& spelling, bool exclusive) {
  size_t i = 0;
  const bool sign = i < spelling.size() && spelling[i] == '-';
  if (sign) ++i;
  std::string mantissa;
  int64_t point = -1;  // digits before the decimal point
  for (; i < spelling.size() && (std::isdigit(static_cast<unsigned char>(spelling[i])) || spelling[i] == '.'); ++i) {
    if (spelling[i] == '.') {
      if (point >= 0) return std::nullopt;
      point = static_cast<int64_t>(mantissa.size());
    } else {
      mantissa += spelling[i];
    }
  }
  if (mantissa.empty()) return std::nullopt;
  if (point < 0) point = static_cast<int64_t>(mantissa.size());
  if (i < spelling.size() && (spelling[i] == 'e' || spelling[i] == 'E')) {
    const std::string exponent = spelling.substr(i + 1);
    if (exponent.empty() || exponent.size() > 5) return std::nullopt;
    size_t used = 0;
    point += std::stoll(exponent, &used);
    if (used != exponent.size()) return std::nullopt;
    i = spelling.size();
  }
  if (i != spelling.size()) return std::nullopt;
  std::string integer, fraction;
  if (point <= 0) {
    fraction = std::string(static_cast<size_t>(-point), '0') + mantissa;
  } else if (point >= static_cast<int64_t>(mantissa.size())) {
    integer = mantissa + std::string(static_cast<size_t>(point) - mantissa.size(), '0');
  } else {
    integer = mantissa.substr(0, static_cast<size_t>(point));
    fraction = mantissa.substr(static_cast<size_t>(point));
  }
  integer.erase(0, integer.find_first_not_of('0') == std::string::npos ? integer.size() : integer.find_first_not_of('0'));
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  constexpr char kLimit[] = "1000000000000000000";  // 10^18
  if (integer.size() > 19 || (integer.size() == 19 && integer > std::string(kLimit)) || fraction.size() > 40) {
    return std::nullopt;
  }
  NumberBound bound;
  bound.integer = integer.empty() ? 0 : std::stoll(integer);
  bound.fraction = fraction;
  bound.negative = sign && (bound.integer != 0 || !fraction.empty());
  bound.exclusive = exclusive;
  return bound;
}

int CompareDecimals(const NumberBound& a, const NumberBound& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int magnitude = CompareMagnitudes(a, b);
  return a.negative ? -magnitude : magnitude;
}

std::optional<Expr> NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<Expr> sides;
  // x >= 0: from max(lo, 0) (0 inclusive when lo is negative or absent).
  if (!hi || !hi->negative) {
    const NumberBound a = lo && !lo->negative ? *lo : NumberBound{};
    if (auto e = NonNegative(a, hi)) sides.push_back(std::move(*e));
  }
  // x < 0 as "-" y, y > 0: y > -hi (or >= when hi is inclusive), y < -lo (or <=).
  if (!lo || lo->negative) {
    const NumberBound a = hi && hi->negative ? Mirrored(*hi) : NumberBound{false, 0, "", true};
    std::optional<NumberBound> b;
    if (lo) b = Mirrored(*lo);
    if (auto e = NonNegative(a, b)) sides.push_back(Expr::Seq({Expr::Byte('-'), std::move(*e)}));
  }
  if (sides.empty()) return std::nullopt;
  return Expr::Alt(std::move(sides));
}

}  // namespace vllm::structured_output
