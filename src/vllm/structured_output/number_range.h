// The JSON numbers in a range, as an Expr: what a JSON schema's minimum / maximum /
// exclusiveMinimum / exclusiveMaximum on "type": "number" allow, for bounds that are
// integers (a fractional bound is refused by json_schema.cpp, naming it).
//
// The spellings are JSON's numbers without an exponent: "-"? int ("." digits)?, the
// integer part without leading zeros (IntegerRange), no "-0" of any fraction. A
// non-negative y of integer part i lies in [A, B] when A < i < B (any fraction), i == A
// (any fraction, or one with a non-zero digit when A is exclusive) or i == B (only a
// zero fraction, and not at all when B is exclusive). x = -y covers the negative side
// with the bounds mirrored. Fraction digits are unbounded, integer digits as the
// integer rule's.
#pragma once

#include <cstdint>
#include <optional>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

struct NumberBound {
  int64_t value = 0;  // within +-10^18 (the caller checks)
  bool exclusive = false;
};

// Numbers x with lo <(=) x <(=) hi; a missing bound is unbounded on that side. Returns
// nullopt when no number is within.
std::optional<Expr> NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace vllm::structured_output
