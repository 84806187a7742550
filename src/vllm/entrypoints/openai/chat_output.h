// What a chat request says about tools and reasoning, and the parser that splits
// the generated text into reasoning_content, content and tool_calls (vLLM's
// OpenAIServingChat with --reasoning-parser, --enable-auto-tool-choice and
// --tool-call-parser).
//
//   tool_choice   none      the tools are shown to the model; the output is content
//                 auto      (the default with tools) needs --enable-auto-tool-choice:
//                           the model may call tools, the parser reads the calls out
//                 required  one or more calls, generation constrained to them
//                 {"type": "function", "function": {"name": F}}   exactly one call of F
//                 (required and named constrain with tool_call_grammar.h, so they
//                 need --tool-call-parser, and no other structured output)
//   reasoning     with --reasoning-parser qwen3, the text up to </think> (from the
//                 start when the prompt left <think> open) is reasoning_content;
//                 include_reasoning false leaves it out of the answer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reasoning_parser.h"
#include "tool_parsers/tool_parser.h"
#include "vllm/sample/sampling_params.h"

namespace vllm::openai {

class ServingContext;

struct ChatTools {
  enum class Mode { kNone, kAuto, kRequired, kNamed };
  Mode mode = Mode::kNone;
  std::string function;         // kNamed
  nlohmann::ordered_json tools;  // the request's tools (null when none)
  std::string parser;           // the tool-call parser that reads calls ("" for kNone)

  bool parses_calls() const { return mode != Mode::kNone; }
};

// tools and tool_choice; 400s naming tool_choice for a mode the server cannot serve.
ChatTools ReadChatTools(const nlohmann::ordered_json& body, const ServingContext& context);
// The constraint of tool_choice required or named (nullopt otherwise); a 400 naming
// "tools" when a tool's schema cannot be constrained.
std::optional<StructuredOutputsParams> ToolCallConstraint(const ChatTools& tools);

struct ChatDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// A whole answer: the deltas put together (what an OpenAI client does with a stream).
struct ChatMessage {
  std::string reasoning, content;
  std::vector<ToolCall> tool_calls;
};
void AppendDelta(ChatMessage& into, const ChatDelta& delta);

// Incremental: Feed each new piece of text, Finish at the end. Fed whole or in
// pieces, the pieces put together are the same.
class ChatOutputParser {
 public:
  // `reasoning_parser` "" or "qwen3"; `starts_in_reasoning`: the prompt left <think> open.
  ChatOutputParser(const std::string& reasoning_parser, bool starts_in_reasoning, const ChatTools& tools,
                   const std::string& call_id_prefix);
  ChatDelta Feed(std::string_view text);
  ChatDelta Finish();

 private:
  ChatDelta Route(const ReasoningDelta& split, bool end);

  std::unique_ptr<ReasoningParser> reasoning_;
  std::unique_ptr<ToolParser> tools_;
};

// Whether a rendered prompt leaves the model reasoning: its last <think> comes after
// its last </think> (the structured output manager's rule, on token ids).
bool PromptOpensReasoning(std::string_view prompt);

}  // namespace vllm::openai
