// How much memory the KV cache (and the recurrent-state slots) get, and how many
// blocks and slots that makes. Pure arithmetic, so it is tested with made-up
// memory figures; LLMEngine feeds it what the device reports and what the
// profiling forwards measured (DeviceMemoryProfile, worker/memory_profiler.h).
//
// GPU (vLLM's determine_available_memory):
//   cache budget = total x gpu_memory_utilization
//                  - other    memory used on the device outside vt's allocator
//                             (runtime context, library workspaces, other processes)
//                  - weights  vt's live allocations before profiling (the model)
//                  - activations  the peak above that during the largest step
//                  - graphs   decode graphs' own memory, when they are captured
// CPU: the explicit budget (--cpu-kv-cache-bytes, else min(4 GiB, 40% of the
// available RAM)); nothing is profiled.
//
// The budget then buys state slots (up to max_num_seqs, at most half of it), state
// snapshots for hybrid prefix caching (snapshot_budget_bytes' worth) and blocks (up to what max_num_seqs sequences of model_len tokens need), unless
// --num-gpu-blocks-override fixes the block count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vllm/worker/memory_profiler.h"
#include "vt/device.h"

namespace vllm {

// GPU: total x utilization minus everything else the device holds; may be <= 0.
int64_t GpuCacheBudget(const DeviceMemoryProfile& profile, double gpu_memory_utilization);
// CPU: the explicit budget, or min(4 GiB, 40% of the available memory).
int64_t CpuCacheBudget(int64_t cpu_kv_cache_bytes, const vt::MemoryInfo& memory);

struct CachePlanInput {
  int64_t budget_bytes = 0;
  int64_t block_bytes = 0;  // one KV block over all attention layers (0: no attention layers)
  int64_t slot_bytes = 0;   // one state slot over all recurrent layers (0: none)
  int64_t block_size = 16;
  int64_t max_num_seqs = 1;
  int64_t model_len = 0;          // the longest sequence wanted
  int64_t num_padding_slots = 0;  // slots beyond the scheduler's (decode graphs' padding rows)
  int64_t snapshot_budget_bytes = 0;  // state snapshots (prefix caching of hybrid models), slot_bytes each
  std::optional<int64_t> num_gpu_blocks_override;
};

struct CachePlan {
  int64_t block_size = 16;
  int64_t num_blocks = 0;       // including the null block
  int64_t num_state_slots = 0;  // the scheduler's (padding slots come on top)
  int64_t kv_bytes = 0;         // num_blocks x block_bytes
  int64_t state_bytes = 0;      // (num_state_slots + padding) x slot_bytes
  int64_t num_state_snapshots = 0;
  int64_t snapshot_bytes = 0;   // num_state_snapshots x slot_bytes
  int64_t num_tokens() const;   // tokens the pages hold (the null block excluded)
  // How many requests of max_model_len tokens fit at once (vLLM's "maximum
  // concurrency"): the pages' tokens over max_model_len, at most the state slots.
  double max_concurrency(int64_t max_model_len) const;
};

// Throws std::runtime_error, naming the budget and what to change, when fewer than
// two blocks fit.
CachePlan PlanCaches(const CachePlanInput& input, const vt::Device& device);

// The one log line of the chosen figures, e.g.
//   "KV cache on cuda:0: 79.50 GiB, 1302528 tokens (81408 blocks of 16); maximum
//    concurrency at max_model_len 32768: 39.75x; weights 17.90 GiB, activation peak
//    2.13 GiB (profiled: 2048 tokens, 256 logits rows), decode graphs 0.40 GiB, other
//    0.52 GiB; budget 0.90 x 139.80 GiB - those = 110.30 GiB"
// `profile` is null on the CPU, where the budget is explicit and nothing is
// profiled; `weights_bytes` (the checkpoint's) is then what the line reports.
std::string DescribeCaches(const CachePlan& plan, int64_t max_model_len, const vt::Device& device,
                           int64_t budget_bytes, const DeviceMemoryProfile* profile, double gpu_memory_utilization,
                           int64_t weights_bytes);

}  // namespace vllm
