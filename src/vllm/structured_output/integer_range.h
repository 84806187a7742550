// The decimal JSON integers in a range, as an Expr: what a JSON schema's minimum /
// maximum / exclusiveMinimum / exclusiveMaximum on "type": "integer" allow.
//
// The strings are JSON's integers without leading zeros and without "-0", so each
// value has exactly one spelling. [lo, hi] splits into its negative part ("-" and the
// magnitudes) and its non-negative part; each into runs of equal digit count; a run
// [a, b] of n digits is built digit by digit (a's first digit followed by the range up
// to 9...9, the digits strictly between followed by any n - 1 digits, b's first digit
// followed by the range from 0...0), with [0...0, 9...9] collapsing to n digits. A side
// without a bound takes every longer spelling up to the unbounded integer rule's 100
// digits.
#pragma once

#include <cstdint>
#include <optional>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

// The integers's digits an unbounded side may have (json_schema.cpp's integer rule too).
inline constexpr int32_t kMaxIntegerDigits = 100;

// Integers v with lo <= v <= hi; a missing bound is unbounded on that side. Bounds are
// within +-10^18 (the caller checks) and lo <= hi when both are given.
Expr IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace vllm::structured_output
