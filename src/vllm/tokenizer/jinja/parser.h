// Jinja parser: tokens -> statements, with jinja2's grammar and operator precedence
// (lowest first): `x if c else y`, or, and, not, comparisons (chained, in, not in),
// + -, ~, * / // %, **, unary - +, then postfix (.attr [index] [a:b:c] call) and
// filters / tests (`|f`, `is t`), which bind tighter than every binary operator.
// Filters and tests are resolved here: an unknown one is a syntax error, except inside
// an if-branch or inline-if, where (as in jinja2) it fails only if evaluated.
// Nesting deeper than kMaxNesting is refused.
#pragma once

#include <vector>

#include "ast.h"
#include "lexer.h"

namespace vllm::jinja {

inline constexpr int kMaxNesting = 200;

Body Parse(const std::vector<Token>& tokens);

}  // namespace vllm::jinja
