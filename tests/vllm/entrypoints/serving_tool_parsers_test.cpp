// The tool-call parsers (qwen3_coder, hermes) and the qwen3 reasoning parser on a
// corpus of model-like outputs: well-formed calls, several in a turn, text around
// them, values of every JSON type, unicode, missing closing tags, truncated calls,
// text that only looks like a tag. Each is parsed whole and fed byte by byte and in
// random pieces: the streamed deltas must put together to the same result, which
// is the one written here from the format's definition, and each call's first
// delta (only) carries its id and name.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "vllm/entrypoints/openai/reasoning_parser.h"
#include "vllm/entrypoints/openai/tool_parsers/tool_parser.h"

namespace vllm::openai {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
    "ratio": {"type": "number"}, "filters": {"type": "object"}, "tags": {"type": "array"}, "note": {}}}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
])");

struct Case {
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

// Every way of feeding `text` the test uses: whole, a byte at a time, random pieces.
std::vector<std::vector<std::string>> Splits(const std::string& text, std::mt19937& rng) {
  std::vector<std::vector<std::string>> splits = {{text}, {}};
  for (char c : text) splits[1].push_back(std::string(1, c));
  for (int round = 0; round < 5; ++round) {
    std::vector<std::string> pieces;
    std::uniform_int_distribution<size_t> length(1, 9);
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min(length(rng), text.size() - at);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    splits.push_back(pieces);
  }
  return splits;
}

void CheckToolCase(const std::string& parser_name, const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(parser_name + ": " + c.text);
  for (const std::vector<std::string>& pieces : Splits(c.text, rng)) {
    SCOPED_TRACE(std::to_string(pieces.size()) + " pieces");
    const auto parser = MakeToolParser(parser_name, kTools, "x");
    ParsedToolCalls all;
    std::vector<bool> named;
    auto take = [&](const ParsedDelta& delta) {
      for (const ToolCallDelta& d : delta.tool_calls) {
        if (d.index >= static_cast<int>(named.size())) named.resize(d.index + 1, false);
        EXPECT_EQ(d.name.has_value(), !named[d.index]) << "call " << d.index << ": the name comes first, once";
        EXPECT_EQ(d.id.has_value(), d.name.has_value());
        named[d.index] = true;
      }
      AppendDelta(all, delta);
    };
    for (const std::string& piece : pieces) take(parser->Feed(piece));
    take(parser->Finish());
    EXPECT_EQ(all.content, c.content);
    ASSERT_EQ(all.tool_calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(all.tool_calls[i].id, "call_x" + std::to_string(i));
      EXPECT_EQ(all.tool_calls[i].name, c.calls[i].first);
      EXPECT_EQ(all.tool_calls[i].arguments, c.calls[i].second);
      EXPECT_FALSE(json::parse(all.tool_calls[i].arguments, nullptr, false).is_discarded());
    }
  }
}

TEST(ToolParserTest, Qwen3CoderCorpus) {
  const std::string weather =
      "<tool_call>\n<function=get_weather>\n<parameter=location>\nSan Francisco\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
  const std::vector<Case> cases = {
      {"Let me check.\n" + weather, "Let me check.\n", {{"get_weather", R"({"location": "San Francisco", "days": 3})"}}},
      {weather + "\n" + weather + "\nDone.", "\nDone.",
       {{"get_weather", R"({"location": "San Francisco", "days": 3})"},
        {"get_weather", R"({"location": "San Francisco", "days": 3})"}}},
      {"<tool_call>\n<function=now>\n</function>\n</tool_call>", "", {{"now", "{}"}}},
      {"<tool_call>\n<function=get_weather>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=ratio>\n2.5\n"
       "</parameter>\n<parameter=filters>\n{\"a\": [1, 2]}\n</parameter>\n<parameter=tags>\n[\"x\"]\n</parameter>\n"
       "<parameter=days>\nthree\n</parameter>\n<parameter=location>\nnull\n</parameter>\n</function>\n</tool_call>",
       "",
       {{"get_weather",
         R"({"metric": true, "ratio": 2.5, "filters": {"a": [1, 2]}, "tags": ["x"], "days": "three", "location": null})"}}},
      // A value over several lines, unicode, a parameter the schema does not list
      // (a string), one listed without a type (its JSON), a string that looks like a number.
      {"<tool_call>\n<function=get_weather>\n<parameter=location>\n東京\nline 2\n</parameter>\n<parameter=extra>\n5\n"
       "</parameter>\n<parameter=note>\n[1, {\"k\": null}]\n</parameter>\n</function>\n</tool_call>",
       "", {{"get_weather", R"({"location": "東京\nline 2", "extra": "5", "note": [1, {"k": null}]})"}}},
      // Missing </parameter>: a value also ends at the next <parameter= or </function>.
      {"<tool_call><function=get_weather><parameter=location>Rome<parameter=days>2</function></tool_call>", "",
       {{"get_weather", R"({"location": "Rome", "days": 2})"}}},
      // Cut off by the end of generation: the call keeps what it has.
      {"Sure.<tool_call>\n<function=get_weather>\n<parameter=days>\n1", "Sure.", {{"get_weather", R"({"days": 1})"}}},
      {"<tool_call>\n<function=get_weather>\n<parameter=loc", "", {{"get_weather", "{}"}}},
      // Not calls: they stay content.
      {"<tool_call>hello</tool_call> world", "<tool_call>hello</tool_call> world", {}},
      {"a < b and <tool", "a < b and <tool", {}},
      {"<tool_call>\n<funct", "<tool_call>\n<funct", {}},
      {"no calls at all", "no calls at all", {}},
  };
  std::mt19937 rng(1);
  for (const Case& c : cases) CheckToolCase("qwen3_coder", c, rng);
}

TEST(ToolParserTest, HermesCorpus) {
  const std::string paris =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"units\": [\"c\", 1.5]}}\n"
      "</tool_call>";
  const std::vector<Case> cases = {
      {paris, "", {{"get_weather", R"({"location": "Paris", "units": ["c", 1.5]})"}}},
      {"<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": 2}}</tool_call>", "", {{"f", R"({"z": 1, "a": 2})"}}},
      {"Checking both.\n" + paris + "\n\n" + paris, "Checking both.\n",
       {{"get_weather", R"({"location": "Paris", "units": ["c", 1.5]})"},
        {"get_weather", R"({"location": "Paris", "units": ["c", 1.5]})"}}},
      {"<tool_call>{\"name\": \"now\"}</tool_call>", "", {{"now", "{}"}}},
      {"<tool_call>{\"name\": \"now\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}</tool_call>", "",
       {{"now", R"({"tz": "UTC"})"}}},
      {"<tool_call>{\"name\": \"now\", \"arguments\": {}}", "", {{"now", "{}"}}},  // cut off after a whole body
      {"<tool_call>{\"name\": \"now\", \"argum", "<tool_call>{\"name\": \"now\", \"argum", {}},
      {"<tool_call>not json</tool_call>!", "<tool_call>not json</tool_call>!", {}},
      {"<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>", {}},  // no name
  };
  std::mt19937 rng(2);
  for (const Case& c : cases) CheckToolCase("hermes", c, rng);
}

TEST(ToolParserTest, UnknownParserIsRefusedByName) {
  try {
    MakeToolParser("mistral", kTools, "x");
    ADD_FAILURE() << "an unknown parser was made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mistral"), std::string::npos);
  }
  EXPECT_EQ(PythonJsonDumps(nlohmann::ordered_json::parse(R"({"c": null, "a": [1, {"b": "é"}]})")),
            R"({"c": null, "a": [1, {"b": "é"}]})");
}

struct ReasoningCase {
  bool starts_in_reasoning;
  std::string text, reasoning, content;
};

TEST(ReasoningParserTest, Qwen3Corpus) {
  const std::vector<ReasoningCase> cases = {
      {true, "I think so.\n</think>\n\nThe answer.", "I think so.\n", "The answer."},
      {false, "<think>\nhmm\n</think>\n\nok", "\nhmm\n", "ok"},
      {false, "  <think>x</think>y", "x", "y"},
      {false, "Hello <think> is not first", "", "Hello <think> is not first"},
      {false, "<thin", "", "<thin"},
      {true, "Let me call.\n<tool_call>\n<function=now>\n</function>\n</tool_call>", "Let me call.\n",
       "<tool_call>\n<function=now>\n</function>\n</tool_call>"},
      {true, "still thinking when the budget ran out", "still thinking when the budget ran out", ""},
      {true, "a</thi", "a</thi", ""},
      {true, "</think>", "", ""},
  };
  std::mt19937 rng(3);
  for (const ReasoningCase& c : cases) {
    SCOPED_TRACE(c.text);
    for (const std::vector<std::string>& pieces : Splits(c.text, rng)) {
      ReasoningParser parser(c.starts_in_reasoning);
      std::string reasoning, content;
      for (const std::string& piece : pieces) {
        const ReasoningDelta d = parser.Feed(piece);
        reasoning += d.reasoning;
        content += d.content;
      }
      const ReasoningDelta d = parser.Finish();
      EXPECT_EQ(reasoning + d.reasoning, c.reasoning) << pieces.size() << " pieces";
      EXPECT_EQ(content + d.content, c.content) << pieces.size() << " pieces";
    }
  }
}

}  // namespace
}  // namespace vllm::openai
