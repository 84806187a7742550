// `vllm-cpp tokenize` on a tiny tokenizer folder written by the test: --text and
// --input-file, plain and --json output, --chat, and errors that name the problem;
// and --chat on the real Qwen3 tokenizer against HF transformers' apply_chat_template
// (prompts and ids in tests/data/chat/expected.jsonl).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tiny_tokenizer.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/testing/shared_data.h"
#include "vt/error.h"

namespace vllm {
namespace {

namespace fs = std::filesystem;

class TokenizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tokenize_command_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    testing::TinyTokenizerJson t;
    t.merges = {{"h", "i"}};
    t.AddToken("<|end|>", true);
    Write("tokenizer.json", t.ToJson().dump());
    const nlohmann::json config = {
        {"eos_token", "<|end|>"},
        {"add_bos_token", false},
        {"chat_template",
         "{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"
         "{% if add_generation_prompt %}{{ greeting | default('G') }}{% endif %}"}};
    Write("tokenizer_config.json", config.dump());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  // Runs the command; returns its stdout.
  std::string Run(std::vector<std::string> args) {
    ::testing::internal::CaptureStdout();
    const int rc = RunTokenizeCommand(args);
    std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    return out;
  }

  fs::path dir_;
};

TEST_F(TokenizeCommandTest, TextGivesIdsOnOneLine) {
  // "hi" merges to id 256; <|end|> is the added token 257; '!' is byte 33.
  EXPECT_EQ(Run({"--model", dir_.string(), "--text", "hi!<|end|>"}), "256 33 257\n");
  EXPECT_EQ(Run({"--model", dir_.string(), "--text", "hi", "--json"}), "{\"ids\":[256]}\n");
}

TEST_F(TokenizeCommandTest, InputFileGivesOneLinePerInput) {
  Write("in.jsonl", "{\"text\": \"hi\"}\n\n{\"text\": \"\"}\n{\"text\": \"a\\nb\"}\n");
  EXPECT_EQ(Run({"--model", dir_.string(), "--input-file", (dir_ / "in.jsonl").string(), "--json"}),
            "{\"ids\":[256]}\n{\"ids\":[]}\n{\"ids\":[97,10,98]}\n");
}

TEST_F(TokenizeCommandTest, ChatRendersTheTemplateThenEncodesWithoutExtraTokens) {
  // --text is one user message with a generation prompt.
  EXPECT_EQ(Run({"--model", dir_.string(), "--chat", "--text", "hi", "--json"}),
            "{\"ids\":[256,257,71],\"prompt\":\"hi<|end|>G\"}\n");
  EXPECT_EQ(Run({"--model", dir_.string(), "--chat", "--text", "hi"}), "hi<|end|>G\n256 257 71\n");
  Write("chat.jsonl",
        R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})"
        "\n"
        R"({"messages": [{"role": "user", "content": "a"}], "add_generation_prompt": true,)"
        R"( "chat_template_kwargs": {"greeting": "!"}, "tools": null})"
        "\n");
  EXPECT_EQ(Run({"--model", dir_.string(), "--chat", "--json", "--input-file", (dir_ / "chat.jsonl").string()}),
            "{\"ids\":[97,257,98,257],\"prompt\":\"a<|end|>b<|end|>\"}\n"
            "{\"ids\":[97,257,33],\"prompt\":\"a<|end|>!\"}\n");
}

TEST_F(TokenizeCommandTest, ChatInputErrorsNameTheLine) {
  for (const char* bad : {R"({"text": "no messages"})", R"({"messages": {}})",
                                 R"({"messages": [], "add_generation_prompt": "yes"})",
                                 R"({"messages": [], "tools": 3})"}) {
    Write("bad_chat.jsonl", "\n" + std::string(bad) + "\n");
    try {
      RunTokenizeCommand({"--model", dir_.string(), "--chat", "--input-file", (dir_ / "bad_chat.jsonl").string()});
      ADD_FAILURE() << "expected an error for " << bad;
    } catch (const CliError& e) {
      EXPECT_NE(std::string(e.what()).find("bad_chat.jsonl:2: "), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizeCommandQwen3Test, ChatMatchesTransformersApplyChatTemplate) {
  const fs::path qwen3 = fs::path(VT_SHARED_DATA_DIR) / "tokenizers/qwen3";
  const fs::path chat_data = fs::path(VT_TEST_DATA_DIR) / "chat";
  if (!fs::exists(qwen3 / "tokenizer.json")) GTEST_SKIP() << testing::MissingSharedData(qwen3 / "tokenizer.json");
  if (!fs::exists(chat_data / "expected.jsonl")) GTEST_SKIP() << "no " << chat_data / "expected.jsonl";
  std::map<std::string, nlohmann::json> expected;
  std::ifstream expected_in(chat_data / "expected.jsonl");
  for (std::string line; std::getline(expected_in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    expected[row.at("name")] = row;
  }
  // The Qwen3 conversations that HF renders (the others raise, by design).
  const fs::path inputs = fs::temp_directory_path() / ("tokenize_chat_" + std::to_string(::getpid()) + ".jsonl");
  std::vector<std::string> names;
  {
    std::ifstream conversations(chat_data / "conversations.jsonl");
    std::ofstream out(inputs);
    for (std::string line; std::getline(conversations, line);) {
      const nlohmann::json c = nlohmann::json::parse(line);
      if (c.at("template") != "qwen3" || !expected[c.at("name")].contains("prompt")) continue;
      names.push_back(c.at("name"));
      out << line << "\n";
    }
  }
  ASSERT_GT(names.size(), 20u);
  ::testing::internal::CaptureStdout();
  RunTokenizeCommand({"--model", qwen3.string(), "--chat", "--json", "--input-file", inputs.string()});
  std::istringstream printed(::testing::internal::GetCapturedStdout());
  fs::remove(inputs);
  for (const std::string& name : names) {
    std::string line;
    ASSERT_TRUE(std::getline(printed, line)) << name;
    const nlohmann::json got = nlohmann::json::parse(line);
    EXPECT_EQ(got.at("prompt"), expected[name].at("prompt")) << name;
    EXPECT_EQ(got.at("ids"), expected[name].at("ids")) << name;
  }
}

TEST_F(TokenizeCommandTest, BadArgumentsAndInputsAreNamed) {
  EXPECT_THROW(RunTokenizeCommand({"--text", "x"}), CliError);
  EXPECT_THROW(RunTokenizeCommand({"--model", dir_.string()}), CliError);
  EXPECT_THROW(RunTokenizeCommand({"--model", dir_.string(), "--text", "x", "--input-file", "f"}), CliError);
  Write("bad.jsonl", "{\"text\": \"ok\"}\n{\"prompt\": \"x\"}\n");
  ::testing::internal::CaptureStdout();
  try {
    RunTokenizeCommand({"--model", dir_.string(), "--input-file", (dir_ / "bad.jsonl").string()});
    FAIL() << "expected an error";
  } catch (const CliError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2: expected an object {\"text\""), std::string::npos) << e.what();
  }
  ::testing::internal::GetCapturedStdout();
  EXPECT_THROW(RunTokenizeCommand({"--model", (dir_ / "nothing").string(), "--text", "x"}), vt::Error);
}

}  // namespace
}  // namespace vllm
