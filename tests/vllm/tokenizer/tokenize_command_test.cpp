// `vllm-cpp tokenize` on a tiny tokenizer folder written by the test: --text and
// --input-file, plain and --json output, and errors that name the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tiny_tokenizer.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
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
    Write("tokenizer_config.json", R"({"eos_token": "<|end|>", "add_bos_token": false})");
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
