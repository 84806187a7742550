// --generation-config in the server: a request that leaves a sampling field out gets
// the file's value, a request's own value wins, `vllm` ignores the file, and a default
// max_tokens is capped by what fits the context (never a 400).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "server_fixture.h"
#include "vllm/entrypoints/generation_config.h"
#include "vllm/entrypoints/openai/protocol.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr char kQwenStyle[] = R"({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": true,
  "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.1,
  "max_new_tokens": 128, "transformers_version": "4.51.0"})";

// A server whose defaults come from `--generation-config FOLDER` holding `file`
// (`generation_config` "vllm": the file is there and ignored).
class GenerationConfigServer {
 public:
  explicit GenerationConfigServer(const std::string& file, const std::string& generation_config = "") {
    std::ofstream(dir_.File("generation_config.json")) << file;
    openai::ServerConfig config = testing::QuietServerConfig();
    config.sampling_defaults =
        LoadSamplingDefaults(generation_config.empty() ? dir_.path() : generation_config, dir_.path());
    server_ = std::make_unique<testing::TestServer>(testing::ServerEngineConfig(), config);
  }
  const testing::TestServer* operator->() const { return server_.get(); }

 private:
  TempDir dir_;
  std::unique_ptr<testing::TestServer> server_;
};

json Completion(json fields) {
  json body = {{"prompt", "hello there"}, {"ignore_eos", true}, {"return_token_ids", true}};
  if (fields.is_object()) body.update(fields);  // {} is null
  return body;
}

TEST(GenerationConfigTest, RequestsTakeTheDefaultsOfTheFieldsTheyLeaveOut) {
  const SamplingDefaults d = SamplingDefaultsFromJson(json::parse(kQwenStyle), "f", true);
  const openai::RequestSampling omitted = openai::ReadSampling(json::object(), d);
  EXPECT_EQ(omitted.params.temperature, 0.6);
  EXPECT_EQ(omitted.params.top_k, 20);
  EXPECT_EQ(omitted.params.top_p, 0.95);
  EXPECT_EQ(omitted.params.min_p, 0.05);
  EXPECT_EQ(omitted.params.repetition_penalty, 1.1);
  EXPECT_FALSE(omitted.max_tokens.has_value());
  EXPECT_EQ(omitted.default_max_tokens, 128);

  const openai::RequestSampling own = openai::ReadSampling(
      json::parse(R"({"temperature": 0, "top_k": -1, "top_p": 1, "min_p": 0, "repetition_penalty": 1,
                      "max_tokens": 5})"),
      d);
  EXPECT_EQ(own.params.temperature, 0);
  EXPECT_EQ(own.params.top_k, -1);
  EXPECT_EQ(own.params.top_p, 1);
  EXPECT_EQ(own.params.min_p, 0);
  EXPECT_EQ(own.params.repetition_penalty, 1);
  EXPECT_EQ(own.max_tokens, 5);

  const openai::RequestSampling engine_defaults = openai::ReadSampling(json::object(), SamplingDefaults{});
  EXPECT_EQ(engine_defaults.params.temperature, SamplingParams{}.temperature);
  EXPECT_FALSE(engine_defaults.default_max_tokens.has_value());
}

TEST(GenerationConfigServerTest, RequestsWithoutAFieldTakeTheFilesValue) {
  const GenerationConfigServer server(R"({"temperature": 0, "max_new_tokens": 5})");
  const json greedy = server->PostOk("/v1/completions", Completion({{"temperature", 0}, {"max_tokens", 5}}));
  const json seed1 = server->PostOk("/v1/completions", Completion({{"seed", 1}}));
  const json seed2 = server->PostOk("/v1/completions", Completion({{"seed", 2}}));
  EXPECT_EQ(seed1["usage"]["completion_tokens"], 5);
  // temperature 0 from the file: greedy, whatever the seed.
  EXPECT_EQ(seed1["choices"][0]["token_ids"], greedy["choices"][0]["token_ids"]);
  EXPECT_EQ(seed2["choices"][0]["token_ids"], greedy["choices"][0]["token_ids"]);
  const json chat = server->PostOk("/v1/chat/completions",
                                   {{"messages", json::parse(R"([{"role": "user", "content": "hi"}])")},
                                    {"ignore_eos", true}});
  EXPECT_EQ(chat["usage"]["completion_tokens"], 5);
}

TEST(GenerationConfigServerTest, ARequestsOwnValueWins) {
  const GenerationConfigServer server(R"({"temperature": 0, "max_new_tokens": 5})");
  const json greedy = server->PostOk("/v1/completions", Completion({}));
  EXPECT_EQ(server->PostOk("/v1/completions", Completion({{"max_tokens", 3}}))["usage"]["completion_tokens"], 3);
  // Sampled at temperature 1: the random model's near-flat distributions leave the
  // greedy tokens behind with either seed.
  const json hot1 = server->PostOk("/v1/completions", Completion({{"temperature", 1.0}, {"seed", 1}}));
  const json hot2 = server->PostOk("/v1/completions", Completion({{"temperature", 1.0}, {"seed", 2}}));
  EXPECT_EQ(hot1["usage"]["completion_tokens"], 5);
  EXPECT_TRUE(hot1["choices"][0]["token_ids"] != greedy["choices"][0]["token_ids"] ||
              hot2["choices"][0]["token_ids"] != greedy["choices"][0]["token_ids"]);
  EXPECT_NE(hot1["choices"][0]["token_ids"], hot2["choices"][0]["token_ids"]);
}

TEST(GenerationConfigServerTest, VllmIgnoresTheFile) {
  const GenerationConfigServer server(R"({"temperature": 0, "max_new_tokens": 5})", "vllm");
  // OpenAI's default max_tokens of completions, and the engine's temperature 1.
  const json seed1 = server->PostOk("/v1/completions", Completion({{"seed", 1}}));
  const json seed2 = server->PostOk("/v1/completions", Completion({{"seed", 2}}));
  EXPECT_EQ(seed1["usage"]["completion_tokens"], 16);
  EXPECT_NE(seed1["choices"][0]["token_ids"], seed2["choices"][0]["token_ids"]);
}

TEST(GenerationConfigServerTest, ADefaultMaxTokensIsCappedByTheContext) {
  const GenerationConfigServer server(R"({"temperature": 0, "max_new_tokens": 100000})");
  const json res = server->PostOk("/v1/completions", Completion({}));
  EXPECT_EQ(res["usage"]["prompt_tokens"].get<int64_t>() + res["usage"]["completion_tokens"].get<int64_t>(), 256);
}

}  // namespace
}  // namespace vllm
