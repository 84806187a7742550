// A request's structured-output fields -> SamplingParams::structured_outputs, in
// /v1/completions and /v1/chat/completions alike:
//
//   response_format     {"type": "text"} (nothing), {"type": "json_object"}, or
//                       {"type": "json_schema", "json_schema": {"name", "schema",
//                       "strict", "description"}} (strict or not, the output follows
//                       the schema, as in vLLM)
//   structured_outputs  vLLM's {json, regex, choice, grammar, json_object,
//                       disable_any_whitespace, disable_fallback}; other keys are
//                       refused (structural_tag, whitespace_pattern, ...)
//   guided_json, guided_regex, guided_choice, guided_grammar   vLLM's older names
//
// More than one constraint is a 400 naming the second; a constraint that does not
// compile (an unsupported or unsatisfiable schema keyword, a bad regex or GBNF) is a
// 400 naming the field, with the grammar compiler's message (keyword and where).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "vllm/sample/sampling_params.h"

namespace vllm::openai {

struct RequestStructuredOutputs {
  std::optional<StructuredOutputsParams> params;
  std::string field;  // the field it came from ("response_format", "guided_json", ...)
};

// `body` with its keys in document order (a schema's properties are generated in it).
RequestStructuredOutputs ReadStructuredOutputs(const nlohmann::ordered_json& body);

// A 400 naming `field` when `params` does not compile.
void CheckStructuredOutputsCompile(const StructuredOutputsParams& params, const std::string& field);

}  // namespace vllm::openai
