// POST /tokenize and /detokenize (vLLM's OpenAIServingTokenization):
//   {"prompt": text} or {"messages": [...], ...} -> {"count", "max_model_len", "tokens", "token_strs"}
//   {"tokens": [ids]}                             -> {"prompt": text}
#pragma once

#include <string>

#include "serving_engine.h"

namespace vllm::openai {

class ServingTokenization {
 public:
  explicit ServingTokenization(const ServingContext& context) : context_(context) {}
  ApiResponse Tokenize(const std::string& body) const;
  ApiResponse Detokenize(const std::string& body) const;

 private:
  const ServingContext& context_;
};

}  // namespace vllm::openai
