// The engine flags shared by `generate` and `serve` (vLLM's names), declared on a
// CliArgs and read back into an EngineConfig.
#pragma once

#include "vllm/engine/engine_config.h"
#include "vllm/entrypoints/cli_args.h"

namespace vllm {

void AddEngineArgs(CliArgs& cli);
EngineConfig EngineConfigFromArgs(const CliArgs& cli, const std::string& model);

}  // namespace vllm
