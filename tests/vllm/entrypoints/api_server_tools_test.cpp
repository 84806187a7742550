// Tool calling and reasoning through the chat endpoint (chat_output.h): tool_choice
// required / named constrain a random-weight model to calls that always parse and
// validate (hermes and qwen3_coder), streamed as vLLM streams them; tool_choice auto
// reads calls out of whatever the model wrote (here a call forced by a regex); with
// --reasoning-parser qwen3 the text before </think> is reasoning_content and the
// grammar starts after it.
#include <gtest/gtest.h>

#include <regex>

#include "../structured_output/structured_testing.h"
#include "server_fixture.h"

namespace vllm {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
using testing::SseEvents;
using testing::TestServer;

const json kUser = json::array({{{"role", "user"}, {"content", "what is the weather?"}}});

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 8}, "days": {"type": "integer"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
      "query": {"type": "string", "minLength": 1, "maxLength": 10}, "exact": {"type": "boolean"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
      "filter": {"type": "object", "properties": {"year": {"type": "integer"}}, "required": ["year"],
                 "additionalProperties": false}}, "required": ["query"]}}},
  {"type": "function", "function": {"name": "now"}}
])");

openai::ServerConfig ToolServerConfig(const std::string& parser) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.enable_auto_tool_choice = true;
  config.tool_call_parser = parser;
  return config;
}

const ojson* ParametersOf(const std::string& name) {
  for (const ojson& tool : kTools) {
    if (tool["function"]["name"] == name) return tool["function"].contains("parameters") ? &tool["function"]["parameters"] : nullptr;
  }
  return nullptr;
}

// Every call names a tool and its arguments validate against the tool's parameters.
void ExpectValidCalls(const json& calls, const std::string& only = "") {
  ASSERT_TRUE(calls.is_array());
  ASSERT_FALSE(calls.empty());
  for (const json& call : calls) {
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u) << call;
    const std::string name = call["function"]["name"];
    if (!only.empty()) {
      EXPECT_EQ(name, only);
    }
    ASSERT_TRUE(name == "get_weather" || name == "search" || name == "now") << name;
    const ojson arguments = ojson::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(arguments.is_object()) << call;
    const ojson* parameters = ParametersOf(name);
    if (parameters == nullptr) {
      EXPECT_TRUE(arguments.empty()) << call;
      continue;
    }
    std::string why;
    EXPECT_TRUE(structured_output::testing::Validate(arguments, *parameters, *parameters, why)) << why << ": " << call;
  }
}

// The tool calls of a stream put together, checking vLLM's shape on the way: a call's
// first delta has its id, type and name, later ones only argument pieces.
json StreamedCalls(const std::vector<json>& events, std::string& finish_reason) {
  json calls = json::array();
  for (const json& event : events) {
    if (event["choices"].empty()) continue;
    const json& choice = event["choices"][0];
    if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const json& d : choice["delta"]["tool_calls"]) {
      const size_t index = d["index"];
      if (index == calls.size()) {
        EXPECT_TRUE(d.contains("id") && d.contains("type") && d["function"].contains("name")) << d;
        calls.push_back({{"id", d["id"]}, {"type", d["type"]}, {"function", {{"name", d["function"]["name"]}, {"arguments", ""}}}});
      } else {
        EXPECT_FALSE(d.contains("id") || d["function"].contains("name")) << d;
      }
      EXPECT_LT(index, calls.size());
      if (index >= calls.size()) return calls;
      calls[index]["function"]["arguments"] =
          calls[index]["function"]["arguments"].get<std::string>() + d["function"].value("arguments", "");
    }
  }
  return calls;
}

class ToolChoiceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ToolChoiceTest, RequiredAndNamedAlwaysGiveValidCalls) {
  TestServer server(testing::ServerEngineConfig(), ToolServerConfig(GetParam()));
  int num_calls = 0;
  for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "search"}}}}}) {
    const std::string only = choice.is_object() ? "search" : "";
    for (int seed = 0; seed < 8; ++seed) {
      json body = {{"messages", kUser}, {"tools", kTools}, {"tool_choice", choice}, {"max_tokens", 220}};
      body["temperature"] = seed == 0 ? 0.0 : 1.0;
      body["seed"] = seed;
      body["request_id"] = "tools-" + std::to_string(seed);  // call ids derive from it
      const json response = server.PostOk("/v1/chat/completions", body);
      const json& message = response["choices"][0]["message"];
      SCOPED_TRACE(choice.dump() + " seed " + std::to_string(seed) + ": " + response.dump());
      EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
      EXPECT_TRUE(message["content"].is_null());
      ExpectValidCalls(message["tool_calls"], only);
      if (!only.empty()) {
        EXPECT_EQ(message["tool_calls"].size(), 1u);
      }
      num_calls += static_cast<int>(message["tool_calls"].size());

      body["stream"] = true;
      httplib::Result res = server.Post("/v1/chat/completions", body);
      ASSERT_TRUE(res && res->status == 200);
      std::string finish_reason;
      const json streamed = StreamedCalls(SseEvents(res->body), finish_reason);
      EXPECT_EQ(finish_reason, "tool_calls");
      ExpectValidCalls(streamed, only);
      // Same seed, same tokens: the stream's calls are the response's (ids included).
      EXPECT_EQ(streamed, message["tool_calls"]);
    }
  }
  EXPECT_GE(num_calls, 16);
}

INSTANTIATE_TEST_SUITE_P(Parsers, ToolChoiceTest, ::testing::Values("hermes", "qwen3_coder"));

TEST(ApiServerToolsTest, AutoReadsCallsOutOfTheOutput) {
  TestServer server(testing::ServerEngineConfig(), ToolServerConfig("hermes"));
  json body = {{"messages", kUser}, {"tools", kTools}, {"max_tokens", 100}, {"temperature", 0}};
  body["guided_regex"] = "ok <tool_call>\n\\{\"name\": \"now\", \"arguments\": \\{\\}\\}\n</tool_call>";
  const json message = server.PostOk("/v1/chat/completions", body)["choices"][0];
  EXPECT_EQ(message["finish_reason"], "tool_calls");
  EXPECT_EQ(message["message"]["content"], "ok ");
  ASSERT_EQ(message["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(message["message"]["tool_calls"][0]["function"]["name"], "now");
  EXPECT_EQ(message["message"]["tool_calls"][0]["function"]["arguments"], "{}");
  // tool_choice none: the same output stays content.
  body["tool_choice"] = "none";
  const json none = server.PostOk("/v1/chat/completions", body)["choices"][0];
  EXPECT_EQ(none["finish_reason"], "stop");
  EXPECT_TRUE(none["message"]["tool_calls"].empty());
  EXPECT_EQ(none["message"]["content"].get<std::string>().rfind("ok <tool_call>", 0), 0u);
}

TEST(ApiServerToolsTest, ToolChoicesTheServerCannotServeAre400s) {
  TestServer plain;  // no --enable-auto-tool-choice, no --tool-call-parser
  for (const json& choice : {json("auto"), json("required")}) {
    httplib::Result res = plain.Post("/v1/chat/completions", {{"messages", kUser}, {"tools", kTools}, {"tool_choice", choice}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_EQ(json::parse(res->body)["error"]["param"], "tool_choice") << res->body;
  }
  TestServer server(testing::ServerEngineConfig(), ToolServerConfig("qwen3_coder"));
  const json unknown = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  const ojson patterned = ojson::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"p": {"type": "string", "pattern": "a+"}}}}}])");
  struct Case {
    json body;
    const char* param;
  };
  const std::vector<Case> cases = {
      {{{"messages", kUser}, {"tools", kTools}, {"tool_choice", unknown}}, "tool_choice"},
      {{{"messages", kUser}, {"tools", patterned}, {"tool_choice", "required"}}, "tools"},
      {{{"messages", kUser}, {"tool_choice", "required"}}, "tool_choice"},
      {{{"messages", kUser}, {"tools", kTools}, {"tool_choice", "required"}, {"guided_regex", "a"}}, "guided_regex"},
      {{{"messages", kUser}, {"tools", kTools}, {"parallel_tool_calls", false}}, "parallel_tool_calls"},
  };
  for (const Case& c : cases) {
    httplib::Result res = server.Post("/v1/chat/completions", c.body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << c.body.dump() << ": " << res->body;
    EXPECT_EQ(json::parse(res->body)["error"]["param"], c.param) << res->body;
  }
}

// The reasoning / content split of the server, on an output forced by a regex: the
// prompt closes the reasoning (enable_thinking false renders "<think>\n\n</think>"),
// so the grammar holds from the first token and can write a <think> block itself.
TEST(ApiServerToolsTest, ReasoningContentIsSplitOffInResponsesAndStreams) {
  EngineConfig engine = testing::ServerEngineConfig();
  engine.reasoning_parser = "qwen3";
  TestServer server(engine);
  json body = {{"messages", kUser}, {"max_tokens", 60}, {"temperature", 1.0}, {"seed", 3}};
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  body["guided_regex"] = "<think>[a-z]{3,8}</think>\n\n[0-9]{2}";
  const json message = server.PostOk("/v1/chat/completions", body)["choices"][0]["message"];
  EXPECT_TRUE(std::regex_match(message["reasoning_content"].get<std::string>(), std::regex("[a-z]{3,8}"))) << message;
  EXPECT_TRUE(std::regex_match(message["content"].get<std::string>(), std::regex("[0-9]{2}"))) << message;
  body["stream"] = true;
  httplib::Result res = server.Post("/v1/chat/completions", body);
  ASSERT_TRUE(res && res->status == 200);
  std::string reasoning, content;
  for (const json& event : SseEvents(res->body)) {
    const json& delta = event["choices"][0]["delta"];
    reasoning += delta.value("reasoning_content", "");
    content += delta.value("content", "");
  }
  EXPECT_EQ(reasoning, message["reasoning_content"].get<std::string>());
  EXPECT_EQ(content, message["content"].get<std::string>());
  body["stream"] = false;
  body["include_reasoning"] = false;
  const json without = server.PostOk("/v1/chat/completions", body)["choices"][0]["message"];
  EXPECT_FALSE(without.contains("reasoning_content")) << without;
  EXPECT_EQ(without["content"], message["content"]);
}

// A prompt that leaves <think> open: the grammar waits for the model's </think>. The
// tokens are limited to digits, 'a', </think> (323) and EOS (321), so that a
// random-weight model writes some reasoning and then closes it.
TEST(ApiServerToolsTest, TheGrammarStartsAfterTheReasoningEnds) {
  EngineConfig engine = testing::ServerEngineConfig();
  engine.reasoning_parser = "qwen3";
  openai::ServerConfig config = testing::QuietServerConfig();
  config.chat_template =
      "{%- for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{%- endfor %}"
      "<|im_start|>assistant\n<think>\n";
  TestServer server(engine, config);
  std::vector<int> allowed = {'a', 323, 321};
  for (int d = '0'; d <= '9'; ++d) allowed.push_back(d);
  int num_closed = 0, with_reasoning = 0;
  for (int seed = 0; seed < 16; ++seed) {
    json body = {{"messages", kUser}, {"max_tokens", 120}, {"temperature", 1.0}, {"seed", seed}};
    body["allowed_token_ids"] = allowed;
    body["structured_outputs"] = {{"regex", "a[0-9]{3}"}};
    body["return_token_ids"] = true;
    const json choice = server.PostOk("/v1/chat/completions", body)["choices"][0];
    const json& message = choice["message"];
    const json& ids = choice["token_ids"];
    // Until </think> nothing is constrained: the model may also end (EOS) or run out.
    if (std::find(ids.begin(), ids.end(), 323) == ids.end()) continue;
    ++num_closed;
    EXPECT_EQ(choice["finish_reason"], "stop") << choice;
    EXPECT_TRUE(std::regex_match(message["content"].get<std::string>(), std::regex("a[0-9]{3}"))) << choice;
    if (!message["reasoning_content"].is_null()) {
      ++with_reasoning;
      EXPECT_FALSE(std::regex_match(message["reasoning_content"].get<std::string>(), std::regex("a[0-9]{3}")));
    }
  }
  EXPECT_GE(num_closed, 4);
  EXPECT_GE(with_reasoning, 2);
}

}  // namespace
}  // namespace vllm
