// The JSON numbers in a range, as an Expr: what a JSON schema's minimum / maximum /
// exclusiveMinimum / exclusiveMaximum on "type": "number" allow. Bounds are decimals
// (DecimalOf: the shortest spelling of the schema's double, so 0.1 bounds at 0.1, not
// at the binary value just above it).
//
// The spellings are JSON's numbers without an exponent: "-"? int ("." digits)?, the
// integer part without leading zeros (IntegerRange), no "-0" of any fraction. A
// non-negative y of integer part i and fraction digits D lies in [A, B] when
// A.int < i < B.int (any fraction), i == A.int (0.D at or above A's fraction, strictly
// when A is exclusive) or i == B.int (0.D at or below B's fraction); at A.int == B.int
// both. The fraction digits are matched digit by digit against the bound's (a digit
// above the lower bound's, or below the upper bound's, frees the rest). x = -y covers
// the negative side with the bounds mirrored. Fraction digits are unbounded, integer
// digits as the integer rule's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

struct NumberBound {
  bool negative = false;  // never with integer 0 and no fraction (zero is not negative)
  int64_t integer = 0;    // the magnitude's integer part, within 10^18 (the caller checks)
  std::string fraction;   // the magnitude's fraction digits, no trailing zero ("" for none)
  bool exclusive = false;
};

// The decimal of a JSON number's shortest spelling (as nlohmann::json dumps it, e.g.
// "0.1", "-2.5", "1e-05", "1.5e+20"); nullopt when its magnitude is 10^18 or more or
// it has more than 40 fraction digits.
std::optional<NumberBound> DecimalOf(const std::string& spelling, bool exclusive);

// Numbers x with lo <(=) x <(=) hi; a missing bound is unbounded on that side. Returns
// nullopt when no number is within.
std::optional<Expr> NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

// -1, 0, 1 as a < b, a == b, a > b (their values; `exclusive` not compared).
int CompareDecimals(const NumberBound& a, const NumberBound& b);

}  // namespace vllm::structured_output
