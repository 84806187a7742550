// Every field of vLLM's CompletionRequest and ChatCompletionRequest is honoured or
// refused with a 400 naming it (request_fields.h); none is taken and ignored. The
// first test sends each field once; the others check the effect of the fields
// vllm-cpp honours beyond plain sampling (whose effects api_server_test.cpp checks).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "server_fixture.h"
#include "vllm/entrypoints/openai/request_fields.h"

namespace vllm {
namespace {

using nlohmann::json;
using openai::Endpoint;
using testing::Greedy;
using testing::SseEvents;
using testing::TestServer;

const json kUser = json::array({{{"role", "user"}, {"content", "hello"}}});

// A value for each field and whether vllm-cpp serves it (200) or refuses it (400
// naming the field). Values for refused fields are ones that would change the output.
struct FieldCase {
  json value;
  int status;
  const char* param = nullptr;  // the field a 400 names, when not this one
};

std::map<std::string, FieldCase> FieldCases(Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::kChat;
  std::map<std::string, FieldCase> cases = {
      {"model", {"test-model", 200}},
      {"prompt_embeds", {"AAAA", 400}},
      {"audio", {{{"format", "wav"}, {"voice", "alloy"}}, 400}},
      {"modalities", {json::array({"text", "audio"}), 400}},
      {"best_of", {2, 200}},
      {"echo", {true, 200}},
      {"frequency_penalty", {0.5, 200}},
      {"logit_bias", {{{"65", 2.0}}, 200}},
      {"logprobs", {chat ? json(true) : json(2), 200}},
      {"top_logprobs", {0, 200}},
      {"max_tokens", {3, 200}},
      {"max_completion_tokens", {3, 200}},
      {"n", {2, 200}},
      {"presence_penalty", {0.5, 200}},
      {"response_format", {{{"type", "json_object"}}, 200}},
      {"seed", {7, 200}},
      {"stop", {"zz", 200}},
      {"stream", {false, 200}},
      {"stream_options", {nullptr, 200}},
      {"suffix", {"tail", 400}},
      {"temperature", {0.5, 200}},
      {"top_p", {0.9, 200}},
      // Tools alone mean tool_choice "auto" (served with "none": the last test).
      {"tools", {json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}}), 400, "tool_choice"}},
      {"tool_choice", {"none", 200}},
      {"reasoning_effort", {"low", 200}},
      {"thinking_token_budget", {10, 400}},
      {"include_reasoning", {false, 400}},
      {"parallel_tool_calls", {false, 400}},
      {"user", {"someone", 200}},
      {"use_beam_search", {true, 400}},
      {"top_k", {5, 200}},
      {"min_p", {0.1, 200}},
      {"repetition_penalty", {1.1, 200}},
      {"length_penalty", {0.5, 400}},
      {"stop_token_ids", {json::array({321}), 200}},
      {"include_stop_str_in_output", {true, 200}},
      {"ignore_eos", {true, 200}},
      {"min_tokens", {1, 200}},
      {"skip_special_tokens", {false, 200}},
      {"spaces_between_special_tokens", {false, 200}},
      {"truncate_prompt_tokens", {2, 200}},
      {"prompt_logprobs", {1, 200}},
      {"allowed_token_ids", {json::array({65, 66}), 200}},
      {"bad_words", {json::array({"a"}), 200}},
      {"add_generation_prompt", {true, 200}},
      {"continue_final_message", {true, 400}},
      {"add_special_tokens", {true, 200}},
      {"documents", {json::array({{{"title", "t"}, {"text", "x"}}}), 200}},
      {"chat_template", {"{{ messages[0]['content'] }}", 400}},  // the server does not trust request templates
      {"chat_template_kwargs", {{{"enable_thinking", false}}, 200}},
      {"mm_processor_kwargs", {{{"size", 3}}, 400}},
      {"structured_outputs", {{{"choice", {"a", "b"}}}, 200}},
      {"guided_json", {{{"type", "object"}}, 200}},
      {"guided_regex", {"[ab]+", 200}},
      {"guided_choice", {json::array({"a", "b"}), 200}},
      {"guided_grammar", {"root ::= \"a\"", 200}},
      {"structural_tag", {"{}", 400}},
      {"guided_decoding_backend", {"xgrammar", 400}},
      {"guided_whitespace_pattern", {" ", 400}},
      {"priority", {1, 400}},
      {"request_id", {chat ? "fields-chat" : "fields-completion", 200}},
      {"logits_processors", {json::array({"my.Processor"}), 400}},
      {"return_tokens_as_token_ids", {true, 200}},
      {"return_token_ids", {true, 200}},
      {"cache_salt", {"salt", 400}},
      {"kv_transfer_params", {{{"do_remote_prefill", true}}, 400}},
      {"vllm_xargs", {{{"x", 1}}, 400}},
  };
  if (chat) {
    cases["messages"] = {kUser, 200};
  } else {
    cases["prompt"] = {"hello", 200};
  }
  return cases;
}

TEST(ApiServerFieldsTest, EveryFieldOfVllmsRequestsIsServedOrRefusedByName) {
  TestServer server;
  for (const Endpoint endpoint : {Endpoint::kCompletion, Endpoint::kChat}) {
    const bool chat = endpoint == Endpoint::kChat;
    const char* path = chat ? "/v1/chat/completions" : "/v1/completions";
    const std::map<std::string, FieldCase> cases = FieldCases(endpoint);
    const json base = chat ? json{{"messages", kUser}, {"max_tokens", 2}} : json{{"prompt", "hello"}, {"max_tokens", 2}};
    const std::vector<std::string> names = openai::RequestFieldNames(endpoint);
    for (const std::string& name : names) {
      ASSERT_TRUE(cases.count(name)) << path << ": no case for field " << name;
      const FieldCase& c = cases.at(name);
      json body = base;
      body[name] = c.value;
      httplib::Result res = server.Post(path, body);
      ASSERT_TRUE(res) << name;
      EXPECT_EQ(res->status, c.status) << path << " " << name << ": " << res->body;
      if (c.status == 400) {
        EXPECT_EQ(json::parse(res->body)["error"]["param"], c.param ? c.param : name) << res->body;
      }
    }
    // Fields of the other endpoint, and fields of neither, are refused by name.
    for (const auto& [name, c] : FieldCases(chat ? Endpoint::kCompletion : Endpoint::kChat)) {
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      json body = base;
      body[name] = c.value;
      httplib::Result res = server.Post(path, body);
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 400) << path << " " << name << ": " << res->body;
      EXPECT_EQ(json::parse(res->body)["error"]["param"], name) << res->body;
    }
    json unknown = base;
    unknown["temprature"] = 0.5;
    httplib::Result res = server.Post(path, unknown);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_EQ(json::parse(res->body)["error"]["param"], "temprature");
    EXPECT_NE(res->body.find("unknown field 'temprature'"), std::string::npos) << res->body;
    // Refused fields pass with the value that means "off".
    json off = base;
    for (const auto& [name, value] : {std::pair<const char*, json>{"n", 1}, {"best_of", 1}, {"use_beam_search", false},
                                      {"length_penalty", 1.0}, {"priority", 0}, {"guided_json", nullptr}}) {
      off[name] = value;
    }
    off["response_format"] = {{"type", "text"}};
    EXPECT_EQ(server.Post(path, off)->status, 200) << path;
  }
}

// The token id of a one-byte text in the test tokenizer.
int32_t TokenOf(const TestServer& server, const std::string& text) {
  const json tokens = server.PostOk("/tokenize", {{"prompt", text}})["tokens"];
  EXPECT_EQ(tokens.size(), 1u) << text;
  return tokens[0].get<int32_t>();
}

TEST(ApiServerFieldsTest, LogitBiasAllowedTokenIdsAndBadWordsSteerTheTokens) {
  TestServer server;
  const int32_t a = TokenOf(server, "a"), b = TokenOf(server, "b");
  const json base = Greedy({{"prompt", "hello"}, {"return_token_ids", true}}, 8);
  json biased = base;
  biased["logit_bias"] = {{std::to_string(a), 100}};
  EXPECT_EQ(server.PostOk("/v1/completions", biased)["choices"][0]["token_ids"], std::vector<int32_t>(8, a));
  // Banning "a" leaves the next best; allowing only b gives b.
  json banned = biased;
  banned["bad_words"] = {"a"};
  const json banned_response = server.PostOk("/v1/completions", banned);  // kept alive: the loop reads into it
  for (const json& id : banned_response["choices"][0]["token_ids"]) EXPECT_NE(id, a);
  json allowed = biased;
  allowed["allowed_token_ids"] = {b};
  EXPECT_EQ(server.PostOk("/v1/completions", allowed)["choices"][0]["token_ids"], std::vector<int32_t>(8, b));
  // The same fields on the chat endpoint.
  json chat = Greedy({{"messages", kUser}, {"return_token_ids", true}, {"allowed_token_ids", {b}}}, 4);
  EXPECT_EQ(server.PostOk("/v1/chat/completions", chat)["choices"][0]["token_ids"], std::vector<int32_t>(4, b));
  json bad_bias = base;
  bad_bias["logit_bias"] = {{"x", 1}};
  EXPECT_EQ(server.Post("/v1/completions", bad_bias)->status, 400);
  bad_bias["logit_bias"] = {{"5", 500}};
  EXPECT_EQ(server.Post("/v1/completions", bad_bias)->status, 400);
}

TEST(ApiServerFieldsTest, TruncatePromptTokensKeepsThePromptsEnd) {
  TestServer server;
  const std::vector<int32_t> prompt = {65, 66, 67, 68, 69, 70, 71};
  const json res = server.PostOk(
      "/v1/completions",
      Greedy({{"prompt", prompt}, {"truncate_prompt_tokens", 3}, {"return_token_ids", true}, {"echo", true}}, 2));
  EXPECT_EQ(res["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(res["choices"][0]["prompt_token_ids"], std::vector<int32_t>({69, 70, 71}));
  const std::string kept = server.PostOk("/detokenize", {{"tokens", {69, 70, 71}}})["prompt"];
  EXPECT_EQ(res["choices"][0]["text"].get<std::string>().rfind(kept, 0), 0u) << res;
  const json chat = server.PostOk("/v1/chat/completions",
                                  Greedy({{"messages", kUser}, {"truncate_prompt_tokens", 4}, {"return_token_ids", true}}, 2));
  EXPECT_EQ(chat["usage"]["prompt_tokens"], 4);
  const json rendered = server.PostOk("/tokenize", {{"messages", kUser}})["tokens"];
  EXPECT_EQ(chat["prompt_token_ids"], json(std::vector<json>(rendered.end() - 4, rendered.end())));
  for (int k : {0, -2, 1000}) {
    httplib::Result bad = server.Post("/v1/completions", {{"prompt", prompt}, {"truncate_prompt_tokens", k}});
    EXPECT_EQ(bad->status, 400) << k;
    EXPECT_EQ(json::parse(bad->body)["error"]["param"], "truncate_prompt_tokens");
  }
}

TEST(ApiServerFieldsTest, ReturnTokensAsTokenIdsNamesLogprobTokensByTheirIds) {
  TestServer server;
  const json completion = server.PostOk(
      "/v1/completions",
      Greedy({{"prompt", "hi"}, {"logprobs", 1}, {"return_tokens_as_token_ids", true}, {"return_token_ids", true}}, 3));
  const json& choice = completion["choices"][0];
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(choice["logprobs"]["tokens"][i], "token_id:" + std::to_string(choice["token_ids"][i].get<int>()));
  }
  const json chat = server.PostOk("/v1/chat/completions", Greedy({{"messages", kUser},
                                                                  {"logprobs", true},
                                                                  {"top_logprobs", 1},
                                                                  {"return_tokens_as_token_ids", true},
                                                                  {"return_token_ids", true}},
                                                                 3));
  const json& content = chat["choices"][0]["logprobs"]["content"];
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(content[i]["token"], "token_id:" + std::to_string(chat["choices"][0]["token_ids"][i].get<int>()));
  }
}

TEST(ApiServerFieldsTest, RequestIdNamesTheResponse) {
  TestServer server;
  EXPECT_EQ(server.PostOk("/v1/completions", Greedy({{"prompt", "hi"}, {"request_id", "abc"}}, 1))["id"], "cmpl-abc");
  EXPECT_EQ(server.PostOk("/v1/chat/completions", Greedy({{"messages", kUser}, {"request_id", "abc"}}, 1))["id"],
            "chatcmpl-abc");
}

TEST(ApiServerFieldsTest, ChatEchoPrependsTheLastMessageOfTheAnswersRole) {
  TestServer server;
  const json messages = json::array({{{"role", "user"}, {"content", "hello"}}, {{"role", "assistant"}, {"content", "Sure"}}});
  const json body = Greedy({{"messages", messages}, {"add_generation_prompt", false}, {"echo", true}}, 4);
  const json whole = server.PostOk("/v1/chat/completions", body);
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  const std::string content = whole["choices"][0]["message"]["content"];
  EXPECT_EQ(content.rfind("Sure", 0), 0u) << content;
  json no_echo = body;
  no_echo["echo"] = false;
  EXPECT_EQ("Sure" + server.PostOk("/v1/chat/completions", no_echo)["choices"][0]["message"]["content"].get<std::string>(),
            content);
  json streamed = body;
  streamed["stream"] = true;
  std::string text;
  for (const json& event : SseEvents(server.Post("/v1/chat/completions", streamed)->body)) {
    text += event["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, content);
  // After a generation prompt the answer is the assistant's and a user's last message is not echoed.
  const json after_user = server.PostOk("/v1/chat/completions", Greedy({{"messages", kUser}, {"echo", true}}, 2));
  const json plain = server.PostOk("/v1/chat/completions", Greedy({{"messages", kUser}}, 2));
  EXPECT_EQ(after_user["choices"][0]["message"]["content"], plain["choices"][0]["message"]["content"]);
}

TEST(ApiServerFieldsTest, RequestChatTemplatesDocumentsAndReasoningEffortReachTheTemplate) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.trust_request_chat_template = true;
  TestServer server(testing::ServerEngineConfig(), config);
  const json body = Greedy({{"messages", kUser},
                            {"chat_template", "{{ messages[0]['content'] }}|{{ documents[0]['title'] }}|{{ reasoning_effort }}"},
                            {"documents", {{{"title", "T"}, {"text", "x"}}}},
                            {"reasoning_effort", "low"},
                            {"return_token_ids", true}},
                           1);
  const json res = server.PostOk("/v1/chat/completions", body);
  EXPECT_EQ(res["prompt_token_ids"], server.PostOk("/tokenize", {{"prompt", "hello|T|low"}})["tokens"]);
  json broken = body;
  broken["chat_template"] = "{% if %}";
  httplib::Result bad = server.Post("/v1/chat/completions", broken);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "chat_template");
}

TEST(ApiServerFieldsTest, ContinuousUsageStatsPutTheUsageInEveryChunk) {
  TestServer server;
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = Greedy({{"stream", true}, {"stream_options", {{"continuous_usage_stats", true}}}}, 4);
    if (std::string(path) == "/v1/completions") {
      body["prompt"] = "hello";
    } else {
      body["messages"] = kUser;
    }
    const std::vector<json> events = SseEvents(server.Post(path, body)->body);
    ASSERT_GE(events.size(), 3u);
    int64_t last = -1;
    for (const json& event : events) {
      ASSERT_TRUE(event.contains("usage")) << path << ": " << event;
      const int64_t completion_tokens = event["usage"]["completion_tokens"];
      EXPECT_GE(completion_tokens, last);
      last = completion_tokens;
    }
    EXPECT_EQ(last, 4) << path;  // the closing usage chunk (include_usage defaults to true)
    json unknown = body;
    unknown["stream_options"] = {{"include_usage", true}, {"other", 1}};
    EXPECT_EQ(server.Post(path, unknown)->status, 400);
  }
}

TEST(ApiServerFieldsTest, SpecialTokenSpacingAndToolsWithoutAChoiceAreRefusedWhereTheyWouldBeIgnored) {
  TestServer server;
  const json keep_special = Greedy({{"prompt", "hi"}, {"skip_special_tokens", false}}, 2);
  json spaced = keep_special;
  spaced["spaces_between_special_tokens"] = true;
  httplib::Result refused = server.Post("/v1/completions", spaced);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(json::parse(refused->body)["error"]["param"], "spaces_between_special_tokens");
  spaced["spaces_between_special_tokens"] = false;
  EXPECT_EQ(server.Post("/v1/completions", spaced)->status, 200);
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  httplib::Result auto_choice = server.Post("/v1/chat/completions", {{"messages", kUser}, {"tools", tools}});
  EXPECT_EQ(auto_choice->status, 400);
  EXPECT_EQ(json::parse(auto_choice->body)["error"]["param"], "tool_choice");
  EXPECT_EQ(server.Post("/v1/chat/completions", Greedy({{"messages", kUser}, {"tools", tools}, {"tool_choice", "none"}}, 1))
                ->status,
            200);
}

// /tokenize and /detokenize: every field of vLLM's TokenizeCompletionRequest,
// TokenizeChatRequest and DetokenizeRequest is read or refused by name; a field of
// another form, of neither, or "prompt" with "messages" is a 400 naming it. The chat
// form's rendering fields change the tokens as they change a chat request's prompt.
TEST(ApiServerFieldsTest, TokenizeAndDetokenizeReadOrRefuseEveryField) {
  using openai::TokenizationForm;
  openai::ServerConfig config = testing::QuietServerConfig();
  config.trust_request_chat_template = true;
  TestServer server(testing::ServerEngineConfig(), config);
  const std::map<std::string, FieldCase> cases = {
      {"model", {"test-model", 200}},
      {"prompt", {"hello", 200}},
      {"messages", {kUser, 200}},
      {"add_special_tokens", {false, 200}},
      {"return_token_strs", {true, 200}},
      {"add_generation_prompt", {false, 200}},
      {"chat_template", {"{{ messages[0]['content'] }}", 200}},
      {"chat_template_kwargs", {{{"enable_thinking", false}}, 200}},
      {"tools", {json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}}), 200}},
      {"documents", {json::array({{{"title", "T"}, {"text", "x"}}}), 200}},
      {"reasoning_effort", {"low", 200}},
      {"continue_final_message", {true, 400}},
      {"mm_processor_kwargs", {{{"x", 1}}, 400}},
      {"tokens", {json::array({1, 2}), 200}},
  };
  struct Form {
    TokenizationForm form;
    const char* path;
    json base;
  };
  const Form forms[] = {{TokenizationForm::kTokenizePrompt, "/tokenize", {{"prompt", "hello"}}},
                        {TokenizationForm::kTokenizeChat, "/tokenize", {{"messages", kUser}}},
                        {TokenizationForm::kDetokenize, "/detokenize", {{"tokens", {1, 2}}}}};
  for (const Form& f : forms) {
    const std::vector<std::string> names = openai::TokenizationFieldNames(f.form);
    for (const auto& [name, c] : cases) {
      const bool declared = std::find(names.begin(), names.end(), name) != names.end();
      // "prompt" and "messages" pick the form: sent to the other one they are the pair refused below.
      if (!declared && f.form != TokenizationForm::kDetokenize && (name == "prompt" || name == "messages")) continue;
      json body = f.base;
      body[name] = c.value;
      httplib::Result res = server.Post(f.path, body);
      ASSERT_TRUE(res) << name;
      EXPECT_EQ(res->status, declared ? c.status : 400) << f.path << " " << f.base.dump() << " " << name << ": " << res->body;
      if (res->status == 400) {
        EXPECT_EQ(json::parse(res->body)["error"]["param"], name) << res->body;
      }
    }
    json unknown = f.base;
    unknown["max_tokens"] = 4;
    httplib::Result res = server.Post(f.path, unknown);
    EXPECT_EQ(res->status, 400) << f.path;
    EXPECT_NE(res->body.find("unknown field 'max_tokens'"), std::string::npos) << res->body;
  }
  httplib::Result both = server.Post("/tokenize", {{"prompt", "hello"}, {"messages", kUser}});
  EXPECT_EQ(both->status, 400);
  EXPECT_EQ(json::parse(both->body)["error"]["param"], "prompt") << both->body;
  // The rendering fields reach the template.
  const json plain = server.PostOk("/tokenize", {{"messages", kUser}})["tokens"];
  const json no_generation =
      server.PostOk("/tokenize", {{"messages", kUser}, {"add_generation_prompt", false}})["tokens"];
  EXPECT_LT(no_generation.size(), plain.size());
  EXPECT_EQ(server.PostOk("/tokenize", {{"messages", kUser},
                                        {"chat_template", "{{ messages[0]['content'] }}|{{ documents[0]['title'] }}|{{ reasoning_effort }}"},
                                        {"documents", {{{"title", "T"}, {"text", "x"}}}},
                                        {"reasoning_effort", "low"}})["tokens"],
            server.PostOk("/tokenize", {{"prompt", "hello|T|low"}})["tokens"]);
  EXPECT_EQ(server.PostOk("/tokenize", {{"messages", kUser},
                                        {"chat_template", "{{ tools[0]['function']['name'] }}!"},
                                        {"tools", cases.at("tools").value}})["tokens"],
            server.PostOk("/tokenize", {{"prompt", "f!"}})["tokens"]);
}

}  // namespace
}  // namespace vllm
