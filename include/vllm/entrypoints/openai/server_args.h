// The flags of `vllm-cpp serve` that configure the HTTP server (vLLM's and uvicorn's
// names), declared on a CliArgs and read back into a ServerConfig; the engine's flags
// are engine_args.h.
#pragma once

#include <string>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/openai/api_server.h"

namespace vllm::openai {

void AddServerArgs(CliArgs& cli);
// Throws CliError naming the flag whose value is out of range.
ServerConfig ServerConfigFromArgs(const CliArgs& cli);
// --reasoning-parser ("" or "qwen3"), an engine setting (EngineConfig::reasoning_parser)
// that the chat endpoint reads back from the engine.
std::string ReasoningParserFromArgs(const CliArgs& cli);

}  // namespace vllm::openai
