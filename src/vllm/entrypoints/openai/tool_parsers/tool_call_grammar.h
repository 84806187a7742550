// The grammar of tool calls written in a tool parser's format, which constrains
// generation for tool_choice "required" (one or more calls, each of any of the
// tools) and a named function (exactly one call of it), so that the output always
// parses into calls whose arguments validate against the tools' parameters.
//
//   hermes       <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//                ARGS a JSON document of the tool's parameters schema
//   qwen3_coder  <tool_call>\n<function=NAME>\n
//                  <parameter=P>\nVALUE\n</parameter>\n   (per parameter, in the
//                  schema's order; required ones always, optional ones or not)
//                </function>\n</tool_call>
//                VALUE: for a parameter of type "string", raw text without '<'
//                (the parser ends a value at "</parameter>", "<parameter=" or
//                "</function>"), within minLength / maxLength, or one of its enum
//                values; for any other parameter, JSON of its schema.
// Calls are separated by one newline. JSON inside allows at most one whitespace
// character per gap, as models write it ({"a": 1, "b": 2}).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "vllm/structured_output/grammar.h"

namespace vllm::openai {

// `tools`: the request's tools array. `function`: the named function, or nullopt for
// tool_choice "required". Throws structured_output::StructuredOutputError naming the
// tool and what its schema uses that cannot be constrained.
std::shared_ptr<const structured_output::Grammar> ToolCallGrammar(const std::string& parser,
                                                                  const nlohmann::ordered_json& tools,
                                                                  const std::optional<std::string>& function);

}  // namespace vllm::openai
