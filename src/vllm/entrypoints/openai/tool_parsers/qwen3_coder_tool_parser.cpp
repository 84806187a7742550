// qwen3_coder: <function=NAME> then <parameter=P>value</parameter>... </function>
// inside <tool_call>. As vLLM's parser, it is lenient where models are: a value
// also ends at the next <parameter= or at </function>, and a call cut off by the
// end of generation keeps the parameters it has (the last one's value up to the
// end). The arguments stream as each parameter completes:
//   {"P1": v1      , "P2": v2      }          (or {} without parameters)
// Values are typed by the tool's schema (properties.P.type): "null" is null;
// string, and parameters the schema does not list -> the text; integer / number /
// boolean / object / array -> that, when the text is one; a listed parameter without
// a type -> the JSON the text holds; otherwise the text as a string.
#include <cctype>
#include <string>

#include "call_scanner.h"

namespace vllm::openai {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The value of a parameter from its text and its schema type ("" when untyped).
ordered_json TypedValue(const std::string& text, const std::string& type) {
  const std::string lower = Lower(text);
  if (lower == "null") return nullptr;
  if (type == "string") return text;
  if (type == "boolean") {
    return lower == "true" ? ordered_json(true) : lower == "false" ? ordered_json(false) : ordered_json(text);
  }
  ordered_json parsed = ordered_json::parse(text, nullptr, false);
  if (parsed.is_discarded()) return text;
  if (type == "integer") return parsed.is_number_integer() ? parsed : ordered_json(text);
  if (type == "number") return parsed.is_number() ? parsed : ordered_json(text);
  if (type == "object") return parsed.is_object() ? parsed : ordered_json(text);
  if (type == "array") return parsed.is_array() ? parsed : ordered_json(text);
  return parsed;
}

class Qwen3CoderBody : public CallBody {
 public:
  explicit Qwen3CoderBody(const json& tools) : tools_(tools) {}

  Status Update(std::string_view body, bool end, ToolCallDelta& delta) override {
    if (!named_) {
      const Status header = ReadHeader(body, end, delta);
      if (header != Status::kCall) return header;
    }
    while (!function_closed_ && ReadParameter(body, end, delta)) {}
    if (!function_closed_ && (end || FunctionEndAt(body, at_))) {
      delta.arguments += parameters_ == 0 ? "{}" : "}";
      function_closed_ = true;
    }
    return Status::kCall;
  }

 private:
  // `<function=NAME>` after optional whitespace: the call's name.
  Status ReadHeader(std::string_view body, bool end, ToolCallDelta& delta) {
    size_t at = 0;
    while (at < body.size() && IsSpace(body[at])) ++at;
    const std::string_view rest = body.substr(at);
    if (rest.size() < kFunction.size()) {
      return !end && kFunction.substr(0, rest.size()) == rest ? Status::kUndecided : Status::kNotACall;
    }
    if (rest.substr(0, kFunction.size()) != kFunction) return Status::kNotACall;
    const size_t close = rest.find('>', kFunction.size());
    if (close == std::string_view::npos) return end ? Status::kNotACall : Status::kUndecided;
    name_ = std::string(rest.substr(kFunction.size(), close - kFunction.size()));
    delta.name = name_;
    named_ = true;
    at_ = at + close + 1;
    return Status::kCall;
  }

  bool FunctionEndAt(std::string_view body, size_t from) const {
    size_t at = from;
    while (at < body.size() && IsSpace(body[at])) ++at;
    return body.substr(at, kFunctionEnd.size()) == kFunctionEnd;
  }

  // The next complete parameter after at_, appended to the arguments; false when
  // there is none yet (or the function ends first).
  bool ReadParameter(std::string_view body, bool end, ToolCallDelta& delta) {
    const size_t start = body.find(kParameter, at_);
    const size_t function_end = body.find(kFunctionEnd, at_);
    if (start == std::string_view::npos || (function_end != std::string_view::npos && function_end < start)) {
      if (function_end != std::string_view::npos) at_ = function_end;
      return false;
    }
    const size_t name_end = body.find('>', start + kParameter.size());
    if (name_end == std::string_view::npos) return false;
    const size_t value_start = name_end + 1;
    size_t value_end = std::string_view::npos, next = 0;
    for (std::string_view boundary : {kParameterEnd, kParameter, kFunctionEnd}) {
      const size_t found = body.find(boundary, value_start);
      if (found < value_end) {
        value_end = found;
        next = found + (boundary == kParameterEnd ? boundary.size() : 0);
      }
    }
    if (value_end == std::string_view::npos) {
      if (!end) return false;
      value_end = next = body.size();
    }
    std::string_view value = body.substr(value_start, value_end - value_start);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    const std::string name(body.substr(start + kParameter.size(), name_end - start - kParameter.size()));
    delta.arguments += (parameters_ == 0 ? "{" : ", ") + PythonJsonDumps(ordered_json(name)) + ": " +
                       PythonJsonDumps(TypedValue(std::string(value), ParameterType(name)));
    ++parameters_;
    at_ = next;
    return true;
  }

  // properties[name].type of this function's parameters in the request's tools:
  // "string" for a parameter it does not list, "" for one listed without a type.
  std::string ParameterType(const std::string& parameter) const {
    if (!tools_.is_array()) return "string";
    for (const json& tool : tools_) {
      const json* function = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
      if (!function || !function->is_object() || function->value("name", json()) != name_) continue;
      const json parameters = function->value("parameters", json::object());
      if (!parameters.is_object() || !parameters.contains("properties")) return "string";
      const json& properties = parameters["properties"];
      if (!properties.is_object() || !properties.contains(parameter)) return "string";
      const json& property = properties[parameter];
      const json type = property.is_object() ? property.value("type", json()) : json();
      return type.is_string() ? type.get<std::string>() : "";
    }
    return "string";
  }

  const json& tools_;
  std::string name_;
  bool named_ = false, function_closed_ = false;
  size_t at_ = 0;  // where the next parameter is looked for
  int parameters_ = 0;
};

}  // namespace

std::unique_ptr<CallBody> MakeQwen3CoderBody(const json& tools) { return std::make_unique<Qwen3CoderBody>(tools); }

}  // namespace vllm::openai
