// The GPU PagedAttention kernel choice (src/vt/gpu/paged_attention_choice.h) at its
// boundaries, without a GPU: the plan for every shape is one its kernel supports,
// including head_dim 64/128/256 at every batch size 1..512; prefill (a sequence with
// 16 or more query rows) takes the query tiles, decode the GQA-group kernel where
// its head_dim, group and alignment allow and the row kernels otherwise; the row
// kernels split exactly where their grid stops filling the device, the group
// kernel's partitions fill it.
#include "vt/gpu/paged_attention_choice.h"

#include <gtest/gtest.h>

namespace vt::gpu {
namespace {

constexpr int kH200Multiprocessors = 132;

PagedAttentionShape Shape(int64_t tokens, int64_t heads, int64_t head_dim, int64_t max_seq_len,
                          int multiprocessors = kH200Multiprocessors) {
  return PagedAttentionShape{tokens, heads, head_dim, max_seq_len, multiprocessors};
}

// A decode batch the group kernel supports: `seqs` one-token rows, bf16 caches.
PagedAttentionShape Decode(int64_t seqs, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t max_seq_len,
                           int multiprocessors = kH200Multiprocessors) {
  PagedAttentionShape s{seqs, heads, head_dim, max_seq_len, multiprocessors, 1, seqs};
  s.num_kv_heads = kv_heads;
  s.cache_vector_width = 8;
  s.cache_vectors_aligned = true;
  return s;
}

TEST(PagedAttentionChoiceTest, EveryPlanIsSupportedForEveryHeadDimAndBatch) {
  for (int64_t head_dim = 1; head_dim <= kPagedAttentionMaxHeadDim; ++head_dim) {
    for (int64_t batch : {1, 2, 3, 4, 7, 16, 64, 100, 255, 256, 511, 512}) {
      for (int64_t max_seq_len : {1, 17, 512, 513, 4096, 262144}) {
        for (int multiprocessors : {1, 104, kH200Multiprocessors, 304}) {
          for (int64_t heads : {1, 8, 16, 64}) {
            PagedAttentionShape s = Shape(batch, heads, head_dim, max_seq_len, multiprocessors);
            PagedAttentionPlan plan = ChoosePagedAttention(s);
            EXPECT_TRUE(SupportsShape(plan.kernel, s, plan))
                << "D " << head_dim << " batch " << batch << " len " << max_seq_len << " heads " << heads;
            s = Decode(batch, heads, heads >= 4 ? heads / 4 : 1, head_dim, max_seq_len, multiprocessors);
            plan = ChoosePagedAttention(s);
            EXPECT_TRUE(SupportsShape(plan.kernel, s, plan))
                << "decode D " << head_dim << " batch " << batch << " len " << max_seq_len << " heads " << heads;
            EXPECT_EQ(plan.kernel == PagedAttentionKernel::kGroupsSplitKv, head_dim % 8 == 0) << head_dim;
          }
        }
      }
    }
  }
}

// Groups of up to 8 query heads, head dims that are whole 16-byte vectors, caches
// aligned to them: anything else is left to the row kernels.
TEST(PagedAttentionChoiceTest, GroupKernelOnlyWhereItsVectorsAndGroupFit) {
  EXPECT_EQ(ChoosePagedAttention(Decode(1, 16, 4, 256, 8192)).kernel, PagedAttentionKernel::kGroupsSplitKv);
  EXPECT_EQ(ChoosePagedAttention(Decode(1, 8, 1, 128, 100)).kernel, PagedAttentionKernel::kGroupsSplitKv);  // 8
  EXPECT_EQ(ChoosePagedAttention(Decode(1, 16, 1, 128, 100)).kernel, PagedAttentionKernel::kRowsOnePass);   // 16
  EXPECT_EQ(ChoosePagedAttention(Decode(1, 6, 2, 64, 100)).kernel, PagedAttentionKernel::kGroupsSplitKv);   // 3
  EXPECT_EQ(ChoosePagedAttention(Decode(1, 8, 3, 64, 100)).kernel, PagedAttentionKernel::kRowsOnePass);     // 8 % 3
  EXPECT_EQ(ChoosePagedAttention(Decode(1, 8, 0, 64, 100)).kernel, PagedAttentionKernel::kRowsOnePass);     // unknown
  PagedAttentionShape s = Decode(1, 16, 4, 100, 100);  // 100 bf16 dims: not whole vectors of 8
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kRowsOnePass);
  s.cache_vector_width = 4;  // f32: 25 vectors of 4
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kGroupsSplitKv);
  s.cache_vectors_aligned = false;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kRowsOnePass);
  s = Decode(1, 16, 4, 256, 100);
  s.cache_vector_width = 0;  // block dtypes
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kRowsOnePass);
  const PagedAttentionShape wide = Decode(1, 16, 4, kPagedAttentionMaxHeadDim + 8, 100);
  const PagedAttentionPlan plan = ChooseGroupsPlan(wide);
  EXPECT_FALSE(SupportsShape(plan.kernel, wide, plan));
}

TEST(PagedAttentionChoiceTest, PrefillTakesTheQueryTilesFromSixteenRows) {
  PagedAttentionShape s = Decode(2048, 16, 4, 256, 2048);
  s.num_seqs = 1;
  s.max_query_len = kQueryTilesMinQueryLen;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kQueryTiles);
  s.max_query_len = kQueryTilesMinQueryLen - 1;  // speculative / short chunks stay on the group kernel
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kGroupsSplitKv);
  s.cache_vectors_aligned = false;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kRowsOnePass);
  s.max_query_len = 2048;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kQueryTiles);
}

// Where the tensor-core kernel takes the operands (mma_operands), prefill from 16 rows
// runs it instead of the query tiles; shorter queries never do.
TEST(PagedAttentionChoiceTest, PrefillTakesTheTensorCoreTilesWhereTheOperandsAllow) {
  PagedAttentionShape s = Decode(2048, 16, 4, 256, 2048);
  s.num_seqs = 1;
  s.mma_operands = true;
  s.max_query_len = kQueryTilesMinQueryLen;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kMmaTiles);
  s.max_query_len = kQueryTilesMinQueryLen - 1;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kGroupsSplitKv);
  s.max_query_len = 2048;
  s.mma_operands = false;
  EXPECT_EQ(ChoosePagedAttention(s).kernel, PagedAttentionKernel::kQueryTiles);
  const PagedAttentionPlan mma{PagedAttentionKernel::kMmaTiles, 0, 1};
  EXPECT_FALSE(SupportsShape(mma.kernel, s, mma));
  s.mma_operands = true;
  EXPECT_TRUE(SupportsShape(mma.kernel, s, mma));
  EXPECT_FALSE(SupportsShape(mma.kernel, s, {PagedAttentionKernel::kMmaTiles, 512, 4}));
  // Forced: taken wherever the operands allow (a decode batch too), else the default stays.
  PagedAttentionShape decode = Decode(1, 16, 4, 256, 8192);
  decode.mma_operands = true;
  EXPECT_EQ(ApplyPagedAttentionVariant(ChoosePagedAttention(decode), decode, "mma_tiles").kernel,
            PagedAttentionKernel::kMmaTiles);
  decode.mma_operands = false;
  EXPECT_EQ(ApplyPagedAttentionVariant(ChoosePagedAttention(decode), decode, "mma_tiles").kernel,
            PagedAttentionKernel::kGroupsSplitKv);
}

// The group kernel aims at kGroupsBlocksPerMultiprocessor blocks per multiprocessor:
// (rows x kv heads) short of that is made up with partitions of 16 keys (a multiple
// of 64 above kGroupsFinePartitionMaxContext).
TEST(PagedAttentionChoiceTest, GroupPartitionsFillTheDevice) {
  PagedAttentionPlan plan = ChoosePagedAttention(Decode(1, 16, 4, 256, 8192));  // 4 blocks per partition: 264
  EXPECT_EQ(plan.partition_size, 64);  // 8192 / 264 -> 32, rounded up to the long contexts' 64
  EXPECT_EQ(plan.num_partitions, 128);
  plan = ChoosePagedAttention(Decode(1, 16, 4, 256, kGroupsFinePartitionMaxContext));  // 768 / 264 -> 16
  EXPECT_EQ(plan.partition_size, kGroupsMinPartition);
  EXPECT_EQ(plan.num_partitions, 48);
  plan = ChoosePagedAttention(Decode(1, 16, 4, 256, kGroupsFinePartitionMaxContext + 1));
  EXPECT_EQ(plan.partition_size, 64);
  EXPECT_EQ(plan.num_partitions, 13);
  plan = ChoosePagedAttention(Decode(1, 16, 4, 256, 512));  // 512 / 264 -> the smallest partition
  EXPECT_EQ(plan.partition_size, kGroupsMinPartition);
  EXPECT_EQ(plan.num_partitions, 32);
  plan = ChoosePagedAttention(Decode(64, 16, 4, 256, 2048));  // 256 per partition: 1056 / 256 -> 5
  EXPECT_EQ(plan.partition_size, 448);
  EXPECT_EQ(plan.num_partitions, 5);
  plan = ChoosePagedAttention(Decode(264, 16, 4, 256, 2048));  // 1056 blocks: no split
  EXPECT_EQ(plan.num_partitions, 1);
  plan = ChoosePagedAttention(Decode(263, 16, 4, 256, 2048));
  EXPECT_EQ(plan.num_partitions, 2);
  plan = ChoosePagedAttention(Decode(1, 16, 4, 256, kGroupsMinPartition));  // one partition holds it all
  EXPECT_EQ(plan.num_partitions, 1);
  plan = ChoosePagedAttention(Decode(1, 16, 4, 256, kGroupsMinPartition + 1));
  EXPECT_EQ(plan.num_partitions, 2);
  for (int64_t len : {1, 15, 16, 17, 511, 512, 513, 2049, 65537, 262144, 1 << 24}) {
    for (int64_t seqs : {1, 3, 64, 1000}) {
      const PagedAttentionShape s = Decode(seqs, 32, 8, 128, len);
      plan = ChoosePagedAttention(s);
      ASSERT_EQ(plan.kernel, PagedAttentionKernel::kGroupsSplitKv) << len;
      EXPECT_TRUE(SupportsShape(plan.kernel, s, plan));
      EXPECT_GE(plan.num_partitions * plan.partition_size, len);
      EXPECT_LT((plan.num_partitions - 1) * plan.partition_size, len);  // no empty trailing partition
      EXPECT_LE(plan.num_partitions, kGroupsMaxPartitions);
      EXPECT_GE(plan.partition_size, kGroupsMinPartition);
      EXPECT_EQ(plan.partition_size % GroupsPartitionMultiple(len), 0);
    }
  }
}

TEST(PagedAttentionChoiceTest, RowsSplitStartsWhereTheGridStopsFillingTheDevice) {
  // 132 SMs x 4 blocks = 528 (row, head) blocks: one fewer splits, that many does not.
  const int64_t full = kH200Multiprocessors * kSplitKvBlocksPerMultiprocessor;
  EXPECT_EQ(ChooseRowsPlan(Shape(full - 1, 1, 128, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(ChooseRowsPlan(Shape(full, 1, 128, 4096)).kernel, PagedAttentionKernel::kRowsOnePass);
  EXPECT_EQ(ChooseRowsPlan(Shape(32, 16, 256, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);  // 512
  EXPECT_EQ(ChooseRowsPlan(Shape(33, 16, 256, 4096)).kernel, PagedAttentionKernel::kRowsOnePass);  // 528
  EXPECT_EQ(ChooseRowsPlan(Shape(32, 16, 256, 4096, 1)).kernel, PagedAttentionKernel::kRowsOnePass);
  // Without the group kernel (no kv heads given), the default is the rows plan.
  EXPECT_EQ(ChoosePagedAttention(Shape(32, 16, 256, 4096)).kernel, PagedAttentionKernel::kRowsSplitKv);
}

TEST(PagedAttentionChoiceTest, RowsShortContextsNeverSplit) {
  EXPECT_EQ(ChooseRowsPlan(Shape(1, 16, 256, kSplitKvMinPartition)).kernel, PagedAttentionKernel::kRowsOnePass);
  const PagedAttentionPlan plan = ChooseRowsPlan(Shape(1, 16, 256, kSplitKvMinPartition + 1));
  EXPECT_EQ(plan.kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(plan.partition_size, kSplitKvMinPartition);
  EXPECT_EQ(plan.num_partitions, 2);
}

TEST(PagedAttentionChoiceTest, RowsPartitionsCoverTheContextAndStayBounded) {
  for (int64_t len : {513, 1000, 65536, 65537, 262144, 1 << 24}) {
    const PagedAttentionPlan plan = ChooseRowsPlan(Shape(1, 4, 128, len));
    ASSERT_EQ(plan.kernel, PagedAttentionKernel::kRowsSplitKv) << len;
    EXPECT_GE(plan.num_partitions * plan.partition_size, len);
    EXPECT_LT((plan.num_partitions - 1) * plan.partition_size, len);  // no empty trailing partition
    EXPECT_LE(plan.num_partitions, kSplitKvMaxPartitions);
    EXPECT_GE(plan.partition_size, kSplitKvMinPartition);
    EXPECT_EQ(plan.partition_size % 64, 0);
  }
}

// Each variant can be forced where the shape supports it ("rows": the row kernels'
// own plan); where it cannot, the default stays; other names throw.
TEST(PagedAttentionChoiceTest, ForcedVariants) {
  PagedAttentionShape prefill = Decode(2048, 16, 4, 256, 2048);
  prefill.max_query_len = 2048;
  const PagedAttentionPlan chosen = ChoosePagedAttention(prefill);
  EXPECT_EQ(chosen.kernel, PagedAttentionKernel::kQueryTiles);
  EXPECT_EQ(ApplyPagedAttentionVariant(chosen, prefill, "").kernel, PagedAttentionKernel::kQueryTiles);
  EXPECT_EQ(ApplyPagedAttentionVariant(chosen, prefill, "rows").kernel, PagedAttentionKernel::kRowsOnePass);
  EXPECT_EQ(ApplyPagedAttentionVariant(chosen, prefill, "groups_split_kv").kernel,
            PagedAttentionKernel::kGroupsSplitKv);
  const PagedAttentionShape decode = Decode(1, 16, 4, 256, 8192);
  const PagedAttentionPlan decode_plan = ChoosePagedAttention(decode);
  EXPECT_EQ(decode_plan.kernel, PagedAttentionKernel::kGroupsSplitKv);
  EXPECT_EQ(ApplyPagedAttentionVariant(decode_plan, decode, "rows").kernel, PagedAttentionKernel::kRowsSplitKv);
  EXPECT_EQ(ApplyPagedAttentionVariant(decode_plan, decode, "query_tiles").kernel, PagedAttentionKernel::kQueryTiles);
  for (int64_t head_dim : {1, 64, 100, 128, 256}) {
    const PagedAttentionShape s = Decode(7, 8, 2, head_dim, 100);
    for (const char* variant : {"", "rows", "query_tiles", "groups_split_kv"}) {
      const PagedAttentionPlan plan = ApplyPagedAttentionVariant(ChoosePagedAttention(s), s, variant);
      EXPECT_TRUE(SupportsShape(plan.kernel, s, plan)) << head_dim << " " << variant;
    }
  }
  const PagedAttentionShape odd = Decode(7, 8, 2, 100, 100);  // the group kernel cannot: the rows plan stays
  EXPECT_EQ(ApplyPagedAttentionVariant(ChoosePagedAttention(odd), odd, "groups_split_kv").kernel,
            PagedAttentionKernel::kRowsOnePass);
  const PagedAttentionShape too_wide = Shape(7, 8, kPagedAttentionMaxHeadDim + 1, 100);
  EXPECT_FALSE(SupportsShape(PagedAttentionKernel::kQueryTiles, too_wide, {PagedAttentionKernel::kQueryTiles, 0, 1}));
  EXPECT_THROW(ApplyPagedAttentionVariant(chosen, prefill, "fastest"), Error);
}

}  // namespace
}  // namespace vt::gpu
