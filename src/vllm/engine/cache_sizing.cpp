#include "vllm/engine/cache_sizing.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace vllm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

std::string GiB(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  return text;
}

}  // namespace

int64_t GpuCacheBudget(const DeviceMemoryProfile& p, double gpu_memory_utilization) {
  const int64_t allowed = static_cast<int64_t>(static_cast<double>(p.total_bytes) * gpu_memory_utilization);
  return allowed - p.other_bytes - p.weights_bytes - p.activation_peak_bytes - p.graph_bytes;
}

int64_t CpuCacheBudget(int64_t cpu_kv_cache_bytes, const vt::MemoryInfo& memory) {
  if (cpu_kv_cache_bytes > 0) return cpu_kv_cache_bytes;
  return std::min<int64_t>(4 * kGiB, static_cast<int64_t>(static_cast<double>(memory.free_bytes) * 0.4));
}

int64_t CachePlan::num_tokens() const { return (num_blocks - 1) * block_size; }

double CachePlan::max_concurrency(int64_t max_model_len) const {
  double concurrency = static_cast<double>(num_tokens()) / static_cast<double>(std::max<int64_t>(max_model_len, 1));
  if (num_state_slots > 0) concurrency = std::min(concurrency, static_cast<double>(num_state_slots));
  return concurrency;
}

CachePlan PlanCaches(const CachePlanInput& in, const vt::Device& device) {
  CachePlan plan;
  plan.block_size = in.block_size;
  int64_t budget = in.budget_bytes;
  if (in.slot_bytes > 0) {
    plan.num_state_slots = std::min<int64_t>(in.max_num_seqs, std::max<int64_t>(1, budget / 2 / in.slot_bytes));
    plan.state_bytes = (plan.num_state_slots + in.num_padding_slots) * in.slot_bytes;
    budget -= plan.state_bytes;
    const int64_t snapshot_budget = std::min(in.snapshot_budget_bytes, std::max<int64_t>(budget, 0));
    plan.num_state_snapshots = std::min<int64_t>(snapshot_budget / in.slot_bytes, int64_t{1} << 20);
    plan.snapshot_bytes = plan.num_state_snapshots * in.slot_bytes;
    budget -= plan.snapshot_bytes;
  }
  // Enough for every sequence at full length, plus the null block.
  const int64_t blocks_wanted = in.max_num_seqs * ((in.model_len + in.block_size - 1) / in.block_size) + 1;
  if (in.num_gpu_blocks_override) {
    plan.num_blocks = *in.num_gpu_blocks_override;
  } else if (in.block_bytes == 0) {
    plan.num_blocks = blocks_wanted;  // pages cost nothing
  } else {
    plan.num_blocks = std::min<int64_t>(std::max<int64_t>(budget, 0) / in.block_bytes, blocks_wanted);
  }
  if (plan.num_blocks < 2) {
    throw std::runtime_error("not enough memory on " + device.ToString() + " for the KV cache (" +
                             std::to_string(budget) + " bytes left for " + std::to_string(in.block_bytes) +
                             "-byte blocks); lower --max-num-seqs or --max-num-batched-tokens, or raise "
                             "--gpu-memory-utilization / --num-gpu-blocks-override");
  }
  plan.kv_bytes = plan.num_blocks * in.block_bytes;
  return plan;
}

std::string DescribeCaches(const CachePlan& plan, int64_t max_model_len, const vt::Device& device,
                           int64_t budget_bytes, const DeviceMemoryProfile* profile, double gpu_memory_utilization,
                           int64_t weights_bytes) {
  char concurrency[32];
  std::snprintf(concurrency, sizeof concurrency, "%.2fx", plan.max_concurrency(max_model_len));
  std::string line = "KV cache on " + device.ToString() + ": " + GiB(plan.kv_bytes) + ", " +
                     std::to_string(plan.num_tokens()) + " tokens (" + std::to_string(plan.num_blocks - 1) +
                     " blocks of " + std::to_string(plan.block_size) + ")";
  if (plan.num_state_slots > 0) {
    line += ", recurrent state " + GiB(plan.state_bytes) + " (" + std::to_string(plan.num_state_slots) + " slots)";
  }
  if (plan.num_state_snapshots > 0) {
    line += ", state snapshots " + GiB(plan.snapshot_bytes) + " (" + std::to_string(plan.num_state_snapshots) + ")";
  }
  line += "; maximum concurrency at max_model_len " + std::to_string(max_model_len) + ": " + concurrency;
  if (profile == nullptr) {
    return line + "; weights " + GiB(weights_bytes) + " (checkpoint), activation peak not profiled on " +
           device.ToString() + "; budget " + GiB(budget_bytes) + " (explicit)";
  }
  char utilization[16];
  std::snprintf(utilization, sizeof utilization, "%.2f", gpu_memory_utilization);
  return line + "; weights " + GiB(profile->weights_bytes) + ", activation peak " +
         GiB(profile->activation_peak_bytes) + " (profiled: " + std::to_string(profile->profiled_tokens) +
         " tokens, " + std::to_string(profile->profiled_logits_rows) + " logits rows), decode graphs " +
         GiB(profile->graph_bytes) + ", other " + GiB(profile->other_bytes) + "; budget " + utilization + " x " +
         GiB(profile->total_bytes) + " - those = " + GiB(budget_bytes);
}

}  // namespace vllm
