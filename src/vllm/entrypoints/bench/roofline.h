// The ceiling a decode step is measured against: the bytes it must read from
// device memory over the memory bandwidth measured on that device in the same run.
//
// A decode step of B sequences at context length C reads (at least):
//   weights   every weight once, except the embedding table, of which it gathers B
//             rows (the whole table when it is also the LM head); MoE expert
//             tensors only for the experts the batch routes to: E * (1 - (1 - k/E)^B)
//             of E, the expected number of distinct experts under uniform routing
//             (B = 1 reads exactly k);
//   kv cache  per full-attention layer and sequence, C * num_kv_heads * head_dim
//             keys and as many values, in the cache dtype;
//   state     per Gated DeltaNet layer and sequence, the f32 SSM state
//             [Hv, Dk, Dv] and conv state [conv_dim, K-1], read and written back.
// Activations are left out (a few MB at decode sizes).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "vllm/engine/llm_engine.h"
#include "vt/device.h"

namespace vllm::bench {

struct StepBytes {
  double weights = 0, kv_cache = 0, state = 0;
  double total() const { return weights + kv_cache + state; }
};
StepBytes DecodeStepBytes(const LLMEngine& engine, int64_t batch, int64_t context_len);

// Bytes of every weight tensor as stored.
int64_t WeightBytes(const LoadedModel& model);

struct Bandwidth {
  double bytes_per_s = 0;
  const char* method = "";  // how it was measured, in words
};
// GPU: a device-to-device copy of 1 GiB (bytes read + written, median of 10 after a
// warm-up). CPU: a streaming read of 1 GiB by the engine's CPU threads (median of 5);
// reading is what decode does with the weights.
Bandwidth MeasureMemoryBandwidth(vt::Device device);

// The run's description for --output-json: device and its name, activation dtype,
// weight format (the dtype most weight elements are stored in) and bytes, the
// engine's limits, and the build (BuildJson).
nlohmann::json EngineJson(const LLMEngine& engine);

}  // namespace vllm::bench
