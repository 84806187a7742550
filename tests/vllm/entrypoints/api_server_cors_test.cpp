// CORS (vLLM's --allowed-origins) and several served model names, over HTTP.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::TestServer;

httplib::Result Preflight(const TestServer& server, const std::string& origin) {
  return server.Client().Options("/v1/chat/completions", {{"Origin", origin},
                                                          {"Access-Control-Request-Method", "POST"},
                                                          {"Access-Control-Request-Headers", "authorization,content-type"}});
}

TEST(ApiServerCorsTest, AnyOriginByDefaultAndPreflightsAnsweredBeforeTheApiKey) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.api_key = "k";
  TestServer server(testing::ServerEngineConfig(), config);
  httplib::Result preflight = Preflight(server, "http://ui.example");
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 200);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "authorization,content-type");
  httplib::Result chat =
      server.Client().Post("/v1/chat/completions", {{"Origin", "http://ui.example"}, {"Authorization", "Bearer k"}},
                           Greedy({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, 1).dump(), "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 200);
  EXPECT_EQ(chat->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(server.Client().Get("/health")->has_header("Access-Control-Allow-Origin"));  // no Origin, no CORS
}

TEST(ApiServerCorsTest, OnlyTheAllowedOriginsGetCorsHeaders) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.allowed_origins = {"http://ui.example"};
  TestServer server(testing::ServerEngineConfig(), config);
  httplib::Result allowed = Preflight(server, "http://ui.example");
  EXPECT_EQ(allowed->status, 200);
  EXPECT_EQ(allowed->get_header_value("Access-Control-Allow-Origin"), "http://ui.example");
  EXPECT_EQ(allowed->get_header_value("Vary"), "Origin");
  httplib::Result refused = Preflight(server, "http://evil.example");
  EXPECT_EQ(refused->status, 400);
  EXPECT_FALSE(refused->has_header("Access-Control-Allow-Origin"));
  httplib::Result get = server.Client().Get("/v1/models", {{"Origin", "http://evil.example"}});
  EXPECT_EQ(get->status, 200);
  EXPECT_FALSE(get->has_header("Access-Control-Allow-Origin"));
}

TEST(ApiServerCorsTest, EveryServedModelNameIsListedAndServed) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.served_model_names = {"first", "second"};
  TestServer server(testing::ServerEngineConfig(), config);
  const json models = json::parse(server.Client().Get("/v1/models")->body);
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][1]["id"], "second");
  EXPECT_EQ(server.PostOk("/v1/completions", Greedy({{"prompt", "hi"}, {"model", "second"}}, 1))["model"], "second");
  EXPECT_EQ(server.PostOk("/v1/completions", Greedy({{"prompt", "hi"}}, 1))["model"], "first");
  EXPECT_EQ(server.Post("/v1/completions", Greedy({{"prompt", "hi"}, {"model", "third"}}, 1))->status, 404);
}

}  // namespace
}  // namespace vllm
