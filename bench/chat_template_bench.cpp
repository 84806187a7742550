// Chat-template rendering speed on a long tool-using conversation: 401 messages (a
// system prompt, then 100 rounds of question, tool call with reasoning, tool result,
// answer) and 10 tools, through the real Qwen3 and Qwen3.5 templates. The server renders
// the whole conversation for every request, so this is a per-request cost; it is
// reported as milliseconds per render and as output MB/s.
//
// Run: build/bin/vllm_bench --benchmark_filter=ChatTemplate
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "vllm/tokenizer/chat_template.h"

namespace vllm::bench {
namespace {

using json = nlohmann::ordered_json;

std::string ReadTemplate(const std::string& name) {
  const std::string path = std::string(VT_TEST_DATA_DIR) + "/chat/templates/" + name + ".jinja";
  std::ifstream file(path);
  if (!file) throw std::runtime_error("chat_template_bench: cannot open " + path);
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

json LongConversationTools() {
  json tools = json::array();
  for (int i = 0; i < 10; ++i) {
    tools.push_back(json::parse(R"({"type": "function", "function": {"name": "tool)" + std::to_string(i) +
                                R"(", "description": "Does a thing.", "parameters": {"type": "object", "properties":
                                {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}}})"));
  }
  return tools;
}

json LongConversation() {
  const std::string paragraph(400, 'x');
  json messages = json::array({{{"role", "system"}, {"content", "You are helpful."}}});
  for (int turn = 0; turn < 100; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(turn) + " " + paragraph}});
    messages.push_back(json::parse(R"({"role": "assistant", "content": "", "reasoning_content": "think", "tool_calls":
        [{"type": "function", "function": {"name": "tool1", "arguments": {"a": "x", "b": 2, "c": [1.5, 2.5]}}}]})"));
    messages.push_back({{"role", "tool"}, {"content", "result " + paragraph}});
    messages.push_back({{"role", "assistant"}, {"content", "<think>r</think>Answer " + paragraph}});
  }
  return messages;
}

void BM_ChatTemplateLongConversation(benchmark::State& state, const std::string& template_name) {
  const ChatTemplate chat_template(ReadTemplate(template_name));
  const ChatTemplateTokens tokens{std::nullopt, "<|im_end|>", "<|endoftext|>", std::nullopt};
  const json messages = LongConversation();
  const json tools = LongConversationTools();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string prompt = chat_template.Render(messages, tools, true, json(), tokens);
    bytes = prompt.size();
    benchmark::DoNotOptimize(prompt);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["messages"] = static_cast<double>(messages.size());
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}

BENCHMARK_CAPTURE(BM_ChatTemplateLongConversation, qwen3, std::string("qwen3"))
    ->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_ChatTemplateLongConversation, qwen3_5, std::string("qwen3_5"))
    ->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
}  // namespace vllm::bench
