// `vllm-cpp chat` on the embedded demo model with stdin read from a temporary file.
// The demo model continues Brown-corpus prose rather than chatting, so replies are
// checked only for being there; what is checked exactly is the conversation: the
// prompt of each turn (the per-turn stderr line) is the chat template's rendering of
// every message so far, replies included, and /reset returns to the opening.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vllm/demo_model/demo_model.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/tokenizer/chat_template.h"
#include "vllm/tokenizer/tokenizer.h"

namespace vllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

struct ChatRun {
  int rc = -1;
  std::string out, err;
  std::string error;  // what the command threw, empty when it returned
  std::vector<size_t> prompt_tokens;  // per turn, from "[N prompt tokens, M generated ..."
  std::vector<size_t> generated_tokens;
};

// Runs `vllm-cpp chat ARGS` with `input` as stdin, capturing stdout and stderr.
ChatRun RunChat(const std::string& input, const std::vector<std::string>& args) {
  RegisterDemoModel();
  const fs::path path = fs::temp_directory_path() / ("chat_command_test_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << input;
  const int saved_stdin = ::dup(STDIN_FILENO);
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  ::dup2(fd, STDIN_FILENO);
  ::close(fd);
  std::clearerr(stdin);
  std::cin.clear();
  ChatRun run;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  try {
    run.rc = RunChatCommand(args);
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  run.err = ::testing::internal::GetCapturedStderr();
  run.out = ::testing::internal::GetCapturedStdout();
  // What the command left unread (the lines after /exit) would stay in stdin's buffer,
  // which cin reads through, and open the next run's input.
  while (std::getc(stdin) != EOF) {
  }
  ::dup2(saved_stdin, STDIN_FILENO);
  ::close(saved_stdin);
  std::clearerr(stdin);
  std::cin.clear();
  fs::remove(path);
  const std::regex turn(R"(\[(\d+) prompt tokens, (\d+) generated)");
  for (std::sregex_iterator it(run.err.begin(), run.err.end(), turn), end; it != end; ++it) {
    run.prompt_tokens.push_back(std::stoul((*it)[1]));
    run.generated_tokens.push_back(std::stoul((*it)[2]));
  }
  return run;
}

// The token count of `messages` rendered by the demo model's chat template, as a turn's prompt.
size_t RenderedTokens(const ordered_json& messages) {
  const Tokenizer tokenizer = Tokenizer::FromPath(kDemoModelName);
  const ChatTemplate chat_template(tokenizer.chat_template());
  const std::string prompt =
      chat_template.Render(messages, nullptr, true, ordered_json::object(), ChatTemplateTokensOf(tokenizer));
  return tokenizer.Encode(prompt, false).size();
}

const std::vector<std::string> kGreedy = {"--temperature", "0", "--max-tokens", "8"};

std::vector<std::string> Args(std::vector<std::string> extra) {
  extra.insert(extra.begin(), kGreedy.begin(), kGreedy.end());
  return extra;
}

TEST(ChatCommandTest, EachTurnsPromptIsTheWholeConversationSoFar) {
  const ChatRun first = RunChat("The old man\n", Args({}));
  ASSERT_EQ(first.error, "");
  ASSERT_EQ(first.prompt_tokens.size(), 1u) << first.err;
  ASSERT_GT(first.out.size(), 1u);
  ASSERT_EQ(first.out.back(), '\n');
  const std::string reply = first.out.substr(0, first.out.size() - 1);  // greedy: the 2-turn run's first reply too
  EXPECT_EQ(first.prompt_tokens[0], RenderedTokens({{{"role", "user"}, {"content", "The old man"}}}));

  const ChatRun two = RunChat("The old man\nwent to the sea\n", Args({}));
  ASSERT_EQ(two.error, "");
  EXPECT_EQ(two.rc, 0);
  ASSERT_EQ(two.prompt_tokens.size(), 2u) << two.err;
  for (size_t n : two.generated_tokens) EXPECT_TRUE(n >= 1 && n <= 8) << n;  // --max-tokens 8
  EXPECT_EQ(two.out.rfind(reply + "\n", 0), 0u) << two.out;
  EXPECT_GT(two.out.size(), first.out.size() + 1);  // a second, non-empty reply
  EXPECT_EQ(two.prompt_tokens[0], first.prompt_tokens[0]);
  EXPECT_EQ(two.prompt_tokens[1], RenderedTokens({{{"role", "user"}, {"content", "The old man"}},
                                                  {{"role", "assistant"}, {"content", reply}},
                                                  {{"role", "user"}, {"content", "went to the sea"}}}));
}

TEST(ChatCommandTest, ResetStartsOverKeepingTheSystemMessage) {
  const std::vector<std::string> args = Args({"--system", "Answer in one word."});
  const ChatRun once = RunChat("The old man\n", args);
  const ChatRun run = RunChat("The old man\n/reset\nThe old man\n", args);
  ASSERT_EQ(run.error, "");
  ASSERT_EQ(run.prompt_tokens.size(), 2u) << run.err;
  EXPECT_EQ(run.prompt_tokens[0], RenderedTokens({{{"role", "system"}, {"content", "Answer in one word."}},
                                                  {{"role", "user"}, {"content", "The old man"}}}));
  EXPECT_EQ(run.prompt_tokens[1], run.prompt_tokens[0]);
  EXPECT_EQ(run.out, once.out + once.out);  // greedy: the same reply to the same conversation
}

TEST(ChatCommandTest, ExitEndsAndBlankOrUnknownSlashLinesAreNoTurns) {
  const ChatRun run = RunChat("\n   \n/help\nThe old man\n/exit\nnever read\n", Args({}));
  ASSERT_EQ(run.error, "");
  EXPECT_EQ(run.rc, 0);
  EXPECT_EQ(run.prompt_tokens.size(), 1u) << run.err;
  EXPECT_NE(run.err.find("unknown command /help"), std::string::npos) << run.err;
}

TEST(ChatCommandTest, ALineThatCannotRunIsDroppedAndTheChatGoesOn) {
  // Turn 1 fits in 40 tokens, turn 2 (turn 1 and its reply again) does not; a line that
  // is not UTF-8 cannot be tokenized. Neither joins the conversation.
  const ChatRun run = RunChat("The old man and the sea\nwent on and on and on\n\xff bad\n/reset\nThe old man and the sea\n",
                              Args({"--max-model-len", "40"}));
  ASSERT_EQ(run.error, "");
  ASSERT_EQ(run.prompt_tokens.size(), 2u) << run.err;
  EXPECT_EQ(run.prompt_tokens[1], run.prompt_tokens[0]);
  EXPECT_NE(run.err.find("too long for max_model_len 40"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("not valid UTF-8"), std::string::npos) << run.err;
}

TEST(ChatCommandTest, RefusesAnUnknownOptionNamingIt) {
  const ChatRun run = RunChat("", {"--top-q", "0.5"});
  EXPECT_NE(run.error.find("unknown option --top-q"), std::string::npos) << run.error;
}

TEST(ChatCommandTest, RefusesABadSamplingValueBeforeTheFirstTurn) {
  const ChatRun run = RunChat("The old man\n", {"--top-p", "0"});
  EXPECT_NE(run.error.find("top_p"), std::string::npos) << run.error;
  EXPECT_TRUE(run.prompt_tokens.empty());
}

TEST(ChatCommandTest, AModelWithoutAChatTemplateIsAnErrorNamingIt) {
  // The demo model's tokenizer.json alone: the same vocabulary, no tokenizer_config.json template.
  const fs::path dir = fs::temp_directory_path() / ("chat_command_test_tokenizer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(VLLM_DEMO_MODEL_DIR) / "hf" / "tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  const ChatRun run = RunChat("The old man\n", {"--tokenizer", dir.string()});
  fs::remove_all(dir);
  EXPECT_NE(run.error.find(std::string("the model ") + kDemoModelName + " has no chat template"), std::string::npos)
      << run.error;
}

}  // namespace
}  // namespace vllm
