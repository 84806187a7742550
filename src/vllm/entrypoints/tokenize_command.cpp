// `vllm-cpp tokenize`: the token ids of texts with a model's tokenizer, as vLLM's
// /tokenize endpoint gives them.
//
//   vllm-cpp tokenize --model PATH (--text TEXT | --input-file FILE.jsonl) [--json]
//
// PATH is an HF folder (tokenizer.json, optionally tokenizer_config.json) or a .gguf
// file. Each input line is {"text": ...}. Special tokens written in the text are
// recognised; a BOS is added only where the tokenizer's configuration asks for one.
// Output: one line per input, the ids separated by spaces, or with --json
// {"ids": [...]}.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/tokenizer/tokenizer.h"

namespace vllm {
namespace {

using nlohmann::ordered_json;

void PrintIds(const std::vector<int32_t>& ids, bool as_json) {
  if (as_json) {
    std::printf("%s\n", ordered_json{{"ids", ids}}.dump().c_str());
    return;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
}

// The "text" of one input line; `where` is "FILE:LINE" for errors.
std::string TextOfLine(const std::string& line, const std::string& where) {
  ordered_json input;
  try {
    input = ordered_json::parse(line);
  } catch (const ordered_json::parse_error& e) {
    throw CliError(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!input.is_object() || !input.contains("text") || !input["text"].is_string()) {
    throw CliError(where + ": expected an object {\"text\": \"...\"}");
  }
  return input["text"].get<std::string>();
}

void TokenizeFile(const Tokenizer& tokenizer, const std::string& path, bool as_json) {
  std::ifstream in(path);
  if (!in) throw CliError("cannot open --input-file " + path);
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    PrintIds(tokenizer.Encode(TextOfLine(line, path + ":" + std::to_string(line_number))), as_json);
  }
}

}  // namespace

int RunTokenizeCommand(const CommandArgs& args) {
  CliArgs cli("tokenize");
  cli.AddOption("model", "HF model folder (tokenizer.json [+ tokenizer_config.json]) or .gguf file");
  cli.AddOption("text", "a text to tokenize");
  cli.AddOption("input-file", "a JSON-lines file of inputs {\"text\": ...}, one per line");
  cli.AddFlag("json", "print {\"ids\": [...]} per input instead of the bare ids");
  cli.AddFlag("help", "show this help");
  cli.Parse(args);
  if (cli.GetFlag("help")) {
    std::printf("%s", cli.Help().c_str());
    return 0;
  }
  if (!cli.WasGiven("model")) throw CliError("--model PATH is required");
  if (cli.WasGiven("text") == cli.WasGiven("input-file")) {
    throw CliError("give exactly one of --text TEXT and --input-file FILE.jsonl");
  }
  const Tokenizer tokenizer = Tokenizer::FromPath(cli.GetString("model"));
  const bool as_json = cli.GetFlag("json");
  if (cli.WasGiven("text")) {
    PrintIds(tokenizer.Encode(cli.GetString("text")), as_json);
  } else {
    TokenizeFile(tokenizer, cli.GetString("input-file"), as_json);
  }
  return 0;
}

}  // namespace vllm
