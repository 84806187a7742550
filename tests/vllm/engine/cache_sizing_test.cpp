// The cache sizing arithmetic (src/vllm/engine/cache_sizing.cpp) with made-up
// memory figures: the GPU budget is total x utilization minus what the profile
// measured, the CPU budget is explicit, the plan buys slots then blocks, and the
// log line reads the chosen figures exactly.
#include <gtest/gtest.h>

#include <stdexcept>

#include "vllm/engine/cache_sizing.h"

namespace vllm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30, kMiB = int64_t{1} << 20;

DeviceMemoryProfile H200Profile() {
  return {.total_bytes = 140 * kGiB,
          .other_bytes = kGiB / 2,
          .weights_bytes = 18 * kGiB,
          .activation_peak_bytes = 2 * kGiB,
          .graph_bytes = kGiB / 2,
          .profiled_tokens = 2048,
          .profiled_logits_rows = 256};
}

TEST(CacheSizingTest, TheGpuBudgetIsWhatTheProfileLeaves) {
  EXPECT_EQ(GpuCacheBudget(H200Profile(), 0.75), 105 * kGiB - 21 * kGiB);
  DeviceMemoryProfile no_graphs = H200Profile();
  no_graphs.graph_bytes = 0;
  EXPECT_EQ(GpuCacheBudget(no_graphs, 0.5), 70 * kGiB - 20 * kGiB - kGiB / 2);
  EXPECT_LT(GpuCacheBudget(H200Profile(), 0.1), 0) << "a budget the weights exceed";
}

TEST(CacheSizingTest, TheCpuBudgetIsExplicitOrAShareOfTheFreeMemory) {
  EXPECT_EQ(CpuCacheBudget(3 * kMiB, {.free_bytes = size_t{1} << 40, .total_bytes = size_t{1} << 40}), 3 * kMiB);
  EXPECT_EQ(CpuCacheBudget(0, {.free_bytes = 5 * size_t{1} << 30, .total_bytes = 8 * size_t{1} << 30}), 2 * kGiB);
  EXPECT_EQ(CpuCacheBudget(0, {.free_bytes = 64 * size_t{1} << 30, .total_bytes = 64 * size_t{1} << 30}), 4 * kGiB);
}

TEST(CacheSizingTest, AttentionOnlyModelsGetBlocksUpToWhatTheyWant) {
  const CachePlanInput in{.budget_bytes = 1000 * kMiB + 5,
                          .block_bytes = kMiB,
                          .block_size = 16,
                          .max_num_seqs = 8,
                          .model_len = 4096};
  CachePlan plan = PlanCaches(in, vt::kCpu);
  EXPECT_EQ(plan.num_blocks, 1000);
  EXPECT_EQ(plan.num_state_slots, 0);
  EXPECT_EQ(plan.kv_bytes, 1000 * kMiB);
  EXPECT_EQ(plan.num_tokens(), 999 * 16);
  CachePlanInput plenty = in;
  plenty.budget_bytes = 100 * kGiB;
  EXPECT_EQ(PlanCaches(plenty, vt::kCpu).num_blocks, 8 * 256 + 1);  // every sequence at full length
  CachePlanInput fixed = in;
  fixed.num_gpu_blocks_override = 77;
  EXPECT_EQ(PlanCaches(fixed, vt::kCpu).num_blocks, 77);
}

// Recurrent state first (at most half of the budget, at most max_num_seqs slots,
// plus the decode graphs' padding slot), then blocks from the rest.
TEST(CacheSizingTest, HybridModelsBuySlotsThenBlocks) {
  const CachePlanInput in{.budget_bytes = 100 * kMiB,
                          .block_bytes = kMiB,
                          .slot_bytes = 10 * kMiB,
                          .block_size = 16,
                          .max_num_seqs = 8,
                          .model_len = 4096,
                          .num_padding_slots = 1};
  const CachePlan plan = PlanCaches(in, vt::kCpu);
  EXPECT_EQ(plan.num_state_slots, 5);
  EXPECT_EQ(plan.state_bytes, 60 * kMiB);
  EXPECT_EQ(plan.num_blocks, 40);
  EXPECT_DOUBLE_EQ(plan.max_concurrency(64), 5.0) << "39 x 16 tokens hold 9.75 requests, 5 slots hold 5";
  EXPECT_DOUBLE_EQ(plan.max_concurrency(256), 39.0 * 16 / 256);
}

TEST(CacheSizingTest, TooLittleMemoryIsAnErrorNamingTheDevice) {
  const CachePlanInput in{.budget_bytes = -5 * kGiB, .block_bytes = kMiB, .max_num_seqs = 8, .model_len = 4096};
  try {
    PlanCaches(in, vt::Device{vt::DeviceType::kCUDA, 1});
    ADD_FAILURE() << "planned a cache without memory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not enough memory on cuda:1 for the KV cache"), std::string::npos)
        << e.what();
  }
}

TEST(CacheSizingTest, TheLogLineGivesTheChosenFigures) {
  const CachePlan plan = PlanCaches({.budget_bytes = 105 * kGiB,
                                     .block_bytes = 64 * 1024,
                                     .block_size = 16,
                                     .max_num_seqs = 1024,
                                     .model_len = 32768},
                                    vt::Device{vt::DeviceType::kCUDA, 0});
  const DeviceMemoryProfile profile = H200Profile();
  EXPECT_EQ(DescribeCaches(plan, 32768, vt::Device{vt::DeviceType::kCUDA, 0}, 105 * kGiB, &profile, 0.9, 0),
            "KV cache on cuda:0: 105.00 GiB, 27525104 tokens (1720319 blocks of 16); maximum concurrency at "
            "max_model_len 32768: 840.00x; weights 18.00 GiB, activation peak 2.00 GiB (profiled: 2048 tokens, 256 "
            "logits rows), decode graphs 0.50 GiB, other 0.50 GiB; budget 0.90 x 140.00 GiB - those = 105.00 GiB");
  const CachePlan cpu = PlanCaches({.budget_bytes = 4 * kGiB,
                                    .block_bytes = kMiB,
                                    .slot_bytes = 64 * kMiB,
                                    .block_size = 16,
                                    .max_num_seqs = 4,
                                    .model_len = 8192},
                                   vt::kCpu);
  EXPECT_EQ(DescribeCaches(cpu, 8192, vt::kCpu, 4 * kGiB, nullptr, 0.9, 3 * kGiB / 2),
            "KV cache on cpu: 2.00 GiB, 32768 tokens (2048 blocks of 16), recurrent state 0.25 GiB (4 slots); "
            "maximum concurrency at max_model_len 8192: 4.00x; weights 1.50 GiB (checkpoint), activation peak not "
            "profiled on cpu; budget 4.00 GiB (explicit)");
}

}  // namespace
}  // namespace vllm
