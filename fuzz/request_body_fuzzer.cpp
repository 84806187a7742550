// libFuzzer target: an OpenAI request body read as the server reads it, up to the
// point where the engine would take it: JSON -> the typed request of /v1/completions,
// /v1/chat/completions, /tokenize or /detokenize (the first input byte picks which)
// -> SamplingParams, prompts tokenized and chats rendered, for the qwen3 test model
// and the server test tokenizer of tests/data.
//
// A refused body is an OpenAIError with a 4xx status. Anything else is a finding:
// another exception or a 5xx (a body the server would answer with "internal error"),
// a crash, undefined behaviour, or an accepted request that breaks what the engine
// relies on (token ids in the vocabulary, max_tokens >= 1 within max_model_len,
// sampling parameters that pass SamplingParams::Validate).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "entrypoints/openai/serving_chat.h"
#include "entrypoints/openai/serving_completion.h"
#include "entrypoints/openai/serving_tokenization.h"

namespace {

using vllm::openai::OpenAIError;

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "request_body_fuzzer: %s\n", what.c_str());
  std::abort();
}

struct Server {
  vllm::openai::ServingContext& context;
  int64_t vocab_size;
  int64_t max_model_len;
};

Server& TestServer() {
  static vllm::AsyncLLMEngine* engine = [] {
    vllm::EngineConfig config;
    config.model = std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf";
    config.tokenizer = std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer";
    config.max_model_len = 256;
    config.num_gpu_blocks_override = 64;
    config.num_threads = 1;
    return new vllm::AsyncLLMEngine(std::make_unique<vllm::LLMEngine>(config));
  }();
  static const vllm::openai::ServerConfig config = [] {
    vllm::openai::ServerConfig c;
    c.served_model_names = {"test-model"};
    c.log_requests = false;
    return c;
  }();
  static vllm::openai::ServingContext context(*engine, config);
  static Server server{context, engine->vocab_size(), engine->max_model_len()};
  return server;
}

void CheckPrompt(const Server& server, const std::vector<int32_t>& ids, const vllm::SamplingParams& params) {
  if (ids.empty()) Finding("an accepted request with an empty prompt");
  for (int32_t id : ids) {
    if (id < 0 || id >= server.vocab_size) Finding("an accepted prompt holds token id " + std::to_string(id));
  }
  if (params.max_tokens < 1 || static_cast<int64_t>(ids.size()) + params.max_tokens > server.max_model_len) {
    Finding("an accepted request of " + std::to_string(ids.size()) + " prompt tokens asks for max_tokens " +
            std::to_string(params.max_tokens));
  }
  try {
    params.Validate(server.vocab_size);
  } catch (const std::exception& e) {
    Finding(std::string("accepted sampling parameters fail Validate: ") + e.what());
  }
}

void ReadBody(const Server& server, uint8_t endpoint, const std::string& body) {
  switch (endpoint % 4) {
    case 0: {
      const vllm::openai::EngineRequestsOfBody request = vllm::openai::ReadCompletionBody(body, server.context);
      if (request.prompt_ids.empty() || request.prompt_ids.size() != request.params.size()) {
        Finding("an accepted completion request without one SamplingParams per prompt");
      }
      for (size_t i = 0; i < request.prompt_ids.size(); ++i) CheckPrompt(server, request.prompt_ids[i], request.params[i]);
      break;
    }
    case 1: {
      const vllm::openai::EngineRequestsOfBody request = vllm::openai::ReadChatCompletionBody(body, server.context);
      CheckPrompt(server, request.prompt_ids[0], request.params[0]);
      break;
    }
    case 2:
      vllm::openai::ServingTokenization(server.context).Tokenize(body);
      break;
    default:
      vllm::openai::ServingTokenization(server.context).Detokenize(body);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Server& server = TestServer();
  try {
    ReadBody(server, data[0], std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const OpenAIError& e) {
    if (e.status() < 400 || e.status() >= 500) {
      Finding("a refusal with status " + std::to_string(e.status()) + ": " + e.what());
    }
  }
  return 0;
}
