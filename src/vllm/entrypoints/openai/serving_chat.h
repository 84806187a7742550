// POST /v1/chat/completions (vLLM's OpenAIServingChat): messages rendered with the
// model's chat template -> chat.completion, or with stream an SSE stream of
// chat.completion.chunk deltas (the role first, then the content).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "serving_engine.h"

namespace vllm::openai {

// A /v1/chat/completions body read, rendered with the chat template, tokenized and
// checked against the served model: what Create submits to the engine.
struct ChatCompletionRequest {
  std::string request_id;
  std::string model;
  int64_t created = 0;
  StreamOptions stream;
  bool return_token_ids = false;       // vLLM's extra: prompt_token_ids and token_ids
  std::optional<int> top_logprobs;     // set when logprobs is true
  std::optional<int> prompt_logprobs;  // vLLM's extra field
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
};

// A 4xx OpenAIError naming the field for a body that cannot be served.
ChatCompletionRequest ReadChatCompletionRequest(const std::string& body, const ServingContext& context);

class ServingChat {
 public:
  explicit ServingChat(const ServingContext& context) : context_(context) {}
  // `client_gone`: asked while a non-streaming answer waits (see RequestGroup::WaitAll).
  ApiResponse Create(const std::string& body, const ClientGone& client_gone = {}) const;

 private:
  const ServingContext& context_;
};

}  // namespace vllm::openai
