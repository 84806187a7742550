// Memory profiling (vLLM's profile_run / determine_available_memory, nano-vllm's
// warmup_model): before the caches are sized, the model runs the largest steps
// the engine can schedule, on dummy tokens, and the device allocator's peak says
// what their activations take. The caches then get what is left.
//
// The dummy steps run through a ModelRunner of their own over a two-block cache
// (every sequence's block table is block 1 repeated) and one recurrent-state slot
// shared by every sequence: their KV and state are garbage, which profiling does
// not read, and the cache itself stays tiny whatever the context.
#pragma once

#include <cstdint>

#include "vllm/model_executor/model.h"
#include "vt/dtype.h"

namespace vllm {

// One dummy step: num_tokens tokens split as evenly as possible over num_seqs
// sequences (num_seqs <= num_tokens), each with num_computed_tokens already in the
// cache and each sampling (num_seqs logits rows).
struct ProfileStep {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t num_computed_tokens = 0;
};

// The device allocator's peak above its live bytes while `step` runs (the
// profiling cache excluded), after waiting for the device.
int64_t ProfileActivationPeak(const Model& model, int64_t block_size, vt::DType cache_dtype, const ProfileStep& step);

// The step shapes the engine can schedule.
struct ProfileLimits {
  int64_t max_num_batched_tokens = 0;
  int64_t max_num_seqs = 0;
  int64_t max_model_len = 0;
  bool decode_graphs = false;  // decode steps will be captured as device graphs
};

// What the memory profiling measured on the model's device (bytes).
struct DeviceMemoryProfile {
  int64_t total_bytes = 0;
  int64_t other_bytes = 0;            // used outside vt's allocator: runtime, libraries, other processes
  int64_t weights_bytes = 0;          // vt's live allocations before profiling (the model)
  int64_t activation_peak_bytes = 0;  // above those, during the largest prefill or decode step
  int64_t graph_bytes = 0;            // the decode graphs' own memory (a bound), 0 without graphs
  int64_t profiled_tokens = 0;        // the largest step: tokens
  int64_t profiled_logits_rows = 0;   // and logits rows
};

// Runs the largest prefill steps (max_num_batched_tokens tokens over
// min(max_num_seqs, that) sequences, and in one sequence) and the largest decode
// step (as many single-token rows, after a long context), and reads the device's
// figures.
// Decode graphs keep allocations of their own per captured shape (powers of two
// up to the largest batch, whose activations scale with the batch: together at
// most twice the largest), so with graphs graph_bytes = 2 x the decode step's peak.
DeviceMemoryProfile ProfileDeviceMemory(const Model& model, int64_t block_size, vt::DType cache_dtype,
                                        const ProfileLimits& limits);

}  // namespace vllm
