// `vllm-cpp chat`: an interactive chat in the terminal (llama.cpp's `llama-cli -cnv`,
// `ollama run`).
//
// Each line read from stdin is a user turn: the whole conversation is rendered with the
// model's chat template (add_generation_prompt), run as one engine request, and the
// reply streams to stdout; the full reply then joins the conversation as the assistant's
// message. "/reset" starts over (keeping --system); "/exit" or the end of input
// (Ctrl-D) ends. The "> " prompt goes to stderr and only when stdin is a terminal, so
// that piped stdout holds the replies alone; a line of figures per turn goes to stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vllm/engine/llm_engine.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/entrypoints/engine_args.h"
#include "vllm/model_loader/embedded_files.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm {
namespace {

using nlohmann::ordered_json;

void DeclareArgs(CliArgs& cli) {
  cli.AddOption("model", std::string("HF checkpoint folder or .gguf file with a chat template (default: the "
                                     "embedded demo model, ") +
                             kDemoModelName + ")");
  cli.AddOption("system", "a system message that opens the conversation (kept by /reset)");
  AddSamplingArgs(cli, "256");  // per reply; --seed (AddEngineArgs) seeds each reply alike
  cli.AddFlag("help", "show this help");
  AddEngineArgs(cli);
  AddGenerationConfigArg(cli);
}

// The model's chat template, or a CliError naming the model and what is missing.
ChatTemplate TemplateOf(const LLMEngine& engine) {
  const std::string& model = engine.config().model;
  if (!engine.has_tokenizer()) {
    throw CliError("the model " + model + " has no tokenizer (tokenizer.json or GGUF tokenizer metadata): " +
                   "give one with --tokenizer PATH");
  }
  const std::string& source = engine.tokenizer().chat_template();
  if (source.empty()) {
    throw CliError("the model " + model + " has no chat template (tokenizer_config.json chat_template, " +
                   "chat_template.jinja or GGUF tokenizer.chat_template): chat needs a chat model; " +
                   "`vllm-cpp generate --prompt TEXT` continues plain text");
  }
  try {
    return ChatTemplate(source);
  } catch (const ChatTemplateError& e) {
    throw CliError("the chat template of the model " + model + " cannot be used: " + e.what());
  }
}

// Steps the engine until its one request ends, writing the text to stdout as it comes.
RequestOutput StreamReply(LLMEngine& engine) {
  RequestOutput last;
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      std::fwrite(out.new_text.data(), 1, out.new_text.size(), stdout);
      std::fflush(stdout);
      if (out.finished) last = std::move(out);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  return last;
}

}  // namespace

int RunChatCommand(const CommandArgs& args) {
  CliArgs cli("chat");
  DeclareArgs(cli);
  if (!cli.ParseOrShowHelp(args)) return 0;
  const EngineConfig config = EngineConfigFromArgs(cli, ModelOrDemoModel(cli, "chat"));
  const SamplingDefaults defaults = SamplingDefaultsFromArgs(
      cli, config.model, [](const std::string& line) { std::fprintf(stderr, "vllm-cpp chat: %s\n", line.c_str()); });
  LLMEngine engine(config);
  const ChatTemplate chat_template = TemplateOf(engine);
  const ChatTemplateTokens template_tokens = ChatTemplateTokensOf(engine.tokenizer());
  SamplingParams params = SamplingParamsFromArgs(cli, defaults);
  params.output_kind = RequestOutputKind::kFinalOnly;  // new_text each step, the whole text at the end
  params.Validate(engine.model_config().vocab_size);  // a bad flag ends the command, not each turn

  ordered_json opening = ordered_json::array();
  if (cli.WasGiven("system")) opening.push_back({{"role", "system"}, {"content", cli.GetString("system")}});
  ordered_json messages = opening;
  const bool interactive = isatty(STDIN_FILENO) != 0;
  int64_t num_turns = 0;
  for (std::string line;;) {
    if (interactive) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) {
      if (interactive) std::fprintf(stderr, "\n");  // the shell's prompt on a line of its own after Ctrl-D
      break;
    }
    if (line == "/exit") break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line == "/reset") {
      messages = opening;
      continue;
    }
    if (line[0] == '/') {
      std::fprintf(stderr, "vllm-cpp chat: unknown command %s: /reset clears the conversation, /exit ends\n",
                   line.c_str());
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    const std::string prompt = chat_template.Render(messages, nullptr, true, ordered_json::object(), template_tokens);
    std::vector<int32_t> prompt_ids;
    try {
      prompt_ids = engine.tokenizer().Encode(prompt, /*add_special_tokens=*/false);  // the template wrote them
      engine.AddRequest("chat-" + std::to_string(num_turns++), prompt_ids, params);
    } catch (const std::exception& e) {  // a line that is not UTF-8, a conversation past max_model_len
      messages.erase(messages.size() - 1);
      std::fprintf(stderr, "vllm-cpp chat: %s; the line is dropped (/reset starts a new conversation)\n", e.what());
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    const RequestOutput reply = StreamReply(engine);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    messages.push_back({{"role", "assistant"}, {"content", reply.text}});
    std::fprintf(stderr, "[%zu prompt tokens, %zu generated (%s) in %.2f s, %.1f tok/s]\n", prompt_ids.size(),
                 reply.token_ids.size(), reply.finish_reason.c_str(), seconds,
                 seconds > 0 ? static_cast<double>(reply.token_ids.size()) / seconds : 0.0);
  }
  return 0;
}

}  // namespace vllm
