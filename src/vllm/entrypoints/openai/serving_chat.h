// POST /v1/chat/completions (vLLM's OpenAIServingChat): messages rendered with the
// model's chat template -> chat.completion, or with stream an SSE stream of
// chat.completion.chunk deltas (the role first, then the content).
#pragma once

#include <string>

#include "serving_engine.h"

namespace vllm::openai {

// A /v1/chat/completions body read as Create reads it (a 4xx OpenAIError naming the field when it
// cannot be served), without submitting it.
EngineRequestsOfBody ReadChatCompletionBody(const std::string& body, const ServingContext& context);

class ServingChat {
 public:
  explicit ServingChat(const ServingContext& context) : context_(context) {}
  // `client_gone`: asked while a non-streaming answer waits (see RequestGroup::WaitAll).
  ApiResponse Create(const std::string& body, const ClientGone& client_gone = {}) const;

 private:
  const ServingContext& context_;
};

}  // namespace vllm::openai
