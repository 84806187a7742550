// The qwen3 reasoning parser (vLLM's --reasoning-parser qwen3): generated text up
// to </think> is reasoning_content, the rest content.
//
//   starts_in_reasoning  the rendered prompt already opened <think> (Qwen3.5's
//                        template with thinking on): the output starts as reasoning.
//   otherwise            reasoning only when the output starts with <think> (after
//                        whitespace); any other start makes it all content.
// Reasoning ends at </think>, or at a <tool_call> (models start calls inside their
// thinking; the tag and what follows go to content, where the tool parser finds
// them). Newlines right after </think> are dropped (the templates put "\n\n"
// there); a generation that ends while thinking is all reasoning. Incremental as
// the tool parsers: text that may be the start of a tag is held back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vllm::openai {

struct ReasoningDelta {
  std::string reasoning, content;
};

class ReasoningParser {
 public:
  explicit ReasoningParser(bool starts_in_reasoning)
      : state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}
  ReasoningDelta Feed(std::string_view text);
  ReasoningDelta Finish();
  // Whether the reasoning has ended (content follows).
  bool in_content() const { return state_ == State::kContent || state_ == State::kAfterThink; }

 private:
  enum class State { kStart, kReasoning, kAfterThink, kContent };
  void Scan(bool end, ReasoningDelta& out);
  std::string pending_;
  State state_;
};

const std::vector<std::string>& ReasoningParserNames();  // {"qwen3"}

}  // namespace vllm::openai
