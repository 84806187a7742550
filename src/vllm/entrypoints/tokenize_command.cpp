// `vllm-cpp tokenize`: the token ids of texts or chat conversations with a model's
// tokenizer, as vLLM's /tokenize endpoint gives them.
//
//   vllm-cpp tokenize --model PATH (--text TEXT | --input-file FILE.jsonl) [--chat] [--json]
//
// PATH is an HF folder (tokenizer.json, optionally tokenizer_config.json) or a .gguf
// file. Each input line is {"text": ...}, or with --chat {"messages": [...], "tools":
// [...], "add_generation_prompt": bool, "chat_template_kwargs": {...}} (the arguments
// of HF's apply_chat_template; add_generation_prompt defaults to false as there).
// --chat --text TEXT is one user message with a generation prompt. Special tokens
// written in the text are recognised; a BOS is added only where the tokenizer's
// configuration asks for one (never to a rendered chat, as in HF).
// Output: one line per input, the ids separated by spaces (after the rendered prompt
// with --chat), or with --json {"ids": [...]} (plus "prompt" with --chat).
#include <cstdio>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/tokenizer/chat_template.h"
#include "vllm/tokenizer/tokenizer.h"

namespace vllm {
namespace {

using nlohmann::ordered_json;

// The input lines of one run: plain texts, or conversations rendered by the chat template.
class Inputs {
 public:
  Inputs(const Tokenizer& tokenizer, bool chat, bool as_json) : tokenizer_(tokenizer), as_json_(as_json) {
    if (!chat) return;
    if (tokenizer.chat_template().empty()) {
      throw CliError(tokenizer.source() + " has no chat template (tokenizer_config.json chat_template, "
                     "chat_template.jinja or GGUF tokenizer.chat_template)");
    }
    chat_template_.emplace(tokenizer.chat_template());
    tokens_ = ChatTemplateTokensOf(tokenizer);
  }

  // One JSON input line; `where` is "FILE:LINE" for errors.
  void Line(const std::string& line, const std::string& where) const {
    ordered_json input;
    try {
      input = ordered_json::parse(line);
    } catch (const ordered_json::parse_error& e) {
      throw CliError(where + ": not valid JSON (" + e.what() + ")");
    }
    if (chat_template_) {
      Conversation(input, where);
    } else if (input.is_object() && input.contains("text") && input["text"].is_string()) {
      Print(tokenizer_.Encode(input["text"].get<std::string>()), nullptr);
    } else {
      throw CliError(where + ": expected an object {\"text\": \"...\"}");
    }
  }

  void Text(const std::string& text) const {
    if (chat_template_) {
      Conversation({{"messages", {{{"role", "user"}, {"content", text}}}}, {"add_generation_prompt", true}}, "--text");
    } else {
      Print(tokenizer_.Encode(text), nullptr);
    }
  }

 private:
  // Renders and encodes {"messages", "tools", "add_generation_prompt", "chat_template_kwargs"}.
  void Conversation(const ordered_json& input, const std::string& where) const {
    auto field = [&](const char* key, bool (ordered_json::*is_type)() const noexcept, const char* type) {
      if (!input.contains(key) || input[key].is_null()) return ordered_json();
      if (!(input[key].*is_type)()) throw CliError(where + ": \"" + key + "\" must be " + type);
      return input[key];
    };
    if (!input.is_object()) throw CliError(where + ": expected an object {\"messages\": [...], ...}");
    const ordered_json messages = field("messages", &ordered_json::is_array, "an array");
    if (messages.is_null()) throw CliError(where + ": \"messages\" is missing");
    const ordered_json tools = field("tools", &ordered_json::is_array, "an array or null");
    const ordered_json kwargs = field("chat_template_kwargs", &ordered_json::is_object, "an object or null");
    const ordered_json generation = field("add_generation_prompt", &ordered_json::is_boolean, "true or false");
    std::string prompt;
    try {
      prompt = chat_template_->Render(messages, tools, generation.is_boolean() && generation.get<bool>(), kwargs, tokens_);
    } catch (const ChatTemplateError& e) {
      throw CliError(where + ": " + e.what());
    }
    Print(tokenizer_.Encode(prompt, /*add_special_tokens=*/false), &prompt);
  }

  void Print(const std::vector<int32_t>& ids, const std::string* prompt) const {
    if (as_json_) {
      ordered_json out = {{"ids", ids}};
      if (prompt) out["prompt"] = *prompt;
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    std::string line = prompt ? *prompt + "\n" : std::string();
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  }

  const Tokenizer& tokenizer_;
  bool as_json_;
  std::optional<ChatTemplate> chat_template_;
  ChatTemplateTokens tokens_;
};

void TokenizeFile(const Inputs& inputs, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CliError("cannot open --input-file " + path);
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    inputs.Line(line, path + ":" + std::to_string(line_number));
  }
}

}  // namespace

int RunTokenizeCommand(const CommandArgs& args) {
  CliArgs cli("tokenize");
  cli.AddOption("model", "HF model folder (tokenizer.json [+ tokenizer_config.json]) or .gguf file");
  cli.AddOption("text", "a text to tokenize");
  cli.AddOption("input-file",
                "a JSON-lines file of inputs {\"text\": ...}, or with --chat {\"messages\": [...], \"tools\": [...], "
                "\"add_generation_prompt\": bool, \"chat_template_kwargs\": {...}}");
  cli.AddFlag("chat", "render inputs with the model's chat template, then tokenize (--text: one user message)");
  cli.AddFlag("json", "print {\"ids\": [...]} (plus \"prompt\" with --chat) per input instead of the bare ids");
  cli.AddFlag("help", "show this help");
  if (!cli.ParseOrShowHelp(args)) return 0;
  if (!cli.WasGiven("model")) throw CliError("--model PATH is required");
  if (cli.WasGiven("text") == cli.WasGiven("input-file")) {
    throw CliError("give exactly one of --text TEXT and --input-file FILE.jsonl");
  }
  const Tokenizer tokenizer = Tokenizer::FromPath(cli.GetString("model"));
  const Inputs inputs(tokenizer, cli.GetFlag("chat"), cli.GetFlag("json"));
  if (cli.WasGiven("text")) {
    inputs.Text(cli.GetString("text"));
  } else {
    TokenizeFile(inputs, cli.GetString("input-file"));
  }
  return 0;
}

}  // namespace vllm
