// vllm::ChatTemplate on the real Qwen3 and Qwen3.5 templates, against references.
//
// tests/data/chat/conversations.jsonl holds the conversations (system prompts, turns,
// tools and tool calls, tool responses, reasoning, thinking on/off, content parts,
// templates that raise). Each is rendered and compared, byte for byte, with:
//   - expected.jsonl: HF transformers' apply_chat_template (prompt and token ids),
//     produced on the GPU machine by tools/oracle/chat_reference.py; skipped until then;
//   - expected_jinja2.jsonl: jinja2 3.1 in the environment transformers builds
//     (chat_reference.py --engine jinja2), which runs anywhere.
// Then the API's input checks, thread safety and robustness to mangled templates and
// arbitrary messages (every failure is a ChatTemplateError, never a crash or a hang).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "vllm/testing/shared_data.h"
#include "vllm/tokenizer/chat_template.h"
#include "vllm/tokenizer/tokenizer.h"

namespace vllm {
namespace {

using json = nlohmann::ordered_json;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<json> ReadJsonl(const std::string& path) {
  std::vector<json> records;
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (!line.empty()) records.push_back(json::parse(line));
  }
  return records;
}

const std::string kConversations = VT_TEST_DATA_DIR "/chat/conversations.jsonl";
const std::string kTransformersExpected = VT_TEST_DATA_DIR "/chat/expected.jsonl";
const std::string kJinja2Expected = VT_TEST_DATA_DIR "/chat/expected_jinja2.jsonl";
const std::string kTemplatesDir = VT_TEST_DATA_DIR "/chat/templates";
const std::string kQwen3TokenizerDir = VT_SHARED_DATA_DIR "/tokenizers/qwen3";

// The real Qwen3 tokenizer is not in the repository (vllm/testing/shared_data.h); the
// tests that need it skip themselves, naming the missing file, where it is absent.
#define SKIP_WITHOUT_QWEN3_TOKENIZER()                                                   \
  if (!std::filesystem::exists(kQwen3TokenizerDir + "/tokenizer.json")) {                \
    GTEST_SKIP() << testing::MissingSharedData(kQwen3TokenizerDir + "/tokenizer.json"); \
  }

const std::string& TemplateSource(const std::string& name) {
  static std::map<std::string, std::string> sources;
  auto it = sources.find(name);
  if (it == sources.end()) it = sources.emplace(name, ReadFile(kTemplatesDir + "/" + name + ".jinja")).first;
  return it->second;
}

const ChatTemplate& TemplateNamed(const std::string& name) {
  static std::map<std::string, ChatTemplate> templates;
  auto it = templates.find(name);
  if (it == templates.end()) it = templates.emplace(name, ChatTemplate(TemplateSource(name))).first;
  return it->second;
}

const ChatTemplateTokens kQwenTokens{std::nullopt, "<|im_end|>", "<|endoftext|>", std::nullopt};

// The rendered prompt, or the error the template raised.
struct Outcome {
  std::optional<std::string> prompt;
  std::optional<ChatTemplateError> error;
};

Outcome RenderConversation(const json& conversation) {
  Outcome outcome;
  try {
    outcome.prompt = TemplateNamed(conversation["template"]).Render(
        conversation["messages"], conversation.value("tools", json()), conversation.value("add_generation_prompt", false),
        conversation.value("chat_template_kwargs", json()), kQwenTokens);
  } catch (const ChatTemplateError& e) {
    outcome.error = e;
  }
  return outcome;
}

// Compares every conversation with a reference file of {"prompt"} or {"error", "error_type"}.
void ExpectMatchesReference(const std::vector<json>& expected) {
  const std::vector<json> conversations = ReadJsonl(kConversations);
  ASSERT_GE(conversations.size(), 30u);
  ASSERT_EQ(conversations.size(), expected.size()) << "reference and conversations.jsonl are out of step";
  for (size_t i = 0; i < conversations.size(); ++i) {
    const json& want = expected[i];
    SCOPED_TRACE(conversations[i]["name"].get<std::string>());
    ASSERT_EQ(want["name"], conversations[i]["name"]);
    const Outcome got = RenderConversation(conversations[i]);
    if (want.contains("prompt")) {
      ASSERT_TRUE(got.prompt.has_value()) << "unexpected error: " << got.error->what();
      EXPECT_EQ(*got.prompt, want["prompt"].get<std::string>());
      continue;
    }
    ASSERT_TRUE(got.error.has_value()) << "expected the error: " << want["error"];
    // A template's raise_exception message, or an undefined attribute, is worded as jinja2 words it.
    if (want["error_type"] == "TemplateError") {
      EXPECT_EQ(got.error->kind(), ChatTemplateError::Kind::kRaised);
      EXPECT_EQ(got.error->detail(), want["error"].get<std::string>());
    } else if (want["error_type"] == "UndefinedError") {
      EXPECT_EQ(got.error->detail(), want["error"].get<std::string>());
    }
  }
}

TEST(ChatTemplateReference, MatchesJinja2InTransformersEnvironment) {
  ExpectMatchesReference(ReadJsonl(kJinja2Expected));
}

TEST(ChatTemplateReference, MatchesTransformersApplyChatTemplate) {
  if (!std::filesystem::exists(kTransformersExpected)) {
    GTEST_SKIP() << "tests/data/chat/expected.jsonl is not there yet: it is produced on the GPU machine by "
                    "tools/oracle/chat_reference.py (HF transformers)";
  }
  ExpectMatchesReference(ReadJsonl(kTransformersExpected));
}

TEST(ChatTemplateReference, TokenIdsMatchTransformers) {
  if (!std::filesystem::exists(kTransformersExpected)) {
    GTEST_SKIP() << "tests/data/chat/expected.jsonl is not there yet (tools/oracle/chat_reference.py)";
  }
  SKIP_WITHOUT_QWEN3_TOKENIZER();
  const Tokenizer tokenizer = Tokenizer::FromHfDirectory(kQwen3TokenizerDir);
  const std::vector<json> conversations = ReadJsonl(kConversations);
  const std::vector<json> expected = ReadJsonl(kTransformersExpected);
  ASSERT_EQ(conversations.size(), expected.size());
  int num_compared = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    if (!expected[i].contains("ids")) continue;
    SCOPED_TRACE(conversations[i]["name"].get<std::string>());
    const Outcome got = RenderConversation(conversations[i]);
    ASSERT_TRUE(got.prompt.has_value()) << got.error->what();
    EXPECT_EQ(tokenizer.Encode(*got.prompt, /*add_special_tokens=*/false), expected[i]["ids"].get<std::vector<int32_t>>());
    ++num_compared;
  }
  EXPECT_GT(num_compared, 30);
}

TEST(ChatTemplateApi, TokenizerConfigCarriesTheQwen3Template) {
  SKIP_WITHOUT_QWEN3_TOKENIZER();
  const Tokenizer tokenizer = Tokenizer::FromHfDirectory(kQwen3TokenizerDir);
  EXPECT_EQ(tokenizer.chat_template(), TemplateSource("qwen3"));
  const ChatTemplate from_config(tokenizer.chat_template());
  const json messages = json::parse(R"([{"role": "user", "content": "Hi"}])");
  EXPECT_EQ(from_config.Render(messages, json(), true, json::object(), kQwenTokens),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateApi, ContextHoldsTransformersVariables) {
  const ChatTemplate probe(
      "{{ bos_token is defined }}|{{ eos_token }}|{{ pad_token }}|{{ tools }}|{{ documents }}|"
      "{{ add_generation_prompt }}|{{ enable_thinking }}|{{ messages|length }}");
  const std::string out = probe.Render(json::array(), json(), true, json::parse(R"({"enable_thinking": false})"), kQwenTokens);
  EXPECT_EQ(out, "False|<|im_end|>|<|endoftext|>|None|None|True|False|0");
}

TEST(ChatTemplateApi, MalformedArgumentsAreInputErrors) {
  const ChatTemplate& qwen3 = TemplateNamed("qwen3");
  const json messages = json::parse(R"([{"role": "user", "content": "Hi"}])");
  auto expect_input_error = [&](const json& m, const json& tools, const json& kwargs, const std::string& words) {
    try {
      qwen3.Render(m, tools, false, kwargs, kQwenTokens);
      ADD_FAILURE() << "no error for: " << words;
    } catch (const ChatTemplateError& e) {
      EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kInput);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_input_error(json::object(), json(), json(), "messages must be a JSON array");
  expect_input_error(messages, json("tools"), json(), "tools must be null or an array");
  expect_input_error(messages, json::parse("[1]"), json(), "each tool must be a JSON object");
  expect_input_error(messages, json(), json::array(), "kwargs must be null or an object");
  expect_input_error(messages, json(), json::parse(R"({"messages": []})"), "'messages' collides");
}

TEST(ChatTemplateApi, MessageWithoutContentIsAClearError) {
  try {
    TemplateNamed("qwen3").Render(json::parse(R"([{"role": "user"}])"), json(), true, json(), kQwenTokens);
    FAIL() << "no error";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRender);
    EXPECT_GT(e.line(), 0);
    EXPECT_EQ(e.detail(), "'dict object' has no attribute 'content'");
  }
}

TEST(ChatTemplateApi, RendersConcurrently) {
  const std::vector<json> conversations = ReadJsonl(kConversations);
  std::vector<Outcome> serial;
  for (const json& c : conversations) serial.push_back(RenderConversation(c));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < conversations.size(); ++i) {
          const Outcome got = RenderConversation(conversations[i]);
          mismatches[t] += got.prompt != serial[i].prompt;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// Deterministic "fuzzing": the real templates with random spans deleted, duplicated or
// replaced by Jinja syntax fragments. Each variant must parse and render, or throw
// ChatTemplateError; anything else (another exception, a crash, a hang) fails.
TEST(ChatTemplateRobustness, MangledTemplatesFailCleanly) {
  static constexpr const char* kFragments[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "+", "(", ")", "[", "]",
                                               "'", "\"", "|", "endfor", "endif", "else", "loop.", "ns.", " is ",
                                               " in ", "not ", "~", "::-1", "{% endmacro %}", "{% for x in m %}"};
  const json messages = json::parse(ReadJsonl(kConversations)[12]["messages"].dump());
  ChatTemplateLimits limits;
  limits.max_steps = 2'000'000;
  std::mt19937 rng(1234);
  int num_rendered = 0, num_failed = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    std::string source = TemplateSource(iteration % 2 ? "qwen3" : "qwen3_5");
    for (int edit = 0; edit < 1 + iteration % 4; ++edit) {
      const size_t at = rng() % source.size();
      const size_t length = std::min<size_t>(rng() % 24, source.size() - at);
      switch (rng() % 3) {
        case 0: source.erase(at, length); break;
        case 1: source.insert(at, source.substr(at, length)); break;
        default: source.replace(at, length, kFragments[rng() % std::size(kFragments)]);
      }
    }
    try {
      const ChatTemplate mangled(source, limits);
      mangled.Render(messages, json::parse(R"([{"type": "function", "function": {"name": "f"}}])"), true, json(),
                     kQwenTokens);
      ++num_rendered;
    } catch (const ChatTemplateError&) {
      ++num_failed;
    }
  }
  EXPECT_GT(num_rendered, 0);
  EXPECT_GT(num_failed, 0);
}

json RandomJson(std::mt19937& rng, int depth) {
  static constexpr const char* kStrings[] = {"user", "assistant", "system", "tool", "developer", "", "<think>a</think>b",
                                             "<tool_response>x</tool_response>", "text", "image", "function"};
  switch (rng() % (depth > 2 ? 5 : 7)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int>(rng() % 100) - 50;
    case 3: return 0.5 * static_cast<double>(rng() % 10);
    case 4: return kStrings[rng() % std::size(kStrings)];
    case 5: {
      json array = json::array();
      for (unsigned i = rng() % 3; i > 0; --i) array.push_back(RandomJson(rng, depth + 1));
      return array;
    }
    default: {
      static constexpr const char* kKeys[] = {"role", "content", "tool_calls", "function", "name", "arguments",
                                              "reasoning_content", "type", "text", "image"};
      json object = json::object();
      for (unsigned i = rng() % 4; i > 0; --i) object[kKeys[rng() % std::size(kKeys)]] = RandomJson(rng, depth + 1);
      return object;
    }
  }
}

TEST(ChatTemplateRobustness, ArbitraryMessagesRenderOrFailCleanly) {
  std::mt19937 rng(99);
  int num_rendered = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    json messages = json::array();
    for (unsigned i = 1 + rng() % 4; i > 0; --i) {
      json message = RandomJson(rng, 1);
      if (rng() % 2 && message.is_object()) message["role"] = RandomJson(rng, 3);
      messages.push_back(message);
    }
    for (const char* name : {"qwen3", "qwen3_5"}) {
      try {
        TemplateNamed(name).Render(messages, json(), rng() % 2, json(), kQwenTokens);
        ++num_rendered;
      } catch (const ChatTemplateError&) {
      }
    }
  }
  EXPECT_GT(num_rendered, 0);
}

}  // namespace
}  // namespace vllm
