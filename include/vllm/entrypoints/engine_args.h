// The engine flags shared by `generate`, `chat`, `serve` and `bench` (vLLM's names),
// declared on a CliArgs and read back into an EngineConfig; --generation-config, which
// only the commands that take requests' sampling fields (`generate`, `chat`, `serve`)
// declare; and the sampling flags of the commands that make requests from their own
// flags (`generate`, `chat`).
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

// --max-tokens (default `max_tokens`), --temperature, --top-k, --top-p, --min-p.
void AddSamplingArgs(CliArgs& cli, const std::string& max_tokens);
// Those flags where given, else the generation config's `defaults`, else SamplingParams'
// own; and --seed (AddEngineArgs) as the request's seed where given.
SamplingParams SamplingParamsFromArgs(const CliArgs& cli, const SamplingDefaults& defaults);

}  // namespace vllm
