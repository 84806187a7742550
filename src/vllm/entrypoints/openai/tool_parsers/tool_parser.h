// Tool-call parsers: the model's text -> content and OpenAI tool calls (vLLM's
// --tool-call-parser; vllm/entrypoints/openai/tool_parsers).
//
//   qwen3_coder  Qwen3.5 / Qwen3-Coder:
//                  <tool_call>
//                  <function=NAME>
//                  <parameter=P>
//                  value
//                  </parameter>
//                  </function>
//                  </tool_call>
//                a value is the text between the tags (one leading and one trailing
//                newline dropped), typed by the tool's JSON schema for P.
//   hermes       Qwen3 / Hermes: <tool_call>{"name": NAME, "arguments": {...}}</tool_call>
//
// Parsers are incremental: Feed() takes each new piece of generated text and
// returns what can be sent now (content, and tool-call deltas as vLLM streams them:
// the first delta of a call carries its id and name, later ones pieces of its
// arguments); Finish() flushes at the end of generation. Text that might be the
// start of a tag is held back until it is decided. Fed whole or byte by byte, the
// concatenated output is the same: a call's argument pieces concatenate to its
// arguments string, which is the arguments object serialized as Python's
// json.dumps does (", " and ": " separators, non-ASCII kept), as vLLM returns it.
// A call that never closes, or whose body does not parse, stays content.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace vllm::openai {

struct ToolCallDelta {
  int index = 0;                     // the call's position in this response
  std::optional<std::string> id;     // the first delta of a call only
  std::optional<std::string> name;   // the first delta of a call only
  std::string arguments;             // the next piece of the arguments string
};

struct ParsedDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && tool_calls.empty(); }
};

// A whole response's calls (the deltas put together).
struct ToolCall {
  std::string id, name, arguments;
};
struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  virtual ParsedDelta Feed(std::string_view text) = 0;
  virtual ParsedDelta Finish() = 0;

  // Feeds `text` whole, finishes, and puts the deltas together.
  ParsedToolCalls ParseAll(std::string_view text);
};

// `name` is qwen3_coder or hermes (anything else throws std::invalid_argument
// naming it); `tools` the request's "tools" array (for parameter types), or null.
// Call ids are "call_" + `id_prefix` + the call's index.
std::unique_ptr<ToolParser> MakeToolParser(const std::string& name, const nlohmann::json& tools,
                                           const std::string& id_prefix);
const std::vector<std::string>& ToolParserNames();

// Python's json.dumps(value, ensure_ascii=False): ", " and ": " separators, keys in
// their order (ordered_json keeps the order a model wrote them in).
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

// Puts a stream of deltas together (what an OpenAI client does).
void AppendDelta(ParsedToolCalls& into, const ParsedDelta& delta);

}  // namespace vllm::openai
