// Parsing tokenizer.json: a JSON DOM of everything except model.vocab and model.merges,
// which are streamed straight into flat vectors. Those two hold almost all of the file
// (150k entries each for Qwen) and building, walking and freeing a DOM of them took
// most of the tokenizer's load time.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vllm {

struct BpeTables {
  bool has_vocab = false;   // model.vocab was an object (streamed here, absent from the DOM)
  bool has_merges = false;  // model.merges was an array (likewise)
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
};

// Throws vt::Error naming `file` (and the key, for bad vocab or merge entries) when the
// text is not JSON or an entry has the wrong type.
nlohmann::json ParseTokenizerJson(std::string_view text, const std::string& file, BpeTables& tables);

}  // namespace vllm
