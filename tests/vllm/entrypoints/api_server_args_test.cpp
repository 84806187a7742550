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

}  // namespace
}  // namespace vllm::openai
