// Jinja lexer: template source -> tokens, with jinja2's whitespace control as
// transformers configures it (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False):
//   - line breaks (\r\n, \r) become \n, and one trailing newline is dropped;
//   - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}`
//     all whitespace after it;
//   - trim_blocks: the first newline after `%}` or `#}` is removed;
//   - lstrip_blocks: spaces and tabs from the start of a line up to `{%` or `{#` are
//     removed; `{%+` keeps them, `+%}` keeps the newline after the tag;
//   - `{% raw %}...{% endraw %}` becomes text; comments disappear.
// Syntax errors throw ChatTemplateError(kSyntax) with line and column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "value.h"

namespace vllm::jinja {

enum class TokenType {
  kText,           // template data between tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,         // text holds the decoded literal
  kInteger,
  kFloat,
  kOperator,       // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  Int int_value = 0;
  double float_value = 0.0;
  int line = 1;
  int column = 1;
};

std::vector<Token> Tokenize(std::string_view source);

// "name 'foo'", "string", "end of statement block": how a token is described in errors.
std::string DescribeToken(const Token& token);

}  // namespace vllm::jinja
