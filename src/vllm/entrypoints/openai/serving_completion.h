// POST /v1/completions (vLLM's OpenAIServingCompletion): a prompt (a string, a list of
// token ids, or a list of those: one choice each) -> text_completion, or with stream
// an SSE stream of text_completion chunks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "serving_engine.h"

namespace vllm::openai {

// One prompt of a completions request, tokenized.
struct CompletionPrompt {
  std::vector<int32_t> ids;
  std::string text;  // what echo returns: the prompt as sent, or its ids decoded
};

// A /v1/completions body read and checked against the served model: what Create
// submits, one engine request per prompt.
struct CompletionRequest {
  std::string request_id;
  std::string model;
  int64_t created = 0;
  StreamOptions stream;
  bool echo = false;
  bool return_token_ids = false;       // vLLM's extra: prompt_token_ids and token_ids in the choices
  std::optional<int> logprobs;         // top-K of OpenAI's legacy logprobs
  std::optional<int> prompt_logprobs;  // vLLM's prompt_logprobs field, as asked for
  std::vector<CompletionPrompt> prompts;
  std::vector<SamplingParams> params;  // per prompt (max_tokens depends on its length)
};

// A 4xx OpenAIError naming the field for a body that cannot be served.
CompletionRequest ReadCompletionRequest(const std::string& body, const ServingContext& context);

class ServingCompletion {
 public:
  explicit ServingCompletion(const ServingContext& context) : context_(context) {}
  // `client_gone`: asked while a non-streaming answer waits (see RequestGroup::WaitAll).
  ApiResponse Create(const std::string& body, const ClientGone& client_gone = {}) const;

 private:
  const ServingContext& context_;
};

}  // namespace vllm::openai
