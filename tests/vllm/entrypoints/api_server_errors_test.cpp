// Every bad request gets a 4xx with OpenAI's error JSON
//   {"error": {"message", "type", "param", "code"}}
// naming the problem, and leaves the server serving: after all the cases, a good
// request still gets its tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server_fixture.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::TestServer;

struct BadCase {
  const char* name;
  const char* path;
  std::string body;  // sent as is (so malformed JSON can be sent)
  int status;
  json param;           // the error's "param"
  const char* message;  // a piece of the error message
};

json Completion(json fields) {
  json body = {{"prompt", "hello"}, {"max_tokens", 4}};
  body.update(fields);
  return body;
}

json Chat(json fields) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 4}};
  body.update(fields);
  return body;
}

std::vector<BadCase> BadCases() {
  const std::string long_prompt = json(std::vector<int>(300, 65)).dump();
  const json image_part = json::object({{"type", "image_url"}, {"image_url", "x"}});
  const json image_message = json::object({{"role", "user"}, {"content", json::array({image_part})}});
  const std::string deep = "{\"prompt\": \"a\", \"stop\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  return {
      {"malformed JSON", "/v1/completions", "{\"prompt\": ", 400, nullptr, "not valid JSON"},
      {"JSON nested 100000 deep", "/v1/completions", deep, 400, nullptr, "nested deeper than 100 levels"},
      {"body not an object", "/v1/completions", "[1, 2]", 400, nullptr, "must be a JSON object"},
      {"unknown model", "/v1/completions", Completion({{"model", "gpt-4"}}).dump(), 404, "model",
       "The model `gpt-4` does not exist"},
      {"negative temperature", "/v1/completions", Completion({{"temperature", -1}}).dump(), 400, "temperature",
       "temperature must be >= 0"},
      {"temperature of the wrong type", "/v1/completions", Completion({{"temperature", "hot"}}).dump(), 400,
       "temperature", "'temperature' must be a number"},
      {"top_p out of range", "/v1/completions", Completion({{"top_p", 2}}).dump(), 400, "top_p",
       "top_p must be in (0, 1]"},
      {"top_k out of range", "/v1/completions", Completion({{"top_k", -5}}).dump(), 400, "top_k", "top_k must be"},
      {"presence_penalty out of range", "/v1/chat/completions", Chat({{"presence_penalty", 3}}).dump(), 400,
       "presence_penalty", "in [-2, 2]"},
      {"n 0", "/v1/completions", Completion({{"n", 0}}).dump(), 400, "n", "'n' must be between 1 and 128"},
      {"n past the bound", "/v1/chat/completions", Chat({{"n", 129}}).dump(), 400, "n", "'n' must be between 1 and 128"},
      {"max_tokens 0", "/v1/completions", Completion({{"max_tokens", 0}}).dump(), 400, "max_tokens",
       "max_tokens must be >= 1"},
      {"max_tokens past max_model_len", "/v1/completions", Completion({{"max_tokens", 1000}}).dump(), 400, "max_tokens",
       "This model's maximum context length is 256 tokens. However, you requested"},
      {"max_tokens at the int64 limit", "/v1/completions", Completion({{"max_tokens", INT64_MAX}}).dump(), 400,
       "max_tokens", "9223372036854775807 in the completion"},
      {"prompt past max_model_len", "/v1/completions", "{\"prompt\": " + long_prompt + "}", 400, "prompt",
       "This model's maximum context length is 256 tokens. However, you requested 300 tokens in the prompt"},
      {"prompt id outside the vocabulary", "/v1/completions", Completion({{"prompt", {1, 99999}}}).dump(), 400,
       "prompt", "prompt token 1 is 99999"},
      {"empty prompt", "/v1/completions", Completion({{"prompt", ""}}).dump(), 400, "prompt", "the prompt is empty"},
      {"missing prompt", "/v1/completions", json{{"max_tokens", 4}}.dump(), 400, "prompt", "'prompt' is required"},
      {"prompt of the wrong type", "/v1/completions", Completion({{"prompt", json::object({{"a", 1}})}}).dump(), 400,
       "prompt", "'prompt' must be"},
      {"logprobs above 20", "/v1/completions", Completion({{"logprobs", 50}}).dump(), 400, "logprobs",
       "logprobs must be in [0, 20]"},
      {"stop of the wrong type", "/v1/completions", Completion({{"stop", 5}}).dump(), 400, "stop", "'stop' must be"},
      {"stream_options without stream", "/v1/completions",
       Completion({{"stream_options", {{"include_usage", true}}}}).dump(), 400, "stream_options",
       "only be set when stream is true"},
      {"missing messages", "/v1/chat/completions", json{{"max_tokens", 4}}.dump(), 400, "messages",
       "'messages' is required"},
      {"messages not a list", "/v1/chat/completions", Chat({{"messages", "hi"}}).dump(), 400, "messages",
       "'messages' must be a non-empty list"},
      {"message without a role", "/v1/chat/completions",
       Chat({{"messages", json::array({json::object({{"content", "hi"}})})}}).dump(), 400, "messages",
       "messages[0] must be an object with a string 'role'"},
      {"image content", "/v1/chat/completions", Chat({{"messages", json::array({image_message})}}).dump(), 400,
       "messages", "content parts of type 'image_url' are not supported"},
      {"top_logprobs without logprobs", "/v1/chat/completions", Chat({{"top_logprobs", 2}}).dump(), 400, "top_logprobs",
       "top_logprobs needs logprobs"},
      {"tool_choice auto without tools", "/v1/chat/completions", Chat({{"tool_choice", "auto"}}).dump(), 400,
       "tool_choice", "needs a non-empty tools list"},
      {"chat_template_kwargs not an object", "/v1/chat/completions", Chat({{"chat_template_kwargs", 3}}).dump(), 400,
       "chat_template_kwargs", "must be an object"},
      {"chat max_tokens past max_model_len", "/v1/chat/completions", Chat({{"max_completion_tokens", 500}}).dump(), 400,
       "max_tokens", "in the messages"},
      {"tokenize without a prompt", "/tokenize", "{}", 400, "prompt", "send 'prompt'"},
      {"detokenize of a bad id", "/detokenize", json{{"tokens", {1, -3}}}.dump(), 400, "tokens", "tokens[1] is -3"},
      {"unknown route", "/v1/embeddings", "{}", 404, nullptr, "no route POST /v1/embeddings"},
      // Numbers past a double's range (the JSON parser cannot hold them) name their field.
      {"temperature 1e999", "/v1/completions", R"({"prompt": "hello", "temperature": 1e999})", 400, "temperature",
       "'temperature' is a number out of range (number overflow parsing '1e999')"},
      {"seed -1e999", "/v1/completions", R"({"prompt": "hello", "seed": -1e999})", 400, "seed",
       "'seed' is a number out of range"},
      {"presence_penalty 1e999 in a chat", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "presence_penalty": 1e999})", 400, "presence_penalty",
       "'presence_penalty' is a number out of range"},
      {"stop token id 1e999", "/v1/completions", R"({"prompt": "hello", "stop_token_ids": [1, 1e999]})", 400,
       "stop_token_ids", "'stop_token_ids[1]' is a number out of range"},
      {"a tool schema number 1e999", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": )"
       R"({"name": "f", "parameters": {"maximum": 1e999}}}]})",
       400, "tools", "'tools[0].function.parameters.maximum' is a number out of range"},
      {"tokenize with a number 1e999", "/tokenize", R"({"prompt": "hi", "add_special_tokens": 1e999})", 400,
       "add_special_tokens", "'add_special_tokens' is a number out of range"},
      {"detokenize of a token 1e999", "/detokenize", R"({"tokens": [1, 1e999]})", 400, "tokens",
       "'tokens[1]' is a number out of range"},
      {"a body that is 1e999", "/v1/completions", "1e999", 400, nullptr, "the request body is a number out of range"},
  };
}

void ExpectError(const httplib::Result& res, int status, const json& param, const std::string& message,
                 const std::string& what) {
  ASSERT_TRUE(res) << what << ": no response";
  EXPECT_EQ(res->status, status) << what << ": " << res->body;
  const json body = json::parse(res->body, nullptr, false);
  ASSERT_TRUE(body.contains("error")) << what << ": " << res->body;
  const json& error = body["error"];
  EXPECT_EQ(error["code"], status) << what;
  EXPECT_TRUE(error["type"].is_string()) << what;
  EXPECT_EQ(error["param"], param) << what << ": " << res->body;
  EXPECT_NE(error["message"].get<std::string>().find(message), std::string::npos)
      << what << ": '" << error["message"].get<std::string>() << "' lacks '" << message << "'";
}

TEST(ApiServerErrorsTest, EachBadRequestGetsItsErrorAndTheServerKeepsServing) {
  TestServer server;
  for (const BadCase& c : BadCases()) {
    ExpectError(server.Client().Post(c.path, c.body, "application/json"), c.status, c.param, c.message, c.name);
  }
  // Streaming requests are checked before the stream starts: the error is a plain JSON 400.
  ExpectError(server.Post("/v1/completions", Completion({{"stream", true}, {"top_p", 0}})), 400, "top_p",
              "top_p must be", "stream with a bad top_p");
  const json ok = server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}}, 3));
  EXPECT_EQ(ok["usage"]["completion_tokens"], 3);
  ASSERT_TRUE(server.WaitUntilIdle());
  EXPECT_EQ(server.Metric("vllm:kv_cache_usage_perc"), 0);
}

TEST(ApiServerErrorsTest, WrongMethodsGet405) {
  TestServer server;
  ExpectError(server.Client().Get("/v1/completions"), 405, nullptr, "takes POST, not GET", "GET /v1/completions");
  ExpectError(server.Client().Post("/v1/models", "{}", "application/json"), 405, nullptr, "takes GET, not POST",
              "POST /v1/models");
  ExpectError(server.Client().Delete("/v1/chat/completions"), 405, nullptr, "takes POST",
              "DELETE /v1/chat/completions");
  ExpectError(server.Client().Post("/metrics", "{}", "application/json"), 405, nullptr, "takes GET", "POST /metrics");
}

TEST(ApiServerErrorsTest, MissingAndWrongApiKeysGet401) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.api_key = "sk-test";
  TestServer server(testing::ServerEngineConfig(), config);
  ExpectError(server.Post("/v1/completions", Completion(json::object())), 401, nullptr, "Missing API key", "no key");
  ExpectError(server.Post("/v1/completions", Completion(json::object()), {{"Authorization", "Bearer nope"}}), 401,
              nullptr, "Invalid API key", "wrong key");
  ExpectError(server.Client().Get("/v1/models"), 401, nullptr, "Missing API key", "GET /v1/models without a key");
  httplib::Result ok =
      server.Post("/v1/completions", Completion(json::object()), {{"Authorization", "Bearer sk-test"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  // As in vLLM, only the /v1 routes need the key.
  EXPECT_EQ(server.Client().Get("/health")->status, 200);
  EXPECT_EQ(server.Client().Get("/metrics")->status, 200);
}

TEST(ApiServerErrorsTest, ModelsWithoutAChatTemplateOrTokenizerSayWhatIsMissing) {
  EngineConfig no_tokenizer = testing::ServerEngineConfig();
  no_tokenizer.tokenizer.clear();  // the reference model folder has no tokenizer.json
  TestServer server(no_tokenizer);
  ExpectError(server.Post("/v1/completions", Completion(json::object())), 400, nullptr, "needs a tokenizer",
              "text prompt");
  ExpectError(server.Post("/v1/chat/completions", Chat(json::object())), 400, nullptr, "needs a tokenizer", "chat");
  // Token ids still work, and logprob tokens are named by id.
  const json res = server.PostOk("/v1/completions", Greedy({{"prompt", {1, 2, 3}}, {"logprobs", 0}}, 2));
  EXPECT_EQ(res["choices"][0]["text"], "");
  EXPECT_EQ(res["choices"][0]["logprobs"]["tokens"][0].get<std::string>().rfind("token_id:", 0), 0u);
}

TEST(ApiServerErrorsTest, AModelChatTemplateThatDoesNotParseFailsChatOnly) {
  testing::TempDir tokenizer;
  std::filesystem::copy_file(testing::ServerTokenizerDir() + "/tokenizer.json", tokenizer.File("tokenizer.json"));
  json config = json::parse(std::ifstream(testing::ServerTokenizerDir() + "/tokenizer_config.json"));
  config["chat_template"] = "{% for m in messages %}{{ m.content }";
  std::ofstream(tokenizer.File("tokenizer_config.json")) << config.dump();
  EngineConfig engine = testing::ServerEngineConfig();
  engine.tokenizer = tokenizer.path();
  TestServer server(engine);
  ExpectError(server.Post("/v1/chat/completions", Chat(json::object())), 400, nullptr,
              "the model's chat template cannot be used", "chat with a broken template");
  EXPECT_EQ(server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}}, 2))["usage"]["completion_tokens"], 2);
}

TEST(ApiServerErrorsTest, AChatTemplateFlagThatCannotBeReadStopsTheStart) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.chat_template = "/nonexistent/template.jinja";
  EXPECT_THROW(openai::ApiServer(std::make_unique<LLMEngine>(testing::ServerEngineConfig()), config),
               std::invalid_argument);
}

TEST(ApiServerErrorsTest, APortInUseIsAnError) {
  TestServer first;
  openai::ServerConfig config = testing::QuietServerConfig();
  config.port = first.port();
  openai::ApiServer second(std::make_unique<LLMEngine>(testing::ServerEngineConfig()), config);
  EXPECT_THROW(second.Bind(), std::runtime_error);
}

}  // namespace
}  // namespace vllm
