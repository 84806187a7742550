// What the engine reports about a request after a step (vLLM's RequestOutput,
// flattened to the single completion vllm-cpp produces per request).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vllm/sample/sampler.h"

namespace vllm {

struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;  // every generated token so far
  std::string text;                // their text (stop string removed), "" without a tokenizer
  std::vector<int32_t> new_token_ids;  // generated in this step
  std::string new_text;                // text made final in this step
  // One entry per generated token (when logprobs were asked for).
  std::vector<TokenLogprobs> logprobs;
  // One entry per prompt position, nullopt at position 0 (vLLM's convention).
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  bool finished = false;
  std::string finish_reason;  // "stop", "length", "abort"
  std::string stop_reason;    // the stop string that ended it, if any
};

}  // namespace vllm
