// POST /v1/completions (vLLM's OpenAIServingCompletion): a prompt (a string, a list of
// token ids, or a list of those: n choices each, each its own engine request) ->
// text_completion, or with stream an SSE stream of text_completion chunks.
#pragma once

#include <string>

#include "serving_engine.h"

namespace vllm::openai {

// A /v1/completions body read as Create reads it (a 4xx OpenAIError naming the field when it
// cannot be served), without submitting it.
EngineRequestsOfBody ReadCompletionBody(const std::string& body, const ServingContext& context);

class ServingCompletion {
 public:
  explicit ServingCompletion(const ServingContext& context) : context_(context) {}
  // `client_gone`: asked while a non-streaming answer waits (see RequestGroup::WaitAll).
  ApiResponse Create(const std::string& body, const ClientGone& client_gone = {}) const;

 private:
  const ServingContext& context_;
};

}  // namespace vllm::openai
