// The prompts a benchmark sends (vLLM's `--dataset-name random | sharegpt | custom`):
//
//   random   N prompts of exactly input_len token ids drawn uniformly from
//            [0, vocab_size) with a seeded generator (each prompt its own stream),
//            each asking for exactly output_len tokens; with a tokenizer, only ids
//            of ordinary (not special) tokens.
//   FILE     a JSONL file (one object per line: "prompt" text or "prompt_token_ids",
//            optionally "output_len" or "max_tokens") or a ShareGPT JSON file (an
//            array of {"conversations": [{"from": "human", "value": ...},
//            {"from": "gpt", "value": ...}, ...]}: the first turn is the prompt, the
//            second's token count the output length). The first N usable entries are
//            taken in file order, cycling when the file has fewer. --output-len, when
//            given, replaces every entry's own length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vllm/tokenizer/tokenizer.h"

namespace vllm::bench {

struct BenchPrompt {
  std::vector<int32_t> prompt_ids;  // empty when the prompt is text not yet tokenized
  std::string prompt_text;          // the text of a file's prompt ("" for random ones)
  int64_t output_len = 0;
  int64_t num_prompt_tokens() const { return static_cast<int64_t>(prompt_ids.size()); }
};

struct DatasetOptions {
  std::string dataset = "random";  // "random" or a file path
  int64_t num_prompts = 0;
  int64_t input_len = 0;                 // random prompts
  int64_t output_len = 0;                // random prompts, and every entry when forced
  bool force_output_len = false;         // --output-len was given
  int64_t vocab_size = 0;                // random ids are drawn below this
  uint64_t seed = 0;
};

// Text prompts are tokenized with `tokenizer` when one is given (their prompt_ids
// filled in); ShareGPT output lengths need it unless forced. Errors name the file,
// the line or entry and what is wrong.
std::vector<BenchPrompt> LoadPrompts(const DatasetOptions& options, const Tokenizer* tokenizer);

}  // namespace vllm::bench
