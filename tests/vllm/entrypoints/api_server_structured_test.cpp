// Structured outputs through the server (structured_outputs_request.h): every output
// of a JSON schema request parses and validates, regex / choice / GBNF outputs match,
// in completions and chat, streamed and not, greedy and sampled, with the random-weight
// qwen3 model of server_fixture.h (352 ids, byte-level tokens). What cannot be
// compiled is a 400 naming the field and the construct.
#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "../structured_output/structured_testing.h"
#include "server_fixture.h"

namespace vllm {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
using testing::SseEvents;
using testing::TestServer;

const json kUser = json::array({{{"role", "user"}, {"content", "hello"}}});

// A random schema of the supported subset made finite for a random-weight model:
// strings without a bound get maxLength 6, arrays maxItems 3, objects no extra
// members (whose names would be unbounded strings), numbers become integers (a
// fraction has no length bound, which greedy decoding can loop in).
ojson Bounded(ojson s) {
  if (!s.is_object()) return s;
  if (s.value("type", ojson()) == "string" && !s.contains("maxLength") && !s.contains("pattern") &&
      !s.contains("format") && !s.contains("enum")) {
    s["maxLength"] = 6;
  }
  if (s.value("type", ojson()) == "number") s["type"] = "integer";
  if (s.value("type", ojson()) == "array" && !s.contains("maxItems")) s["maxItems"] = 3;
  if (s.value("type", ojson()) == "object") {
    if (!s.contains("properties")) s["properties"] = ojson::object();
    s["additionalProperties"] = false;
  }
  if (s.contains("type") && s["type"].is_array()) s["maxLength"] = 4;
  for (const char* key : {"properties", "$defs"}) {
    if (s.contains(key)) {
      for (auto& [name, sub] : s[key].items()) sub = Bounded(sub);
    }
  }
  if (s.contains("items")) s["items"] = Bounded(s["items"]);
  for (const char* key : {"anyOf", "oneOf"}) {
    if (s.contains(key)) {
      for (ojson& sub : s[key]) sub = Bounded(sub);
    }
  }
  return s;
}

// The generated text: the whole response, or the stream's deltas put together.
struct Generated {
  std::string text;
  std::string finish_reason;
};

Generated Generate(const TestServer& server, bool chat, json body) {
  const char* path = chat ? "/v1/chat/completions" : "/v1/completions";
  httplib::Result res = server.Post(path, body);
  EXPECT_TRUE(res);
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << res->body;
  if (res->status != 200) return {};
  Generated out;
  if (!body.value("stream", false)) {
    const json response = json::parse(res->body);
    const json& choice = response["choices"][0];
    out.text = chat ? choice["message"]["content"].get<std::string>() : choice["text"].get<std::string>();
    out.finish_reason = choice["finish_reason"];
    return out;
  }
  for (const json& event : SseEvents(res->body)) {
    if (event["choices"].empty()) continue;
    const json& choice = event["choices"][0];
    if (chat && choice["delta"].contains("content")) out.text += choice["delta"]["content"].get<std::string>();
    if (!chat) out.text += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
  }
  return out;
}

json Body(bool chat, bool stream, bool greedy, int seed) {
  json body = chat ? json{{"messages", kUser}} : json{{"prompt", "hello"}};
  body["max_tokens"] = 200;
  body["stream"] = stream;
  body["temperature"] = greedy ? 0.0 : 1.0;
  if (!greedy) body["seed"] = seed;
  return body;
}

// The three ways to send a schema, in turn.
void SetSchema(json& body, const ojson& schema, int way) {
  const json as_json = json::parse(schema.dump());
  if (way == 0) body["guided_json"] = schema.dump();  // as text, keeping the schema's property order
  if (way == 1) body["structured_outputs"] = {{"json", schema.dump()}, {"disable_any_whitespace", true}};
  if (way == 2) body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", as_json}}}};
}

// Whitespace gaps of up to kMaxJsonWhitespace characters add up: room for them.
EngineConfig LongOutputs() {
  EngineConfig config = testing::ServerEngineConfig();
  config.max_model_len = 2048;
  return config;
}

TEST(ApiServerStructuredTest, EveryJsonSchemaOutputParsesAndValidates) {
  TestServer server(LongOutputs());
  std::mt19937 rng(11);
  struct Case {
    ojson schema;
    bool chat, stream, greedy;
    std::future<Generated> result;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 48; ++i) {
    Case c{Bounded(structured_output::testing::RandomRootSchema(rng)), i % 2 == 1, (i / 2) % 2 == 1, (i / 4) % 2 == 1, {}};
    json body = Body(c.chat, c.stream, c.greedy, i);
    body["max_tokens"] = 2000;
    // Greedy decoding may repeat whitespace forever: its requests go without.
    SetSchema(body, c.schema, c.greedy ? 1 : i % 3);
    c.result = std::async(std::launch::async, Generate, std::cref(server), c.chat, body);
    cases.push_back(std::move(c));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Generated out = cases[i].result.get();
    SCOPED_TRACE("case " + std::to_string(i) + " schema " + cases[i].schema.dump());
    EXPECT_EQ(out.finish_reason, "stop") << out.text;
    const ojson parsed = ojson::parse(out.text, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << "not JSON: " << out.text;
    std::string why;
    EXPECT_TRUE(structured_output::testing::Validate(parsed, cases[i].schema, cases[i].schema, why))
        << why << " in " << out.text;
  }
}

TEST(ApiServerStructuredTest, RegexChoiceGrammarAndJsonObjectOutputsMatch) {
  TestServer server;
  const std::regex regex("[a-c]{2,5}-[0-9]{1,3}");
  for (bool chat : {false, true}) {
    for (bool stream : {false, true}) {
      for (int seed = 0; seed < 3; ++seed) {
        const bool greedy = seed == 0;
        json body = Body(chat, stream, greedy, seed);
        body[seed % 2 ? "guided_regex" : "structured_outputs"] =
            seed % 2 ? json("[a-c]{2,5}-[0-9]{1,3}") : json{{"regex", "[a-c]{2,5}-[0-9]{1,3}"}};
        const Generated r = Generate(server, chat, body);
        EXPECT_TRUE(std::regex_match(r.text, regex)) << r.text;
        EXPECT_EQ(r.finish_reason, "stop");

        body = Body(chat, stream, greedy, seed);
        body["guided_choice"] = json::array({"red", "green", "blue sky", "é"});
        const Generated c = Generate(server, chat, body);
        EXPECT_TRUE(c.text == "red" || c.text == "green" || c.text == "blue sky" || c.text == "é") << c.text;

        body = Body(chat, stream, greedy, seed);
        body["guided_grammar"] = "root ::= \"(\" item (\",\" item){0,2} \")\"\nitem ::= [0-9] | \"x\" [a-z]";
        const Generated g = Generate(server, chat, body);
        EXPECT_TRUE(std::regex_match(g.text, std::regex(R"(\((\d|x[a-z])(,(\d|x[a-z])){0,2}\))"))) << g.text;

        body = Body(chat, stream, greedy, seed);
        body["response_format"] = {{"type", "json_object"}};
        if (greedy) body["structured_outputs"] = {{"disable_any_whitespace", true}};
        body["max_tokens"] = 230;
        const Generated o = Generate(server, chat, body);
        if (o.finish_reason == "stop") {
          EXPECT_TRUE(json::parse(o.text, nullptr, false).is_object()) << o.text;
        } else {
          EXPECT_EQ(o.text.front(), '{') << o.text;  // any object may run past max_tokens
        }
      }
    }
  }
}

TEST(ApiServerStructuredTest, ConstraintsThatCannotBeServedAre400sNamingTheField) {
  TestServer server;
  struct Case {
    json fields;
    const char* param;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"guided_json", {{"type", "number"}, {"minimum", 1e300}}}}, "guided_json", "#/minimum"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", {{"not", {}}}}}}}}},
       "response_format", "not"},
      {{{"structured_outputs", {{"json", {{"type", "string"}, {"maxLength", 1}, {"minLength", 3}}}}}},
       "structured_outputs", "maxLength"},
      {{{"guided_regex", "a(?=b)"}}, "guided_regex", "regex"},
      {{{"guided_grammar", "root ::= item"}}, "guided_grammar", "item"},
      {{{"guided_choice", json::array()}}, "guided_choice", "non-empty"},
      {{{"guided_regex", "a"}, {"guided_choice", {"b"}}}, "guided_choice", "both constrain"},
      {{{"structured_outputs", {{"structural_tag", "{}"}}}}, "structured_outputs", "structural_tag"},
      {{{"structured_outputs", {{"disable_any_whitespace", true}}}}, "structured_outputs", "no constraint"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format", "yaml"},
  };
  for (bool chat : {false, true}) {
    for (const Case& c : cases) {
      json body = Body(chat, false, true, 0);
      body.update(c.fields);
      httplib::Result res = server.Post(chat ? "/v1/chat/completions" : "/v1/completions", body);
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 400) << c.fields.dump() << ": " << res->body;
      const json error = json::parse(res->body)["error"];
      EXPECT_EQ(error["param"], c.param) << res->body;
      EXPECT_NE(error["message"].get<std::string>().find(c.message), std::string::npos) << res->body;
    }
  }
}

// A constrained request changes nothing for the others in its batch.
TEST(ApiServerStructuredTest, UnconstrainedRequestsInTheSameBatchAreUnaffected) {
  TestServer server;
  json free = testing::Greedy({{"prompt", "hello"}, {"return_token_ids", true}}, 40);
  const json alone = server.PostOk("/v1/completions", free)["choices"][0]["token_ids"];
  std::vector<std::future<Generated>> constrained;
  for (int i = 0; i < 6; ++i) {
    json body = Body(false, false, false, i);
    body["guided_regex"] = "[0-9]{30,60}";
    constrained.push_back(std::async(std::launch::async, Generate, std::cref(server), false, body));
  }
  const json together = server.PostOk("/v1/completions", free)["choices"][0]["token_ids"];
  for (auto& c : constrained) EXPECT_TRUE(std::regex_match(c.get().text, std::regex("[0-9]{30,60}")));
  EXPECT_EQ(together, alone);
}

}  // namespace
}  // namespace vllm
