// SchedulerOutput <-> bytes: how a step reaches the worker processes of a
// tensor-parallel group (vLLM sends it to its workers serialized, too). Every field
// crosses except await_grammar_bitmask (the bitmask is awaited and sent filled) and
// a server-made grammar (StructuredOutputsParams::prebuilt, which only the sampling
// rank 0 uses; its prebuilt_key crosses).
//
// Decoding checks every length against the bytes left and throws vt::Error
// ("scheduler output: ... truncated at byte N") rather than reading past them.
#pragma once

#include <cstdint>
#include <vector>

#include "vllm/core/scheduler_output.h"

namespace vllm {

std::vector<uint8_t> EncodeSchedulerOutput(const SchedulerOutput& output);
SchedulerOutput DecodeSchedulerOutput(const std::vector<uint8_t>& bytes);

}  // namespace vllm
