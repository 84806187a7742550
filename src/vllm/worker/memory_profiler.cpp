#include "vllm/worker/memory_profiler.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "vllm/core/scheduler_output.h"
#include "vllm/worker/cache_engine.h"
#include "vllm/worker/model_runner.h"
#include "vt/ops.h"

namespace vllm {
namespace {

// The decode profile's context. The attention's scratch grows with the context
// only when a batch is too small to fill the device and is split over its context;
// the largest decode batch is not, and nothing else depends on the context.
constexpr int64_t kDecodeProfileContext = 8192;

SchedulerOutput DummyOutput(const ProfileStep& step, int64_t block_size, bool has_state) {
  SamplingParams greedy;
  greedy.temperature = 0;
  SchedulerOutput output;
  for (int64_t i = 0; i < step.num_seqs; ++i) {
    const int64_t q_len = step.num_tokens / step.num_seqs + (i < step.num_tokens % step.num_seqs ? 1 : 0);
    const int64_t len = step.num_computed_tokens + q_len;
    const std::string id = "profile" + std::to_string(i);
    output.scheduled_new_reqs.push_back({.req_id = id,
                                         .prompt_token_ids = std::vector<int32_t>(static_cast<size_t>(len), 0),
                                         .sampling_params = greedy,
                                         .block_ids = std::vector<int32_t>((len + block_size - 1) / block_size, 1),
                                         .state_slot = has_state ? 0 : -1,
                                         .num_computed_tokens = step.num_computed_tokens});
    output.num_scheduled_tokens[id] = q_len;
  }
  output.total_num_scheduled_tokens = step.num_tokens;
  return output;
}

}  // namespace

int64_t ProfileActivationPeak(const Model& model, int64_t block_size, vt::DType cache_dtype, const ProfileStep& step) {
  if (step.num_seqs < 1 || step.num_tokens < step.num_seqs || step.num_computed_tokens < 0) {
    throw std::invalid_argument("ProfileActivationPeak: " + std::to_string(step.num_tokens) + " tokens over " +
                                std::to_string(step.num_seqs) + " sequences after " +
                                std::to_string(step.num_computed_tokens) + " is not a step");
  }
  const std::vector<LayerCacheSpec> spec = model.cache_spec();
  const vt::Device device = model.device();
  const bool has_state = HasRecurrentLayers(spec);
  ModelRunner runner(model, AllocateCaches(spec, 2, block_size, has_state ? 1 : 0, cache_dtype, device), block_size,
                     /*seed=*/0);
  const SchedulerOutput output = DummyOutput(step, block_size, has_state);
  vt::DeviceBackend& backend = vt::GetDeviceBackend(device.type);
  vt::Synchronize(device);
  const size_t base = backend.GetMemoryStats(device.index).allocated_bytes;
  backend.ResetPeakMemoryStats(device.index);
  runner.ExecuteModel(output);
  vt::Synchronize(device);
  return static_cast<int64_t>(backend.GetMemoryStats(device.index).peak_allocated_bytes - base);
}

DeviceMemoryProfile ProfileDeviceMemory(const Model& model, int64_t block_size, vt::DType cache_dtype,
                                        const ProfileLimits& limits) {
  const vt::Device device = model.device();
  vt::DeviceBackend& backend = vt::GetDeviceBackend(device.type);
  vt::Synchronize(device);
  DeviceMemoryProfile p;
  p.weights_bytes = static_cast<int64_t>(backend.GetMemoryStats(device.index).allocated_bytes);
  p.profiled_tokens = limits.max_num_batched_tokens;
  p.profiled_logits_rows = std::min(limits.max_num_seqs, limits.max_num_batched_tokens);
  // The token budget spent on as many sequences as may run, and on one long prompt
  // (whose chunked recurrent scans may keep more per sequence).
  const int64_t prefill = std::max(
      ProfileActivationPeak(model, block_size, cache_dtype,
                            {.num_tokens = p.profiled_tokens, .num_seqs = p.profiled_logits_rows}),
      ProfileActivationPeak(model, block_size, cache_dtype, {.num_tokens = p.profiled_tokens, .num_seqs = 1}));
  const int64_t context = std::max<int64_t>(0, std::min(limits.max_model_len, kDecodeProfileContext) - 1);
  const int64_t decode = ProfileActivationPeak(model, block_size, cache_dtype,
                                               {.num_tokens = p.profiled_logits_rows,
                                                .num_seqs = p.profiled_logits_rows,
                                                .num_computed_tokens = context});
  p.activation_peak_bytes = std::max(prefill, decode);
  p.graph_bytes = limits.decode_graphs ? 2 * decode : 0;
  const vt::MemoryInfo info = backend.GetMemoryInfo(device.index);
  const vt::MemoryStats stats = backend.GetMemoryStats(device.index);
  p.total_bytes = static_cast<int64_t>(info.total_bytes);
  const int64_t used = static_cast<int64_t>(info.total_bytes - info.free_bytes);
  const int64_t held = static_cast<int64_t>(stats.allocated_bytes + stats.cached_bytes + stats.graph_bytes);
  p.other_bytes = std::max<int64_t>(0, used - held);
  return p;
}

}  // namespace vllm
