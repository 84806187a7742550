#include "vllm/entrypoints/sampling_params_json.h"

#include <stdexcept>
#include <string>

namespace vllm {
namespace {

using nlohmann::json;

[[noreturn]] void WrongType(const std::string& field, const char* expected, const json& value) {
  throw std::invalid_argument("'" + field + "' must be " + expected + ", got " + value.dump());
}

double Number(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_number()) WrongType(field, "a number", v);
  return v.get<double>();
}

int64_t Integer(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_number_integer()) WrongType(field, "an integer", v);
  return v.get<int64_t>();
}

bool Boolean(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_boolean()) WrongType(field, "true or false", v);
  return v.get<bool>();
}

bool Present(const json& body, const char* field) { return body.contains(field) && !body.at(field).is_null(); }

}  // namespace

SamplingParams SamplingParamsFromJson(const json& body, SamplingParams p) {
  if (!body.is_object()) WrongType("request", "a JSON object", body);
  if (Present(body, "temperature")) p.temperature = Number(body, "temperature");
  if (Present(body, "top_p")) p.top_p = Number(body, "top_p");
  if (Present(body, "top_k")) p.top_k = static_cast<int>(Integer(body, "top_k"));
  if (Present(body, "min_p")) p.min_p = Number(body, "min_p");
  if (Present(body, "repetition_penalty")) p.repetition_penalty = Number(body, "repetition_penalty");
  if (Present(body, "presence_penalty")) p.presence_penalty = Number(body, "presence_penalty");
  if (Present(body, "frequency_penalty")) p.frequency_penalty = Number(body, "frequency_penalty");
  if (Present(body, "seed")) p.seed = static_cast<uint64_t>(Integer(body, "seed"));
  if (Present(body, "max_tokens")) p.max_tokens = Integer(body, "max_tokens");
  if (Present(body, "min_tokens")) p.min_tokens = Integer(body, "min_tokens");
  if (Present(body, "ignore_eos")) p.ignore_eos = Boolean(body, "ignore_eos");
  if (Present(body, "include_stop_str_in_output")) {
    p.include_stop_str_in_output = Boolean(body, "include_stop_str_in_output");
  }
  if (Present(body, "skip_special_tokens")) p.skip_special_tokens = Boolean(body, "skip_special_tokens");
  if (Present(body, "logprobs")) p.logprobs = static_cast<int>(Integer(body, "logprobs"));
  if (Present(body, "prompt_logprobs")) p.prompt_logprobs = static_cast<int>(Integer(body, "prompt_logprobs"));
  if (Present(body, "stop")) {
    const json& stop = body.at("stop");
    p.stop.clear();
    if (stop.is_string()) {
      p.stop.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& s : stop) {
        if (!s.is_string()) WrongType("stop", "a string or a list of strings", stop);
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      WrongType("stop", "a string or a list of strings", stop);
    }
  }
  if (Present(body, "stop_token_ids")) {
    const json& ids = body.at("stop_token_ids");
    if (!ids.is_array()) WrongType("stop_token_ids", "a list of integers", ids);
    p.stop_token_ids.clear();
    for (const json& id : ids) {
      if (!id.is_number_integer()) WrongType("stop_token_ids", "a list of integers", ids);
      p.stop_token_ids.push_back(id.get<int32_t>());
    }
  }
  return p;
}

json LogprobsToJson(const std::vector<std::pair<int32_t, float>>& entry) {
  json out = json::object();
  for (const auto& [id, lp] : entry) out[std::to_string(id)] = lp;
  return out;
}

}  // namespace vllm
