#include "tool_parser.h"

#include <stdexcept>

#include "call_scanner.h"

namespace vllm::openai {

std::string PythonJsonDumps(const nlohmann::ordered_json& value) {
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "" : ", ") + PythonJsonDumps(nlohmann::ordered_json(key)) + ": " + PythonJsonDumps(item);
      first = false;
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + PythonJsonDumps(value[i]);
    return out + "]";
  }
  // Bytes that are not UTF-8 become U+FFFD rather than an exception.
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void AppendDelta(ParsedToolCalls& into, const ParsedDelta& delta) {
  into.content += delta.content;
  for (const ToolCallDelta& d : delta.tool_calls) {
    if (d.index >= static_cast<int>(into.tool_calls.size())) into.tool_calls.resize(d.index + 1);
    ToolCall& call = into.tool_calls[d.index];
    if (d.id) call.id = *d.id;
    if (d.name) call.name = *d.name;
    call.arguments += d.arguments;
  }
}

ParsedToolCalls ToolParser::ParseAll(std::string_view text) {
  ParsedToolCalls all;
  AppendDelta(all, Feed(text));
  AppendDelta(all, Finish());
  return all;
}

const std::vector<std::string>& ToolParserNames() {
  static const std::vector<std::string> names = {"hermes", "qwen3_coder"};
  return names;
}

std::unique_ptr<ToolParser> MakeToolParser(const std::string& name, const nlohmann::json& tools,
                                           const std::string& id_prefix) {
  if (name == "qwen3_coder") return std::make_unique<CallScanner>(MakeQwen3CoderBody, tools, id_prefix);
  if (name == "hermes") return std::make_unique<CallScanner>(MakeHermesBody, tools, id_prefix);
  throw std::invalid_argument("unknown tool-call parser '" + name + "' (known: hermes, qwen3_coder)");
}

}  // namespace vllm::openai
