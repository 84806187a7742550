// The front ends: a request's structured output (JSON schema, json_object, regex,
// choice, GBNF grammar) as a Grammar (docs/structured_output.md §2). Each throws
// StructuredOutputError for what it does not support or cannot parse, naming the
// keyword or construct and where it is.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

struct JsonSchemaOptions {
  // Whitespace allowed between JSON tokens, per gap: -1 any amount, 0 none (compact
  // output), n at most n characters of " \t\n\r".
  int32_t max_whitespace = -1;
  // Where a schema with "properties" omits "additionalProperties": true follows
  // xgrammar's strict mode (only the listed properties), false JSON Schema's default
  // (any other property too).
  bool strict = true;
};

// Properties are generated in the schema's order, hence ordered_json.
Grammar GrammarFromJsonSchema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});
// The schema as JSON text; a syntax error is a StructuredOutputError.
Grammar GrammarFromJsonSchema(std::string_view schema_json, const JsonSchemaOptions& options = {});
// Adds the rules of `schema` to `builder` and returns the expression of one document
// of it, for grammars that embed JSON (a tool call's arguments). Errors as above.
Expr JsonSchemaExpr(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                    const JsonSchemaOptions& options = {});
// Any JSON object (response_format {"type": "json_object"}).
Grammar GrammarFromJsonObject(const JsonSchemaOptions& options = {});
// The whole output matches `pattern` (regex.h lists the syntax).
Grammar GrammarFromRegex(std::string_view pattern);
// The output is exactly one of `choices`.
Grammar GrammarFromChoices(const std::vector<std::string>& choices);
// llama.cpp's GBNF: `name ::= ...` rules, the start rule named `root`.
Grammar GrammarFromGbnf(std::string_view text);

}  // namespace vllm::structured_output
