// libFuzzer target: a chat template rendered by vllm::ChatTemplate. The input is the
// template source, optionally followed by '\0' and a messages JSON array (otherwise a
// fixed conversation with tools, tool calls, reasoning and content parts is used).
// Syntax errors, render errors and raise_exception are ChatTemplateError; anything
// else (a crash, another exception, UB, a hang past the limits) is a finding.
#include <cstdint>
#include <string_view>

#include "vllm/tokenizer/chat_template.h"

namespace {

using json = nlohmann::ordered_json;

const json& DefaultMessages() {
  static const json messages = json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "<think>check</think>Let me look.", "reasoning_content": "plan",
     "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"city": "Oslo", "n": [1, 2.5, null]}}}]},
    {"role": "tool", "content": "Snow"},
    {"role": "user", "content": [{"type": "text", "text": "And this?"}, {"type": "image"}]}])");
  return messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t separator = input.find('\0');
  json messages = DefaultMessages();
  if (separator != std::string_view::npos) {
    json parsed = json::parse(input.substr(separator + 1), nullptr, false);
    if (!parsed.is_discarded()) messages = std::move(parsed);
  }
  vllm::ChatTemplateLimits limits;
  limits.max_steps = 200000;  // keeps each input fast; the limit itself is part of what is tested
  limits.max_output_bytes = size_t{1} << 20;
  static const json tools = json::parse(R"([{"type": "function", "function": {"name": "get", "parameters": {}}}])");
  static const json kwargs = json::parse(R"({"enable_thinking": false, "add_vision_id": true})");
  try {
    const vllm::ChatTemplate chat_template(input.substr(0, separator), limits);
    chat_template.Render(messages, tools, true, kwargs, {std::nullopt, "<|im_end|>", std::nullopt, std::nullopt});
  } catch (const vllm::ChatTemplateError&) {
  }
  return 0;
}
