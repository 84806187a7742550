// hermes: <tool_call>{"name": NAME, "arguments": {...}}</tool_call> (Qwen3's
// template). The body is one JSON object, so a call is decided when it closes (or
// when generation ends inside it): the first delta then carries the name and the
// whole arguments. A body that is not such an object is content. "arguments" may
// also be a string holding the JSON (some models write it so); missing -> {}.
#include "call_scanner.h"

namespace vllm::openai {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

class HermesBody : public CallBody {
 public:
  Status Update(std::string_view body, bool end, ToolCallDelta& delta) override {
    if (!end) return Status::kUndecided;
    const ordered_json call = ordered_json::parse(body, nullptr, false);
    if (call.is_discarded() || !call.is_object() || !call.contains("name") || !call["name"].is_string()) {
      return Status::kNotACall;
    }
    ordered_json arguments = call.contains("arguments") ? call["arguments"] : ordered_json::object();
    if (arguments.is_string()) {
      const ordered_json parsed = ordered_json::parse(arguments.get<std::string>(), nullptr, false);
      if (!parsed.is_discarded()) arguments = parsed;
    }
    delta.name = call["name"].get<std::string>();
    delta.arguments = arguments.is_string() ? arguments.get<std::string>() : PythonJsonDumps(arguments);
    return Status::kCall;
  }
};

}  // namespace

std::unique_ptr<CallBody> MakeHermesBody(const json& /*tools*/) { return std::make_unique<HermesBody>(); }

}  // namespace vllm::openai
