// The CPU PagedAttention kernel choice (src/vt/cpu/kernels/paged_attention_plan.cpp)
// at each of its boundaries, and the invariant that no head dim the op accepts is
// routed to micro-kernels that cannot take it.
#include <gtest/gtest.h>

#include "vt/cpu/kernels/paged_attention.h"

namespace vt::cpu::paged_attention {
namespace {

ProblemShape Decode(int64_t num_seqs, int64_t num_kv_heads, int64_t max_seq_len, int threads) {
  ProblemShape s;
  s.num_seqs = num_seqs;
  s.num_heads = 4 * num_kv_heads;
  s.num_kv_heads = num_kv_heads;
  s.head_dim = 256;
  s.max_query_len = 1;
  s.max_seq_len = max_seq_len;
  s.num_threads = threads;
  s.isa = Isa::kAvx512;
  return s;
}

TEST(PagedAttentionPlanTest, InstructionSetByHeadDim) {
  ProblemShape s = Decode(1, 1, 16, 1);
  for (int64_t d : {1, 7, 8, 12, 64, 100, 256}) {
    s.head_dim = d;
    s.isa = Isa::kAvx512;
    EXPECT_EQ(ChoosePlan(s).isa, Isa::kAvx512) << d;  // masked tails: any head dim
    s.isa = Isa::kAvx2;
    EXPECT_EQ(ChoosePlan(s).isa, d % 8 == 0 ? Isa::kAvx2 : Isa::kPortable) << d;
    s.isa = Isa::kPortable;
    EXPECT_EQ(ChoosePlan(s).isa, Isa::kPortable) << d;
  }
}

TEST(PagedAttentionPlanTest, TileTokensTargetAboutThirtyTwoRows) {
  ProblemShape s = Decode(1, 1, 16, 1);
  for (auto [heads, tile] : std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {2, 16}, {4, 8}, {8, 4}, {32, 1}, {64, 1}}) {
    s.num_heads = heads;
    EXPECT_EQ(ChoosePlan(s).tile_tokens, tile) << "group " << heads;
  }
}

TEST(PagedAttentionPlanTest, ContextSplitOnlyWhenItemsAreFewAndContextsLong) {
  // 2 threads want 4 (sequence, token tile) items; 2 sequences give 2.
  EXPECT_EQ(ChoosePlan(Decode(2, 2, 2 * kMinSplitLen - 1, 2)).kv_split_len, 0);
  EXPECT_EQ(ChoosePlan(Decode(2, 2, 2 * kMinSplitLen, 2)).kv_split_len, kMinSplitLen);
  EXPECT_EQ(ChoosePlan(Decode(1, 2, 4096, 2)).kv_split_len, 1024);
  EXPECT_EQ(ChoosePlan(Decode(2, 2, 4096, 2)).kv_split_len, 2048);
  // 4 sequences are enough for 2 threads.
  EXPECT_EQ(ChoosePlan(Decode(4, 2, 4096, 2)).kv_split_len, 0);
  // 16 threads want 32 items: 32 slices of 128 would be too short, 16 of 256 it is.
  EXPECT_EQ(ChoosePlan(Decode(1, 2, 4096, 16)).kv_split_len, 256);
  // Slices never go below kMinSplitLen, and are whole segments.
  EXPECT_EQ(ChoosePlan(Decode(1, 1, 1000, 64)).kv_split_len, 336);
  // A long prefill has enough token tiles (4 query heads per kv head: 8 tokens a tile).
  ProblemShape prefill = Decode(1, 2, 4096, 2);
  prefill.max_query_len = 32;
  EXPECT_EQ(ChoosePlan(prefill).kv_split_len, 0);
  prefill.max_query_len = 24;
  EXPECT_EQ(ChoosePlan(prefill).kv_split_len, 2048);
}

TEST(PagedAttentionPlanTest, KvHeadsSplitOnlyWhenItemsAreFewAndContextsShort) {
  EXPECT_EQ(ChoosePlan(Decode(4, 8, 100, 2)).kv_heads_per_item, 8);  // enough items
  EXPECT_EQ(ChoosePlan(Decode(1, 8, 4096, 2)).kv_heads_per_item, 8);  // the context splits instead
  EXPECT_EQ(ChoosePlan(Decode(1, 8, 2 * kMinSplitLen - 1, 2)).kv_heads_per_item, 2);
  EXPECT_EQ(ChoosePlan(Decode(2, 8, 100, 2)).kv_heads_per_item, 4);
  EXPECT_EQ(ChoosePlan(Decode(1, 2, 100, 16)).kv_heads_per_item, 1);
  EXPECT_EQ(ChoosePlan(Decode(1, 8, 100, 3)).kv_heads_per_item, 2);  // 6 parts of 8 heads: 4 items of 2
}

TEST(PagedAttentionPlanTest, EveryAcceptedShapeGetsACapablePath) {
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    for (int64_t d = 1; d <= 256; ++d) {
      for (int64_t seq_len : {1, 511, 512, 5000, 100000}) {
        for (int threads : {1, 2, 7, 64}) {
          ProblemShape s = Decode(1, 1 + d % 8, seq_len, threads);
          s.head_dim = d;
          s.isa = isa;
          const Plan plan = ChoosePlan(s);
          EXPECT_LE(static_cast<int>(plan.isa), static_cast<int>(isa));
          if (plan.isa == Isa::kAvx2) {
            EXPECT_EQ(d % 8, 0);
          }
          EXPECT_GE(plan.tile_tokens, 1);
          EXPECT_GE(plan.kv_heads_per_item, 1);
          EXPECT_LE(plan.kv_heads_per_item, s.num_kv_heads);
          if (plan.kv_split_len != 0) {
            EXPECT_GE(plan.kv_split_len, kMinSplitLen);
            EXPECT_EQ(plan.kv_split_len % kMaxSegment, 0);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace vt::cpu::paged_attention
