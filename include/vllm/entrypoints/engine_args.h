// The engine flags shared by `generate`, `serve` and `bench` (vLLM's names), declared
// on a CliArgs and read back into an EngineConfig; and --generation-config, which only
// the commands that take requests' sampling fields (`generate`, `serve`) declare.
#pragma once

#include <functional>
#include <string>

#include "vllm/engine/engine_config.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/generation_config.h"

namespace vllm {

void AddEngineArgs(CliArgs& cli);
// The model option `option` ("model") when given; otherwise the embedded demo model
// (kDemoModelName) where this binary registered one, else CliError naming `command`.
std::string ModelOrDemoModel(const CliArgs& cli, const std::string& command, const std::string& option = "model");
EngineConfig EngineConfigFromArgs(const CliArgs& cli, const std::string& model);

void AddGenerationConfigArg(CliArgs& cli);
// The defaults --generation-config names for `model` (LoadSamplingDefaults), with the
// startup lines (overridden defaults, ignored fields) sent to `log`.
SamplingDefaults SamplingDefaultsFromArgs(const CliArgs& cli, const std::string& model,
                                          const std::function<void(const std::string&)>& log);

}  // namespace vllm
