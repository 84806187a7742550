// The GPU PagedAttention kernel choice (src/vt/gpu/paged_attention_choice.h) at its
// boundaries, without a GPU: the plan for every shape is one its kernel supports,
// including head_dim 64/128/256 at every batch size 1..512 and every GQA ratio, the
// query heads of a kv head are grouped as far as shared memory and registers allow,
// and the split-KV variant starts exactly where the grid stops filling the device.
#include "vt/gpu/paged_attention_choice.h"

#include <gtest/gtest.h>

namespace vt::gpu {
namespace {

constexpr int kH200Multiprocessors = 132;

PagedAttentionShape Shape(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t max_seq_len,
                          int multiprocessors = kH200Multiprocessors) {
  return PagedAttentionShape{tokens, heads, kv_heads, head_dim, max_seq_len, multiprocessors};
}

TEST(PagedAttentionChoiceTest, EveryPlanIsSupportedForEveryHeadDimBatchAndGqaRatio) {
  for (int64_t head_dim = 1; head_dim <= kPagedAttentionMaxHeadDim; ++head_dim) {
    for (int64_t batch : {1, 2, 3, 4, 7, 16, 64, 100, 255, 256, 511, 512}) {
      for (int64_t max_seq_len : {1, 17, 512, 513, 4096, 262144}) {
        for (int multiprocessors : {1, 104, kH200Multiprocessors, 304}) {
          for (auto [heads, kv_heads] : {std::pair{1, 1}, {8, 2}, {16, 4}, {24, 4}, {16, 2}, {64, 1}, {40, 40}}) {
            const PagedAttentionShape s = Shape(batch, heads, kv_heads, head_dim, max_seq_len, multiprocessors);
            const PagedAttentionPlan plan = ChoosePagedAttention(s);
            EXPECT_TRUE(SupportsShape(plan.kernel, s, plan)) << "D " << head_dim << " batch " << batch << " len "
                                                             << max_seq_len << " heads " << heads << "/" << kv_heads;
          }
        }
      }
    }
  }
}

TEST(PagedAttentionChoiceTest, ShapesOutsideTheKernelsAreNeverSupported) {
  for (int64_t head_dim : {int64_t{0}, kPagedAttentionMaxHeadDim + 1, int64_t{512}}) {
    const PagedAttentionShape s = Shape(1, 8, 2, head_dim, 100);
    const PagedAttentionPlan plan = ChoosePagedAttention(s);
    EXPECT_FALSE(SupportsShape(plan.kernel, s, plan)) << head_dim;
  }
  const PagedAttentionShape uneven = Shape(1, 6, 4, 64, 100);  // 6 query heads cannot share 4 kv heads
  EXPECT_FALSE(SupportsShape(PagedAttentionKernel::kRowsOnePass, uneven, ChoosePagedAttention(uneven)));
  const PagedAttentionShape s = Shape(1, 16, 4, 256, 100);
  PagedAttentionPlan too_many_heads = ChoosePagedAttention(s);
  too_many_heads.heads_per_block = 9;  // 9 x 256 query values exceed the block's shared memory
  EXPECT_FALSE(SupportsShape(too_many_heads.kernel, s, too_many_heads));
}

TEST(PagedAttentionChoiceTest, QueryHeadsOfAKvHeadShareABlockAsFarAsTheyFit) {
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 16, 4, 256, 10)).heads_per_block, 4);    // Qwen3.5-9B: all 4
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 16, 2, 256, 10)).heads_per_block, 8);    // 8 x 256 = 2048 values
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 32, 2, 256, 10)).heads_per_block, 8);    // 16 per kv head: 2 blocks
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 32, 1, 64, 10)).heads_per_block, 16);    // register bound
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 8, 8, 128, 10)).heads_per_block, 1);     // no GQA
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 24, 4, 200, 10)).heads_per_block, 6);
  const PagedAttentionShape split_groups = Shape(1, 32, 2, 256, 10);
  EXPECT_EQ(HeadGroupsPerKvHead(split_groups, ChoosePagedAttention(split_groups)), 2);
}

TEST(PagedAttentionChoiceTest, SplitStartsWhereTheGridStopsFillingTheDevice) {
  // 132 SMs x 4 = 528 one-pass blocks; a block is (row, kv head, head group).
  const int64_t full = kH200Multiprocessors * kSplitKvBlocksPerMultiprocessor;
  EXPECT_EQ(ChoosePagedAttention(Shape(full - 1, 4, 1, 128, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(ChoosePagedAttention(Shape(full, 4, 1, 128, 4096)).kernel, PagedAttentionKernel::kRowsOnePass);
  EXPECT_EQ(ChoosePagedAttention(Shape(131, 16, 4, 256, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);  // 524
  EXPECT_EQ(ChoosePagedAttention(Shape(132, 16, 4, 256, 4096)).kernel, PagedAttentionKernel::kRowsOnePass);  // 528
  EXPECT_EQ(ChoosePagedAttention(Shape(131, 16, 4, 256, 4096, 1)).kernel, PagedAttentionKernel::kRowsOnePass);
}

TEST(PagedAttentionChoiceTest, ShortContextsNeverSplit) {
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 16, 4, 256, kSplitKvMinPartition)).kernel,
            PagedAttentionKernel::kRowsOnePass);
  const PagedAttentionPlan plan = ChoosePagedAttention(Shape(1, 16, 4, 256, kSplitKvMinPartition + 1));
  EXPECT_EQ(plan.kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(plan.partition_size, kSplitKvMinPartition);
  EXPECT_EQ(plan.num_partitions, 2);
}

TEST(PagedAttentionChoiceTest, PartitionsCoverTheContextAndStayBounded) {
  for (int64_t len : {513, 1000, 65536, 65537, 262144, 1 << 24}) {
    const PagedAttentionPlan plan = ChoosePagedAttention(Shape(1, 4, 1, 128, len));
    ASSERT_EQ(plan.kernel, PagedAttentionKernel::kRowsSplitKv) << len;
    EXPECT_GE(plan.num_partitions * plan.partition_size, len);
    EXPECT_LT((plan.num_partitions - 1) * plan.partition_size, len);  // no empty trailing partition
    EXPECT_LE(plan.num_partitions, kSplitKvMaxPartitions);
    EXPECT_GE(plan.partition_size, kSplitKvMinPartition);
    EXPECT_EQ(plan.partition_size % 64, 0);
  }
}

}  // namespace
}  // namespace vt::gpu
