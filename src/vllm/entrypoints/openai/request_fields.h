// Every top-level field of vLLM's CompletionRequest and ChatCompletionRequest
// (vllm/entrypoints/openai/protocol.py), each with what vllm-cpp does with it.
//
// vLLM logs and ignores a field it does not know; vllm-cpp takes no input without an
// effect, so before an endpoint reads a body, CheckRequestFields refuses with a 400
// naming the field:
//   - a field neither class has (a typo, or an OpenAI field vLLM ignores too);
//   - a field the other endpoint has ("messages" sent to /v1/completions);
//   - a field vllm-cpp does not implement (guided decoding, beam search, ...), unless
//     its value is the one that means "off" (n 1, use_beam_search false, priority 0).
// The fields it lets through are read by the endpoints (serving_completion.cpp,
// serving_chat.cpp, protocol.cpp), each with a server test of its effect.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vllm::openai {

enum class Endpoint { kCompletion, kChat };

// A 400 naming the first field of `body` (an object) that the endpoint refuses.
void CheckRequestFields(const nlohmann::json& body, Endpoint endpoint);

// The names of every field the endpoint's vLLM class declares (for tests).
std::vector<std::string> RequestFieldNames(Endpoint endpoint);

// /tokenize (vLLM's TokenizeCompletionRequest with "prompt", TokenizeChatRequest with
// "messages") and /detokenize (DetokenizeRequest): the same rule, a 400 naming the
// first field the request form does not read, and one for "prompt" and "messages"
// together (one of them would be ignored).
enum class TokenizationForm { kTokenizePrompt, kTokenizeChat, kDetokenize };
void CheckTokenizationFields(const nlohmann::json& body, TokenizationForm form);
std::vector<std::string> TokenizationFieldNames(TokenizationForm form);

}  // namespace vllm::openai
