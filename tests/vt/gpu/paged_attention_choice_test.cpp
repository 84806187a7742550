// The GPU PagedAttention kernel choice (src/vt/gpu/paged_attention_choice.h) at its
// boundaries, without a GPU: the plan for every shape is one its kernel supports,
// including head_dim 64/128/256 at every batch size 1..512, and the split-KV
// variant starts exactly where the grid stops filling the device.
#include "vt/gpu/paged_attention_choice.h"

#include <gtest/gtest.h>

namespace vt::gpu {
namespace {

constexpr int kH200Multiprocessors = 132;

PagedAttentionShape Shape(int64_t tokens, int64_t heads, int64_t head_dim, int64_t max_seq_len,
                          int multiprocessors = kH200Multiprocessors) {
  return PagedAttentionShape{tokens, heads, head_dim, max_seq_len, multiprocessors};
}

TEST(PagedAttentionChoiceTest, EveryPlanIsSupportedForEveryHeadDimAndBatch) {
  for (int64_t head_dim = 1; head_dim <= kPagedAttentionMaxHeadDim; ++head_dim) {
    for (int64_t batch : {1, 2, 3, 4, 7, 16, 64, 100, 255, 256, 511, 512}) {
      for (int64_t max_seq_len : {1, 17, 512, 513, 4096, 262144}) {
        for (int multiprocessors : {1, 104, kH200Multiprocessors, 304}) {
          for (int64_t heads : {1, 8, 16, 64}) {
            const PagedAttentionShape s = Shape(batch, heads, head_dim, max_seq_len, multiprocessors);
            const PagedAttentionPlan plan = ChoosePagedAttention(s);
            EXPECT_TRUE(SupportsShape(plan.kernel, s, plan))
                << "D " << head_dim << " batch " << batch << " len " << max_seq_len << " heads " << heads;
          }
        }
      }
    }
  }
}

TEST(PagedAttentionChoiceTest, HeadDimOutsideTheKernelsIsNeverSupported) {
  for (int64_t head_dim : {int64_t{0}, kPagedAttentionMaxHeadDim + 1, int64_t{512}}) {
    const PagedAttentionShape s = Shape(1, 8, head_dim, 100);
    const PagedAttentionPlan plan = ChoosePagedAttention(s);
    EXPECT_FALSE(SupportsShape(plan.kernel, s, plan)) << head_dim;
  }
}

TEST(PagedAttentionChoiceTest, SplitStartsWhereTheGridStopsFillingTheDevice) {
  // 132 SMs x 4 blocks = 528 (row, head) blocks: one fewer splits, that many does not.
  const int64_t full = kH200Multiprocessors * kSplitKvBlocksPerMultiprocessor;
  EXPECT_EQ(ChoosePagedAttention(Shape(full - 1, 1, 128, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(ChoosePagedAttention(Shape(full, 1, 128, 4096)).kernel, PagedAttentionKernel::kRowsOnePass);
  EXPECT_EQ(ChoosePagedAttention(Shape(32, 16, 256, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);  // 512
  EXPECT_EQ(ChoosePagedAttention(Shape(33, 16, 256, 4096)).kernel, PagedAttentionKernel::kRowsOnePass);  // 528
  EXPECT_EQ(ChoosePagedAttention(Shape(32, 16, 256, 4096, 1)).kernel, PagedAttentionKernel::kRowsOnePass);
}

TEST(PagedAttentionChoiceTest, ShortContextsNeverSplit) {
  EXPECT_EQ(ChoosePagedAttention(Shape(1, 16, 256, kSplitKvMinPartition)).kernel,
            PagedAttentionKernel::kRowsOnePass);
  const PagedAttentionPlan plan = ChoosePagedAttention(Shape(1, 16, 256, kSplitKvMinPartition + 1));
  EXPECT_EQ(plan.kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(plan.partition_size, kSplitKvMinPartition);
  EXPECT_EQ(plan.num_partitions, 2);
}

TEST(PagedAttentionChoiceTest, PartitionsCoverTheContextAndStayBounded) {
  for (int64_t len : {513, 1000, 65536, 65537, 262144, 1 << 24}) {
    const PagedAttentionPlan plan = ChoosePagedAttention(Shape(1, 4, 128, len));
    ASSERT_EQ(plan.kernel, PagedAttentionKernel::kRowsSplitKv) << len;
    EXPECT_GE(plan.num_partitions * plan.partition_size, len);
    EXPECT_LT((plan.num_partitions - 1) * plan.partition_size, len);  // no empty trailing partition
    EXPECT_LE(plan.num_partitions, kSplitKvMaxPartitions);
    EXPECT_GE(plan.partition_size, kSplitKvMinPartition);
    EXPECT_EQ(plan.partition_size % 64, 0);
  }
}

// The prefill tile kernel is forced only (until measured): "query_tiles" takes it on
// every shape it supports, "rows" and "" keep the row kernels' plan, other names throw.
TEST(PagedAttentionChoiceTest, ForcedVariants) {
  const PagedAttentionShape prefill = Shape(2048, 16, 256, 2048);
  const PagedAttentionPlan chosen = ChoosePagedAttention(prefill);
  EXPECT_NE(chosen.kernel, PagedAttentionKernel::kQueryTiles);
  EXPECT_EQ(ApplyPagedAttentionVariant(chosen, prefill, "query_tiles").kernel, PagedAttentionKernel::kQueryTiles);
  EXPECT_EQ(ApplyPagedAttentionVariant(chosen, prefill, "rows").kernel, chosen.kernel);
  EXPECT_EQ(ApplyPagedAttentionVariant(chosen, prefill, "").kernel, chosen.kernel);
  for (int64_t head_dim : {1, 64, 128, 256}) {
    const PagedAttentionShape s = Shape(7, 8, head_dim, 100);
    const PagedAttentionPlan plan = ApplyPagedAttentionVariant(ChoosePagedAttention(s), s, "query_tiles");
    EXPECT_TRUE(SupportsShape(plan.kernel, s, plan)) << head_dim;
  }
  const PagedAttentionShape too_wide = Shape(7, 8, kPagedAttentionMaxHeadDim + 1, 100);
  EXPECT_FALSE(SupportsShape(PagedAttentionKernel::kQueryTiles, too_wide, {PagedAttentionKernel::kQueryTiles, 0, 1}));
  EXPECT_THROW(ApplyPagedAttentionVariant(chosen, prefill, "fastest"), Error);
}

}  // namespace
}  // namespace vt::gpu
