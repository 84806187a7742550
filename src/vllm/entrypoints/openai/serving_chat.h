// POST /v1/chat/completions (vLLM's OpenAIServingChat): messages rendered with the
// model's chat template -> chat.completion, or with stream an SSE stream of
// chat.completion.chunk deltas (the role first, then the content).
#pragma once

#include <string>

#include "serving_engine.h"

namespace vllm::openai {

class ServingChat {
 public:
  explicit ServingChat(const ServingContext& context) : context_(context) {}
  ApiResponse Create(const std::string& body) const;

 private:
  const ServingContext& context_;
};

}  // namespace vllm::openai
