// The flags of `vllm-cpp serve` that configure the HTTP server (vLLM's and uvicorn's
// names), declared on a CliArgs and read back into a ServerConfig; the engine's flags
// are engine_args.h.
#pragma once

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/openai/api_server.h"

namespace vllm::openai {

void AddServerArgs(CliArgs& cli);
// Throws CliError naming the flag whose value is out of range.
ServerConfig ServerConfigFromArgs(const CliArgs& cli);

}  // namespace vllm::openai
