// The server flags of `vllm-cpp serve` read into a ServerConfig: values, defaults, and
// errors that name the flag.
#include <gtest/gtest.h>

#include "vllm/entrypoints/openai/server_args.h"

namespace vllm::openai {
namespace {

ServerConfig Parse(const std::vector<std::string>& args) {
  CliArgs cli("serve");
  AddServerArgs(cli);
  cli.Parse(args);
  return ServerConfigFromArgs(cli);
}

std::string ErrorOf(const std::vector<std::string>& args) {
  try {
    Parse(args);
  } catch (const CliError& e) {
    return e.what();
  }
  return "";
}

TEST(ApiServerArgsTest, FlagsReachTheServerConfig) {
  const ServerConfig config = Parse({"--port", "9000", "--api-key", "k", "--limit-concurrency", "7",
                                     "--max-prompt-bytes", "4096", "--disable-uvicorn-access-log"});
  EXPECT_EQ(config.port, 9000);
  EXPECT_EQ(config.api_key, "k");
  EXPECT_EQ(config.limit_concurrency, 7);
  EXPECT_EQ(config.max_prompt_bytes, 4096);
  EXPECT_FALSE(config.access_log);
}

TEST(ApiServerArgsTest, UnsetBoundsAreLeftForTheServerToDerive) {
  const ServerConfig config = Parse({});
  EXPECT_EQ(config.limit_concurrency, 0);
  EXPECT_EQ(config.max_prompt_bytes, 0);
  EXPECT_TRUE(config.access_log);
}

TEST(ApiServerArgsTest, BoundsBelowOneAreRefusedByName) {
  EXPECT_EQ(ErrorOf({"--limit-concurrency", "0"}), "serve: --limit-concurrency must be >= 1, got 0");
  EXPECT_EQ(ErrorOf({"--max-prompt-bytes", "-5"}), "serve: --max-prompt-bytes must be >= 1, got -5");
  EXPECT_EQ(ErrorOf({"--port", "70000"}), "serve: --port must be in [0, 65535]");
}

TEST(ApiServerArgsTest, NamesOriginsTemplatesAndTheShutdownTimeout) {
  const ServerConfig config =
      Parse({"--served-model-name", "a", "b", "--allowed-origins", R"(["http://x.example"])",
             "--trust-request-chat-template", "--shutdown-timeout", "2.5"});
  EXPECT_EQ(config.served_model_names, std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(config.allowed_origins, std::vector<std::string>({"http://x.example"}));
  EXPECT_TRUE(config.trust_request_chat_template);
  EXPECT_EQ(config.shutdown_timeout, std::chrono::milliseconds(2500));
  const ServerConfig defaults = Parse({});
  EXPECT_TRUE(defaults.served_model_names.empty());
  EXPECT_EQ(defaults.allowed_origins, std::vector<std::string>({"*"}));
  EXPECT_FALSE(defaults.trust_request_chat_template);
  EXPECT_EQ(defaults.shutdown_timeout, std::chrono::seconds(5));
  EXPECT_NE(ErrorOf({"--allowed-origins", "*"}).find("must be a JSON list"), std::string::npos);
  EXPECT_NE(ErrorOf({"--shutdown-timeout", "-1"}).find("--shutdown-timeout"), std::string::npos);
}

}  // namespace
}  // namespace vllm::openai
