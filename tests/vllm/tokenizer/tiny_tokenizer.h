// Small byte-level BPE tokenizer.json documents built in tests, so that tokenizer tests
// run everywhere without the real files.
//
// The vocabulary holds the 256 single bytes (id = byte value) and then one token per
// merge, in merge order, unless the merged token already exists.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "vllm/tokenizer/byte_level.h"
#include "vllm/tokenizer/pre_tokenizer.h"

namespace vllm::testing {

struct TinyTokenizerJson {
  // Merges of raw byte strings (not byte-level spelled), in rank order.
  std::vector<std::pair<std::string, std::string>> merges;
  nlohmann::json added_tokens = nlohmann::json::array();
  nlohmann::json normalizer = {{"type", "NFC"}};
  nlohmann::json pre_tokenizer = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", std::string(kQwen2SplitPattern)}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  nlohmann::json post_processor = {{"type", "ByteLevel"}};

  // Adds an added token with the next free id and returns that id.
  int AddToken(const std::string& content, bool special, nlohmann::json flags = nlohmann::json::object()) {
    const int id = NumModelTokens() + static_cast<int>(added_tokens.size());
    nlohmann::json token = {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
                            {"rstrip", false},   {"normalized", false}, {"special", special}};
    token.update(flags);
    added_tokens.push_back(token);
    return id;
  }

  // The vocabulary: byte-level spelling -> id.
  nlohmann::json Vocab() const {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level::Encode(std::string(1, static_cast<char>(b)))] = b;
    int next = 256;
    for (const auto& [left, right] : merges) {
      const std::string merged = byte_level::Encode(left + right);
      if (!vocab.contains(merged)) vocab[merged] = next++;
    }
    return vocab;
  }
  int NumModelTokens() const { return static_cast<int>(Vocab().size()); }

  // The id of a raw byte string in the model vocabulary.
  int Id(const std::string& raw) const { return Vocab().at(byte_level::Encode(raw)).get<int>(); }

  nlohmann::json ToJson() const {
    nlohmann::json merge_list = nlohmann::json::array();
    for (const auto& [left, right] : merges) {
      merge_list.push_back({byte_level::Encode(left), byte_level::Encode(right)});
    }
    return {{"version", "1.0"},
            {"added_tokens", added_tokens},
            {"normalizer", normalizer},
            {"pre_tokenizer", pre_tokenizer},
            {"post_processor", post_processor},
            {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
            {"model",
             {{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"continuing_subword_prefix", ""},
              {"end_of_word_suffix", ""},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"ignore_merges", false},
              {"vocab", Vocab()},
              {"merges", merge_list}}}};
  }
};

}  // namespace vllm::testing
