// Regular expressions to Expr (docs/structured_output.md §2.3): literals, classes,
// `.`, * + ? {m} {m,} {m,n} (lazy forms accepted: they match the same strings), groups
// (capturing, (?:...), named), alternation, \d \w \s and their negations. The whole
// text must match: a leading ^ and a trailing $ are allowed and redundant; anchors
// elsewhere, word boundaries, back references, lookaround and flags are refused with
// an error naming the construct and its offset.
#pragma once

#include <string>
#include <string_view>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

// `json_string`: the expression is the content of a JSON string (a schema's
// "pattern"), so `"`, `\` and control characters are matched in their escaped form.
// `what` names the source in errors ("regex", "json_schema /properties/x/pattern").
Expr RegexToExpr(std::string_view pattern, bool json_string, const std::string& what);

// The JSON string form of the characters in `ranges`: the others as themselves,
// `"` `\` and U+0000-U+001F as escapes (\" \\ \n \t \r \b \f, else \u00XX).
Expr JsonStringChars(const CodepointRanges& ranges);

}  // namespace vllm::structured_output
