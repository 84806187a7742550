#include "bench_dataset.h"

#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/sampling_params_json.h"

namespace vllm::bench {
namespace {

using nlohmann::json;

// With a tokenizer, ids that name no token or a special one are drawn again (a
// prompt sent as text must decode, and specials would change what a chat prompt is).
std::vector<BenchPrompt> RandomPrompts(const DatasetOptions& o, const Tokenizer* tokenizer) {
  if (o.vocab_size < 1) throw CliError("bench: the random dataset needs the model's vocabulary size");
  std::vector<BenchPrompt> prompts(o.num_prompts);
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(i));
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(o.vocab_size - 1));
    prompts[i].prompt_ids.resize(o.input_len);
    for (int32_t& t : prompts[i].prompt_ids) {
      do {
        t = id(rng);
      } while (tokenizer && (!tokenizer->HasToken(t) || tokenizer->IsSpecial(t)));
    }
    prompts[i].output_len = o.output_len;
  }
  return prompts;
}

int64_t PositiveLength(const json& value, const std::string& where, const char* field) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1) {
    throw CliError(where + "'" + field + "' must be a whole number >= 1");
  }
  return value.get<int64_t>();
}

// One JSONL line: "prompt" (text) or "prompt_token_ids", and its output length.
BenchPrompt FromJsonLine(const json& line, const std::string& where) {
  if (!line.is_object()) throw CliError(where + "each line must be a JSON object");
  BenchPrompt p;
  if (JsonFieldPresent(line, "prompt_token_ids")) {
    const json& ids = line.at("prompt_token_ids");
    if (!ids.is_array() || ids.empty()) throw CliError(where + "'prompt_token_ids' must be a non-empty list of ids");
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        throw CliError(where + "'prompt_token_ids' holds something that is not a token id");
      }
      p.prompt_ids.push_back(id.get<int32_t>());
    }
  } else if (JsonFieldPresent(line, "prompt") && line.at("prompt").is_string()) {
    p.prompt_text = line.at("prompt").get<std::string>();
  } else {
    throw CliError(where + "each line needs \"prompt\" (a string) or \"prompt_token_ids\"");
  }
  if (JsonFieldPresent(line, "output_len")) p.output_len = PositiveLength(line.at("output_len"), where, "output_len");
  if (JsonFieldPresent(line, "max_tokens")) p.output_len = PositiveLength(line.at("max_tokens"), where, "max_tokens");
  return p;
}

std::vector<BenchPrompt> ReadJsonLines(std::istream& in, const std::string& path) {
  std::vector<BenchPrompt> entries;
  std::string text;
  for (int line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    json line;
    try {
      line = ParseJsonWithDepthLimit(text);
    } catch (const std::exception& e) {
      throw CliError(where + "not JSON: " + e.what());
    }
    entries.push_back(FromJsonLine(line, where));
  }
  return entries;
}

// ShareGPT: entries with at least two turns; the first is the prompt, the second the
// reference completion whose token count is the output length.
std::vector<BenchPrompt> ReadShareGpt(std::istream& in, const std::string& path, const Tokenizer* tokenizer,
                                      bool force_output_len) {
  std::stringstream buffer;
  buffer << in.rdbuf();
  json doc;
  try {
    doc = ParseJsonWithDepthLimit(buffer.str());
  } catch (const std::exception& e) {
    throw CliError(path + ": not JSON: " + e.what());
  }
  if (!doc.is_array()) throw CliError(path + ": a ShareGPT file is a JSON array of conversations");
  std::vector<BenchPrompt> entries;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& entry = doc[i];
    if (!entry.is_object() || !JsonFieldPresent(entry, "conversations")) continue;
    const json& turns = entry.at("conversations");
    if (!turns.is_array() || turns.size() < 2) continue;
    const auto turn_text = [&](size_t t) -> std::string {
      const json& turn = turns[t];
      if (!turn.is_object() || !turn.contains("value") || !turn.at("value").is_string()) {
        throw CliError(path + ": conversation " + std::to_string(i) + " turn " + std::to_string(t) +
                       " has no \"value\" string");
      }
      return turn.at("value").get<std::string>();
    };
    BenchPrompt p;
    p.prompt_text = turn_text(0);
    if (!force_output_len) {
      if (!tokenizer) {
        throw CliError(path + ": ShareGPT output lengths are the replies' token counts, which need a tokenizer "
                              "(give --tokenizer, or --output-len for every request)");
      }
      p.output_len = std::max<int64_t>(1, static_cast<int64_t>(tokenizer->Encode(turn_text(1)).size()));
    }
    entries.push_back(std::move(p));
  }
  return entries;
}

}  // namespace

std::vector<BenchPrompt> LoadPrompts(const DatasetOptions& o, const Tokenizer* tokenizer) {
  if (o.num_prompts < 1) throw CliError("bench: --num-prompts must be >= 1");
  if (o.dataset == "random") return RandomPrompts(o, tokenizer);
  std::ifstream file(o.dataset);
  if (!file) throw CliError("bench: cannot open --dataset " + o.dataset);
  const char first = static_cast<char>((file >> std::ws).peek());
  std::vector<BenchPrompt> entries =
      first == '[' ? ReadShareGpt(file, o.dataset, tokenizer, o.force_output_len) : ReadJsonLines(file, o.dataset);
  if (entries.empty()) throw CliError("bench: --dataset " + o.dataset + " holds no usable prompts");
  std::vector<BenchPrompt> prompts;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    BenchPrompt p = entries[i % entries.size()];
    if (o.force_output_len || p.output_len == 0) p.output_len = o.output_len;
    if (p.prompt_ids.empty() && tokenizer) p.prompt_ids = tokenizer->Encode(p.prompt_text);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

}  // namespace vllm::bench
