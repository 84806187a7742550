// SamplingParams from JSON with vLLM's field names (used by `generate --input-file`
// and by the OpenAI server). Unknown fields are ignored by the caller's choice;
// wrong types and values throw std::invalid_argument naming the field.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "vllm/sample/sampling_params.h"

namespace vllm {

// Overrides `base` with the sampling fields present in `body`: temperature, top_p,
// top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed,
// max_tokens, min_tokens, stop (string or list), stop_token_ids, ignore_eos,
// include_stop_str_in_output, skip_special_tokens, logprobs, prompt_logprobs.
SamplingParams SamplingParamsFromJson(const nlohmann::json& body, SamplingParams base);
// The same, leaving alone the fields named in `skip` (ones a caller reads its own way).
SamplingParams SamplingParamsFromJson(const nlohmann::json& body, SamplingParams base,
                                      std::initializer_list<std::string_view> skip);

// Whether `body` (an object) holds `field` with a value other than null.
bool JsonFieldPresent(const nlohmann::json& body, const char* field);

// "'field' must be <expected>, got <value>": scalars shown in full, containers by their
// type only (an error never echoes a whole list or object back).
std::string WrongTypeMessage(const std::string& field, const char* expected, const nlohmann::json& value);

// A number the JSON parser cannot hold (1e999), named by its path in the document
// ("stop_token_ids[1]", "tools[0].function.parameters.maximum").
class JsonNumberOutOfRange : public std::invalid_argument {
 public:
  JsonNumberOutOfRange(const std::string& path, std::string field, const std::string& detail);
  // The top-level key the number is under ("stop_token_ids"); empty when there is none.
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Parses untrusted JSON text, refusing documents nested deeper than `max_depth`
// (copying, printing and destroying nlohmann values recurse: a document nested
// thousands deep would overflow the stack later). Throws std::invalid_argument
// (JsonNumberOutOfRange for a number out of range).
nlohmann::json ParseJsonWithDepthLimit(const std::string& text, int max_depth = 100);

// {"<token id>": logprob, ...} (vLLM's logprobs entry).
nlohmann::json LogprobsToJson(const std::vector<std::pair<int32_t, float>>& entry);

}  // namespace vllm
