#include "vllm/entrypoints/sampling_params_json.h"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace vllm {
namespace {

using nlohmann::json;

[[noreturn]] void WrongType(const std::string& field, const char* expected, const json& value) {
  throw std::invalid_argument(WrongTypeMessage(field, expected, value));
}

double Number(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_number()) WrongType(field, "a number", v);
  return v.get<double>();
}

int64_t Integer(const json& body, const std::string& field, int64_t min = INT32_MIN, int64_t max = INT32_MAX) {
  const json& v = body.at(field);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))) {
    WrongType(field, "an integer", v);
  }
  const int64_t n = v.get<int64_t>();
  if (n < min || n > max) {
    throw std::invalid_argument("'" + field + "' must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                "], got " + std::to_string(n));
  }
  return n;
}

bool Boolean(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_boolean()) WrongType(field, "true or false", v);
  return v.get<bool>();
}

// Where the parser is, as keys and array indices from the top, so that a value the
// parser refuses can be named: {"stop_token_ids": [1, 1e999]} -> stop_token_ids[1].
class JsonPath {
 public:
  void Track(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.push_back({event == json::parse_event_t::array_start, "", 0});
        break;
      case json::parse_event_t::key:
        frames_.back().key = parsed.get<std::string>();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        EndValue();
        break;
      case json::parse_event_t::value:
        EndValue();
        break;
    }
  }
  std::string ToString() const {
    std::string path;
    for (const Frame& frame : frames_) {
      path += frame.is_array ? "[" + std::to_string(frame.index) + "]" : (path.empty() ? "" : ".") + frame.key;
    }
    return path;
  }
  // The key of the top-level object being read ("" inside a top-level array or outside any object).
  std::string TopLevelKey() const { return frames_.empty() || frames_[0].is_array ? "" : frames_[0].key; }

 private:
  // A value of the innermost container is complete: an array moves to its next index.
  void EndValue() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
  }
  struct Frame {
    bool is_array;
    std::string key;  // objects: the key being read
    size_t index;     // arrays: the index being read
  };
  std::vector<Frame> frames_;
};

}  // namespace

bool JsonFieldPresent(const json& body, const char* field) {
  return body.contains(field) && !body.at(field).is_null();
}

std::string WrongTypeMessage(const std::string& field, const char* expected, const json& value) {
  // Scalars in full, containers by their type only.
  const std::string shown = value.is_structured() ? std::string("a JSON ") + value.type_name()
                                                  : value.dump(-1, ' ', false, json::error_handler_t::replace);
  return "'" + field + "' must be " + expected + ", got " + shown;
}

SamplingParams SamplingParamsFromJson(const json& body, SamplingParams base) {
  return SamplingParamsFromJson(body, std::move(base), {});
}

SamplingParams SamplingParamsFromJson(const json& body, SamplingParams p,
                                      std::initializer_list<std::string_view> skip) {
  if (!body.is_object()) WrongType("request", "a JSON object", body);
  const auto given = [&](const char* field) {
    return JsonFieldPresent(body, field) && std::find(skip.begin(), skip.end(), field) == skip.end();
  };
  if (given("temperature")) p.temperature = Number(body, "temperature");
  if (given("top_p")) p.top_p = Number(body, "top_p");
  if (given("top_k")) p.top_k = static_cast<int>(Integer(body, "top_k"));
  if (given("min_p")) p.min_p = Number(body, "min_p");
  if (given("repetition_penalty")) p.repetition_penalty = Number(body, "repetition_penalty");
  if (given("presence_penalty")) p.presence_penalty = Number(body, "presence_penalty");
  if (given("frequency_penalty")) p.frequency_penalty = Number(body, "frequency_penalty");
  if (given("seed")) p.seed = static_cast<uint64_t>(Integer(body, "seed", INT64_MIN, INT64_MAX));
  if (given("max_tokens")) p.max_tokens = Integer(body, "max_tokens", 0, INT64_MAX);
  if (given("min_tokens")) p.min_tokens = Integer(body, "min_tokens", 0, INT64_MAX);
  if (given("ignore_eos")) p.ignore_eos = Boolean(body, "ignore_eos");
  if (given("include_stop_str_in_output")) {
    p.include_stop_str_in_output = Boolean(body, "include_stop_str_in_output");
  }
  if (given("skip_special_tokens")) p.skip_special_tokens = Boolean(body, "skip_special_tokens");
  if (given("logprobs")) p.logprobs = static_cast<int>(Integer(body, "logprobs"));
  if (given("prompt_logprobs")) p.prompt_logprobs = static_cast<int>(Integer(body, "prompt_logprobs"));
  if (given("stop")) {
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
  if (given("stop_token_ids")) {
    const json& ids = body.at("stop_token_ids");
    if (!ids.is_array()) WrongType("stop_token_ids", "a list of integers", ids);
    p.stop_token_ids.clear();
    for (const json& id : ids) {
      if (!id.is_number_integer()) WrongType("stop_token_ids", "a list of integers", ids);
      const int64_t v = id.get<int64_t>();
      if (v < 0 || v > INT32_MAX || (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX)) {
        throw std::invalid_argument("'stop_token_ids' holds " + id.dump() + ", which is not a token id");
      }
      p.stop_token_ids.push_back(static_cast<int32_t>(v));
    }
  }
  return p;
}

JsonNumberOutOfRange::JsonNumberOutOfRange(const std::string& path, std::string field, const std::string& detail)
    : std::invalid_argument((path.empty() ? std::string("the request body") : "'" + path + "'") +
                            " is a number out of range (" + detail + "): JSON numbers must fit a 64-bit float"),
      field_(std::move(field)) {}

json ParseJsonWithDepthLimit(const std::string& text, int max_depth) {
  JsonPath path;
  const json::parser_callback_t limit_depth = [max_depth, &path](int depth, json::parse_event_t event, json& parsed) {
    if (depth > max_depth) {
      throw std::invalid_argument("nested deeper than " + std::to_string(max_depth) + " levels");
    }
    path.Track(event, parsed);
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(std::string("not valid JSON: ") + e.what());
  } catch (const json::out_of_range& e) {
    // The parser stops at the number it cannot hold: the path is where that number is.
    const std::string what = e.what();
    const size_t tag_end = what.find("] ");
    throw JsonNumberOutOfRange(path.ToString(), path.TopLevelKey(),
                               tag_end == std::string::npos ? what : what.substr(tag_end + 2));
  }
}

json LogprobsToJson(const std::vector<std::pair<int32_t, float>>& entry) {
  json out = json::object();
  for (const auto& [id, lp] : entry) out[std::to_string(id)] = lp;
  return out;
}

}  // namespace vllm
