// The OpenAI server end to end over loopback HTTP: response shapes, streaming (deltas
// concatenate to the non-streamed result), usage, stop conditions, logprobs, echo,
// prompt forms, seeds, tokenization, models and metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "server_fixture.h"
#include "vllm/version.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Greedy;
using testing::SseEvents;
using testing::TestServer;

const json kChat =
    json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hello"}}});

std::vector<int32_t> Ids(const json& ids) { return ids.get<std::vector<int32_t>>(); }

TEST(ApiServerTest, HealthVersionAndModels) {
  TestServer server;
  httplib::Result health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "");
  httplib::Result version = server.Client().Get("/version");
  ASSERT_TRUE(version);
  EXPECT_EQ(json::parse(version->body)["version"], Version());
  httplib::Result models = server.Client().Get("/v1/models");
  ASSERT_TRUE(models);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "test-model");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(list["data"][0]["max_model_len"], 256);
}

TEST(ApiServerTest, CompletionIsShapedLikeOpenAIs) {
  TestServer server;
  const json tokens = server.PostOk("/tokenize", {{"prompt", "hello world"}});
  const json res = server.PostOk("/v1/completions", Greedy({{"model", "test-model"}, {"prompt", "hello world"}}, 5));
  EXPECT_EQ(res["id"].get<std::string>().rfind("cmpl-", 0), 0u) << res;
  EXPECT_EQ(res["object"], "text_completion");
  EXPECT_EQ(res["model"], "test-model");
  EXPECT_GT(res["created"].get<int64_t>(), 1'600'000'000);
  ASSERT_EQ(res["choices"].size(), 1u);
  const json& choice = res["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_TRUE(choice["text"].is_string());
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_TRUE(choice["stop_reason"].is_null());
  EXPECT_EQ(res["usage"]["prompt_tokens"], tokens["count"]);
  EXPECT_EQ(res["usage"]["completion_tokens"], 5);
  EXPECT_EQ(res["usage"]["total_tokens"], tokens["count"].get<int>() + 5);
}

TEST(ApiServerTest, StreamedCompletionConcatenatesToTheNonStreamedOne) {
  TestServer server;
  const json body = Greedy({{"prompt", "abc def"}, {"return_token_ids", true}}, 20);
  const json whole = server.PostOk("/v1/completions", body);
  json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  httplib::Result res = server.Post("/v1/completions", streamed_body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<json> events = SseEvents(res->body);
  ASSERT_GE(events.size(), 2u);
  std::string text;
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i]["choices"].size(), 1u) << events[i];
    const json& choice = events[i]["choices"][0];
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    text += choice["text"].get<std::string>();
    for (int32_t id : Ids(choice["token_ids"])) ids.push_back(id);
    const bool last = i + 2 == events.size();
    EXPECT_EQ(choice["finish_reason"], last ? json("length") : json(nullptr)) << i;
  }
  EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(ids, Ids(whole["choices"][0]["token_ids"]));
  EXPECT_EQ(events[0]["choices"][0]["prompt_token_ids"], whole["choices"][0]["prompt_token_ids"]);
  // The usage chunk comes last, with no choices.
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"], whole["usage"]);
}

// vLLM streams a chunk for every step that produced a token, even one whose text is
// empty: here each token is <|im_end|> (forced by logit_bias, EOS ignored), a special
// token that decodes to nothing, so text-only chunking would send only the last one and
// a client's TTFT would be the whole request's latency.
TEST(ApiServerTest, StreamedCompletionSendsTokensWhoseTextIsEmpty) {
  TestServer server;
  json body = Greedy({{"prompt", "abc def"}, {"stream", true}, {"logit_bias", {{"321", 100}}}}, 6);
  body["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  httplib::Result res = server.Post("/v1/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const std::vector<json> events = SseEvents(res->body);
  int64_t chunks = 0, last_count = 0;
  for (const json& event : events) {
    if (event["choices"].empty()) continue;
    ++chunks;
    EXPECT_EQ(event["choices"][0]["text"], "") << event;
    const int64_t count = event["usage"]["completion_tokens"];
    EXPECT_GT(count, last_count) << "a chunk with no new token: " << event;
    last_count = count;
  }
  EXPECT_EQ(last_count, 6);
  EXPECT_GE(chunks, 2) << res->body;
}

// n choices a prompt (vLLM's parallel sampling): each its own request, choice j of a
// seeded request sampled with seed + j, so choice j equals a request with that seed;
// prompt p's choices are p n .. p n + n - 1; usage counts a prompt once. Streamed,
// each choice's chunks carry its index and concatenate to its non-streamed result.
// The sum of a completion choice's token_logprobs.
double SumOfTokenLogprobs(const json& choice) {
  double sum = 0.0;
  for (const json& logprob : choice["logprobs"]["token_logprobs"]) sum += logprob.get<double>();
  return sum;
}

// best_of: best_of candidates a prompt (candidate j sampled with seed + j, as n's
// choices), of which the n of highest cumulative logprob are returned, best first;
// logprobs stay out unless asked for, and usage counts the returned choices (as
// vLLM). Checked against the candidates requested one by one. best_of under n, over
// 128, or over n on a stream is a 400 naming best_of.
TEST(ApiServerTest, BestOfReturnsTheCandidatesOfHighestCumulativeLogprob) {
  TestServer server;
  const json single = {{"prompt", "abc def"}, {"max_tokens", 6},         {"temperature", 1.0},
                       {"ignore_eos", true},   {"return_token_ids", true}, {"logprobs", 0}};
  const int best_of = 5, seed = 21;
  std::vector<std::pair<double, std::vector<int32_t>>> candidates;
  for (int j = 0; j < best_of; ++j) {
    json alone = single;
    alone["seed"] = seed + j;
    const json choice = server.PostOk("/v1/completions", alone)["choices"][0];
    candidates.emplace_back(SumOfTokenLogprobs(choice), Ids(choice["token_ids"]));
  }
  std::vector<int> order = {0, 1, 2, 3, 4};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return candidates[a].first > candidates[b].first; });
  ASSERT_NE(std::vector<int>(order.begin(), order.begin() + 2), (std::vector<int>{0, 1}))
      << "this seed's best two are its first two candidates: the test could not tell ranking from none";
  json body = single;
  body.erase("logprobs");
  body["seed"] = seed;
  body["n"] = 2;
  body["best_of"] = best_of;
  const json res = server.PostOk("/v1/completions", body);
  ASSERT_EQ(res["choices"].size(), 2u) << res;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(res["choices"][i]["index"], i);
    EXPECT_EQ(Ids(res["choices"][i]["token_ids"]), candidates[order[i]].second) << i;
    EXPECT_TRUE(res["choices"][i]["logprobs"].is_null()) << "logprobs were not asked for";
  }
  EXPECT_EQ(res["usage"]["completion_tokens"], 12);
  body["logprobs"] = 1;  // asked for: the chosen candidates' own
  const json with_logprobs = server.PostOk("/v1/completions", body);
  EXPECT_NEAR(SumOfTokenLogprobs(with_logprobs["choices"][0]), candidates[order[0]].first, 1e-4);

  // Chat: one choice, the best of three.
  const json chat = {{"messages", kChat}, {"max_tokens", 6}, {"temperature", 1.0}, {"ignore_eos", true}};
  std::vector<std::pair<double, std::string>> answers;
  for (int j = 0; j < 3; ++j) {
    json alone = chat;
    alone["seed"] = 40 + j;
    alone["logprobs"] = true;
    const json choice = server.PostOk("/v1/chat/completions", alone)["choices"][0];
    double sum = 0.0;
    for (const json& token : choice["logprobs"]["content"]) sum += token["logprob"].get<double>();
    answers.emplace_back(sum, choice["message"]["content"].get<std::string>());
  }
  const auto best = std::max_element(answers.begin(), answers.end(),
                                     [](const auto& a, const auto& b) { return a.first < b.first; });
  json chat_best = chat;
  chat_best["seed"] = 40;
  chat_best["best_of"] = 3;
  const json answer = server.PostOk("/v1/chat/completions", chat_best);
  ASSERT_EQ(answer["choices"].size(), 1u);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], best->second);
  EXPECT_TRUE(answer["choices"][0]["logprobs"].is_null());

  for (const auto& [path, bad] : {std::pair<std::string, json>{"/v1/completions", {{"n", 3}, {"best_of", 2}}},
                                  {"/v1/completions", {{"best_of", 129}}},
                                  {"/v1/completions", {{"best_of", 2}, {"stream", true}}},
                                  {"/v1/chat/completions", {{"best_of", 2}, {"stream", true}}}}) {
    json request = path == "/v1/completions" ? single : chat;
    request.update(bad);
    httplib::Result r = server.Post(path, request);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "best_of") << r->body;
  }
}

TEST(ApiServerTest, NChoicesAreSampledWithSeedsCountingUpFromTheRequests) {
  TestServer server;
  const json single = {{"prompt", "abc def"},       {"max_tokens", 6},   {"temperature", 1.0},
                       {"ignore_eos", true},         {"return_token_ids", true}};
  json body = single;
  body["n"] = 3;
  body["seed"] = 11;
  const json many = server.PostOk("/v1/completions", body);
  ASSERT_EQ(many["choices"].size(), 3u) << many;
  std::set<std::vector<int32_t>> distinct;
  for (int j = 0; j < 3; ++j) {
    const json& choice = many["choices"][j];
    EXPECT_EQ(choice["index"], j);
    json alone = single;
    alone["seed"] = 11 + j;
    EXPECT_EQ(Ids(choice["token_ids"]), Ids(server.PostOk("/v1/completions", alone)["choices"][0]["token_ids"])) << j;
    distinct.insert(Ids(choice["token_ids"]));
  }
  EXPECT_GT(distinct.size(), 1u) << "three seeds sampled the same six tokens";
  const int64_t prompt_tokens = server.PostOk("/tokenize", {{"prompt", "abc def"}})["count"];
  EXPECT_EQ(many["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(many["usage"]["completion_tokens"], 18);

  // Two prompts, two choices each.
  json two = Greedy({{"prompt", json::array({"abc def", "xyz"})}, {"return_token_ids", true}, {"n", 2}}, 4);
  const json four = server.PostOk("/v1/completions", two);
  ASSERT_EQ(four["choices"].size(), 4u);
  const json xyz = server.PostOk("/tokenize", {{"prompt", "xyz"}});
  EXPECT_EQ(four["choices"][2]["prompt_token_ids"], xyz["tokens"]);
  EXPECT_EQ(four["choices"][3]["prompt_token_ids"], xyz["tokens"]);
  EXPECT_EQ(four["usage"]["prompt_tokens"], prompt_tokens + xyz["count"].get<int64_t>());

  body["stream"] = true;
  httplib::Result res = server.Post("/v1/completions", body);
  ASSERT_TRUE(res && res->status == 200);
  std::map<int, std::vector<int32_t>> streamed;
  for (const json& event : SseEvents(res->body)) {
    for (const json& choice : event["choices"]) {
      for (int32_t id : Ids(choice["token_ids"])) streamed[choice["index"].get<int>()].push_back(id);
    }
  }
  ASSERT_EQ(streamed.size(), 3u);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(streamed[j], Ids(many["choices"][j]["token_ids"])) << j;

  // Chat: the same, one role chunk a choice.
  json chat = {{"messages", kChat}, {"max_tokens", 6}, {"temperature", 1.0}, {"ignore_eos", true}, {"seed", 5}};
  json chat_n = chat;
  chat_n["n"] = 2;
  const json answers = server.PostOk("/v1/chat/completions", chat_n);
  ASSERT_EQ(answers["choices"].size(), 2u) << answers;
  EXPECT_EQ(answers["usage"]["completion_tokens"], 12);
  for (int j = 0; j < 2; ++j) {
    json alone = chat;
    alone["seed"] = 5 + j;
    EXPECT_EQ(answers["choices"][j]["index"], j);
    EXPECT_EQ(answers["choices"][j]["message"]["content"],
              server.PostOk("/v1/chat/completions", alone)["choices"][0]["message"]["content"])
        << j;
  }
  chat_n["stream"] = true;
  res = server.Post("/v1/chat/completions", chat_n);
  ASSERT_TRUE(res && res->status == 200);
  std::map<int, std::string> content;
  std::map<int, int> roles;
  for (const json& event : SseEvents(res->body)) {
    for (const json& choice : event["choices"]) {
      const int index = choice["index"];
      if (choice["delta"].contains("role")) ++roles[index];
      content[index] += choice["delta"].value("content", "");
    }
  }
  for (int j = 0; j < 2; ++j) {
    EXPECT_EQ(roles[j], 1) << j;
    EXPECT_EQ(content[j], answers["choices"][j]["message"]["content"].get<std::string>()) << j;
  }
}

TEST(ApiServerTest, StreamedChatConcatenatesToTheNonStreamedOne) {
  TestServer server;
  const json body = Greedy({{"messages", kChat}, {"return_token_ids", true}}, 16);
  const json whole = server.PostOk("/v1/chat/completions", body);
  EXPECT_EQ(whole["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole["usage"]["completion_tokens"], 16);
  json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  httplib::Result res = server.Post("/v1/chat/completions", streamed_body);
  ASSERT_TRUE(res);
  const std::vector<json> events = SseEvents(res->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[0]["prompt_token_ids"], whole["prompt_token_ids"]);
  std::string text;
  std::vector<int32_t> ids;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    const json& choice = events[i]["choices"][0];
    text += choice["delta"].value("content", "");
    for (int32_t id : Ids(choice["token_ids"])) ids.push_back(id);
    EXPECT_EQ(choice["finish_reason"], i + 2 == events.size() ? json("length") : json(nullptr)) << i;
  }
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(ids, Ids(whole["choices"][0]["token_ids"]));
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"], whole["usage"]);
}

TEST(ApiServerTest, ChatPromptIsTheRenderedTemplate) {
  TestServer server;
  const json rendered = server.PostOk("/tokenize", {{"messages", kChat}});
  // <|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n
  const json expected =
      server.PostOk("/tokenize", {{"prompt",
                                   "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
                                   "<|im_start|>assistant\n"}});
  EXPECT_EQ(rendered["tokens"], expected["tokens"]);
  const json chat = server.PostOk("/v1/chat/completions", Greedy({{"messages", kChat}}, 2));
  EXPECT_EQ(chat["usage"]["prompt_tokens"], rendered["count"]);
  // chat_template_kwargs reach the template: enable_thinking=false adds an empty think block.
  const json no_thinking =
      server.PostOk("/tokenize", {{"messages", kChat}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_EQ(no_thinking["count"].get<int>(), rendered["count"].get<int>() + 6);  // <think> \n\n </think> \n\n
  // Content given as text parts is the same conversation.
  json parts = kChat;
  parts[1]["content"] = json::array({{{"type", "text"}, {"text", "hello"}}});
  EXPECT_EQ(server.PostOk("/tokenize", {{"messages", parts}})["tokens"], rendered["tokens"]);
}

TEST(ApiServerTest, ChatTemplateFlagReplacesTheModelsTemplate) {
  openai::ServerConfig config = testing::QuietServerConfig();
  config.chat_template = "{% for m in messages %}[{{ m['content'] }}]{% endfor %}";
  TestServer server(testing::ServerEngineConfig(), config);
  EXPECT_EQ(server.PostOk("/tokenize", {{"messages", kChat}})["tokens"],
            server.PostOk("/tokenize", {{"prompt", "[be brief][hello]"}})["tokens"]);
}

TEST(ApiServerTest, PromptsAsTextIdsAndBatches) {
  TestServer server;
  const json ids = server.PostOk("/tokenize", {{"prompt", "ab cd"}})["tokens"];
  auto token_ids = [&](const json& prompt) {
    return server.PostOk("/v1/completions", Greedy({{"prompt", prompt}, {"return_token_ids", true}}, 6));
  };
  const json from_text = token_ids("ab cd");
  const json from_ids = token_ids(ids);
  EXPECT_EQ(from_text["choices"][0]["token_ids"], from_ids["choices"][0]["token_ids"]);
  const json other = token_ids("x");
  const json batch = token_ids(json::array({"ab cd", "x"}));
  ASSERT_EQ(batch["choices"].size(), 2u);
  EXPECT_EQ(batch["choices"][0]["index"], 0);
  EXPECT_EQ(batch["choices"][1]["index"], 1);
  EXPECT_EQ(batch["choices"][0]["token_ids"], from_text["choices"][0]["token_ids"]);
  EXPECT_EQ(batch["choices"][1]["token_ids"], other["choices"][0]["token_ids"]);
  EXPECT_EQ(batch["usage"]["completion_tokens"], 12);
  const json id_batch = token_ids(json::array({ids, other["choices"][0]["prompt_token_ids"]}));
  EXPECT_EQ(id_batch["choices"][1]["token_ids"], other["choices"][0]["token_ids"]);
}

TEST(ApiServerTest, StopStringsAndStopTokensEndTheCompletion) {
  TestServer server;
  const json body = Greedy({{"prompt", "hello"}, {"return_token_ids", true}}, 24);
  const json free = server.PostOk("/v1/completions", body)["choices"][0];
  const std::string text = free["text"];
  // A whole character from the middle of the text as the stop string.
  size_t mid = text.size() / 2;
  while (mid > 0 && (static_cast<unsigned char>(text[mid]) & 0xc0) == 0x80) --mid;
  size_t end = mid + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) ++end;
  const std::string stop = text.substr(mid, end - mid);
  json with_stop = body;
  with_stop["stop"] = json::array({stop});
  const json stopped = server.PostOk("/v1/completions", with_stop)["choices"][0];
  EXPECT_EQ(stopped["finish_reason"], "stop");
  EXPECT_EQ(stopped["stop_reason"], stop);
  EXPECT_EQ(stopped["text"], text.substr(0, text.find(stop)));
  with_stop["include_stop_str_in_output"] = true;
  EXPECT_EQ(server.PostOk("/v1/completions", with_stop)["choices"][0]["text"],
            text.substr(0, text.find(stop) + stop.size()));

  const std::vector<int32_t> free_ids = Ids(free["token_ids"]);
  const int32_t stop_id = free_ids[5];
  json with_stop_id = body;
  with_stop_id["stop_token_ids"] = json::array({stop_id});
  const json by_id = server.PostOk("/v1/completions", with_stop_id)["choices"][0];
  const size_t first = std::find(free_ids.begin(), free_ids.end(), stop_id) - free_ids.begin();
  EXPECT_EQ(by_id["finish_reason"], "stop");
  EXPECT_EQ(by_id["stop_reason"], stop_id);
  EXPECT_EQ(Ids(by_id["token_ids"]), std::vector<int32_t>(free_ids.begin(), free_ids.begin() + first + 1));
}

// Greedy tokens are the argmax of the raw logits, so each one's logprob is the top one.
TEST(ApiServerTest, CompletionLogprobsInOpenAIsFormat) {
  TestServer server;
  const json res = server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}, {"logprobs", 3}}, 8));
  const json& logprobs = res["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 8u) << logprobs;
  ASSERT_EQ(logprobs["token_logprobs"].size(), 8u);
  ASSERT_EQ(logprobs["top_logprobs"].size(), 8u);
  ASSERT_EQ(logprobs["text_offset"].size(), 8u);
  EXPECT_EQ(logprobs["text_offset"][0], 0);
  for (size_t t = 0; t < 8; ++t) {
    const float logprob = logprobs["token_logprobs"][t];
    const json& top = logprobs["top_logprobs"][t];
    EXPECT_LE(logprob, 0);
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 4u);  // top 3 plus the sampled token (equal texts share a key)
    EXPECT_TRUE(top.contains(logprobs["tokens"][t].get<std::string>()));
    double mass = 0, best = -INFINITY;
    for (const auto& [token, lp] : top.items()) {
      mass += std::exp(lp.get<double>());
      best = std::max(best, lp.get<double>());
    }
    EXPECT_LE(mass, 1 + 1e-5);
    EXPECT_FLOAT_EQ(logprob, best);
    if (t > 0) {
      EXPECT_GE(logprobs["text_offset"][t], logprobs["text_offset"][t - 1]);
    }
  }
}

TEST(ApiServerTest, EchoReturnsThePromptWithItsLogprobs) {
  TestServer server;
  const json prompt = server.PostOk("/tokenize", {{"prompt", "hello"}, {"return_token_strs", true}});
  const json& prompt_ids = prompt["tokens"];
  const json res = server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}, {"echo", true}, {"logprobs", 1}}, 4));
  const json& choice = res["choices"][0];
  EXPECT_EQ(choice["text"].get<std::string>().rfind("hello", 0), 0u);
  const json& logprobs = choice["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), prompt_ids.size() + 4);
  EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());  // nothing scores the first prompt token
  EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
  for (size_t t = 1; t < logprobs["tokens"].size(); ++t) EXPECT_LE(logprobs["token_logprobs"][t].get<double>(), 0);
  EXPECT_EQ(logprobs["tokens"][0], prompt["token_strs"][0]);  // ASCII: the spelling is the text
  // Prompt logprobs are computed again, not skipped as a cached prefix: the request repeats.
  const json again =
      server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}, {"echo", true}, {"logprobs", 1}}, 4));
  EXPECT_EQ(again["choices"][0]["logprobs"], logprobs);
}

TEST(ApiServerTest, PromptLogprobsInVllmsFormat) {
  TestServer server;
  const json prompt_ids = server.PostOk("/tokenize", {{"prompt", "hello"}})["tokens"];
  const json res = server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}, {"prompt_logprobs", 2}}, 1));
  const json& positions = res["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(positions.size(), prompt_ids.size());
  EXPECT_TRUE(positions[0].is_null());
  for (size_t p = 1; p < positions.size(); ++p) {
    const std::string actual = std::to_string(prompt_ids[p].get<int>());
    ASSERT_TRUE(positions[p].contains(actual)) << positions[p];
    EXPECT_LE(positions[p].size(), 3u);
    for (const auto& [id, entry] : positions[p].items()) {
      EXPECT_LE(entry["logprob"].get<double>(), 0);
      EXPECT_TRUE(entry.contains("rank") && entry.contains("decoded_token"));
    }
  }
}

TEST(ApiServerTest, ChatLogprobsInOpenAIsFormat) {
  TestServer server;
  const json res =
      server.PostOk("/v1/chat/completions", Greedy({{"messages", kChat}, {"logprobs", true}, {"top_logprobs", 2}}, 6));
  const json& content = res["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u);
  for (const json& item : content) {
    EXPECT_TRUE(item["token"].is_string());
    EXPECT_LE(item["logprob"].get<double>(), 0);
    EXPECT_TRUE(item["bytes"].is_array());
    ASSERT_EQ(item["top_logprobs"].size(), 2u);
    EXPECT_FLOAT_EQ(item["top_logprobs"][0]["logprob"].get<float>(), item["logprob"].get<float>());
    EXPECT_GE(item["top_logprobs"][0]["logprob"].get<float>(), item["top_logprobs"][1]["logprob"].get<float>());
  }
  // logprobs without top_logprobs: each token with an empty top list.
  const json plain = server.PostOk("/v1/chat/completions", Greedy({{"messages", kChat}, {"logprobs", true}}, 2));
  EXPECT_TRUE(plain["choices"][0]["logprobs"]["content"][0]["top_logprobs"].empty());
}

// Streams carry each output's new tokens only (RequestOutputKind::kDelta): their
// logprobs, put together, are the single response's, echoed prompt included.
TEST(ApiServerTest, StreamedLogprobsConcatenateToTheNonStreamedOnes) {
  TestServer server;
  const json completion = Greedy({{"prompt", "hello"}, {"echo", true}, {"logprobs", 2}}, 6);
  const json whole = server.PostOk("/v1/completions", completion)["choices"][0]["logprobs"];
  json streamed_body = completion;
  streamed_body["stream"] = true;
  httplib::Result res = server.Post("/v1/completions", streamed_body);
  ASSERT_TRUE(res);
  json joined = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}};
  for (const json& event : SseEvents(res->body)) {
    const json& logprobs = event["choices"][0]["logprobs"];
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs"}) {
      for (const json& item : logprobs[key]) joined[key].push_back(item);
    }
  }
  EXPECT_EQ(joined["tokens"], whole["tokens"]);
  EXPECT_EQ(joined["token_logprobs"], whole["token_logprobs"]);
  EXPECT_EQ(joined["top_logprobs"], whole["top_logprobs"]);

  const json chat = Greedy({{"messages", kChat}, {"logprobs", true}, {"top_logprobs", 2}}, 6);
  const json chat_whole = server.PostOk("/v1/chat/completions", chat)["choices"][0]["logprobs"]["content"];
  json chat_streamed = chat;
  chat_streamed["stream"] = true;
  res = server.Post("/v1/chat/completions", chat_streamed);
  ASSERT_TRUE(res);
  json content = json::array();
  for (const json& event : SseEvents(res->body)) {
    const json& logprobs = event["choices"][0]["logprobs"];
    if (logprobs.is_object()) {
      for (const json& item : logprobs["content"]) content.push_back(item);
    }
  }
  EXPECT_EQ(content, chat_whole);
}

TEST(ApiServerTest, SeededSamplingRepeats) {
  TestServer server;
  const json body = {{"prompt", "hello"}, {"max_tokens", 12},   {"temperature", 1.0},      {"top_k", 50},
                     {"seed", 7},         {"ignore_eos", true}, {"return_token_ids", true}};
  EXPECT_EQ(server.PostOk("/v1/completions", body)["choices"][0]["token_ids"],
            server.PostOk("/v1/completions", body)["choices"][0]["token_ids"]);
}

TEST(ApiServerTest, TokenizeAndDetokenize) {
  TestServer server;
  const json tokens = server.PostOk("/tokenize", {{"prompt", "abc <|im_end|>"}, {"return_token_strs", true}});
  EXPECT_EQ(tokens["count"], tokens["tokens"].size());
  EXPECT_EQ(tokens["max_model_len"], 256);
  EXPECT_EQ(tokens["tokens"].back(), 321);  // the special token written in the text
  EXPECT_EQ(tokens["token_strs"].back(), "<|im_end|>");
  EXPECT_EQ(server.PostOk("/detokenize", {{"tokens", tokens["tokens"]}})["prompt"], "abc <|im_end|>");
}

TEST(ApiServerTest, MetricsCountRequestsAndTokens) {
  TestServer server;
  const json res = server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}}, 5));
  server.PostOk("/v1/completions", Greedy({{"prompt", "hello"}}, 3));
  ASSERT_TRUE(server.WaitUntilIdle());
  const int prompt = res["usage"]["prompt_tokens"];
  EXPECT_EQ(server.Metric("vllm:prompt_tokens_total"), 2 * prompt);
  EXPECT_EQ(server.Metric("vllm:generation_tokens_total"), 8);
  EXPECT_EQ(server.Metric("vllm:request_success_total", "finished_reason=\"length\""), 2);
  EXPECT_EQ(server.Metric("vllm:time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(server.Metric("vllm:e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(server.Metric("vllm:inter_token_latency_seconds_count"), 6);
  EXPECT_EQ(server.Metric("vllm:kv_cache_usage_perc"), 0);
  EXPECT_EQ(server.Metric("vllm:num_preemptions_total"), 0);
  EXPECT_EQ(server.Metric("vllm:request_prompt_tokens_count", "model_name=\"test-model\""), 2);
}

}  // namespace
}  // namespace vllm
