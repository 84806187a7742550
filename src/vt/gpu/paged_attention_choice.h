// The one place that picks a PagedAttention kernel for a batch shape.
//
// Every variant states what it supports (SupportsShape), and the choice only
// returns a plan whose kernel supports the shape; the launcher checks it again and
// throws instead of launching anything else. Unit-tested at every boundary in
// tests/vt/gpu/paged_attention_choice_test.cpp without a GPU, including head_dim
// 64/128/256 at batch sizes 1..512.
//
// Variants (paged_attention.cu):
//   kRowsOnePass    one block per (query row, query head) walks all keys of the row's
//                   causal context with an online softmax and writes the output.
//   kRowsSplitKv    the same walk cut into partitions of partition_size keys, one
//                   block per (row, head, partition), each writing a partial
//                   (max, sum, weighted V); a second kernel combines the partitions.
//   kGroupsSplitKv  decode (flash-decoding): one block per (query row, kv head,
//                   partition) scores the keys for all Nq / Nkv query heads of the
//                   GQA group at once, so each K/V row is read once per group (the
//                   row kernels read it once per query head) and with 16-byte vector
//                   loads (the row kernels load 2 bytes at a time). Partitions are
//                   cut so that (rows x kv heads x partitions) fills the GPU several
//                   times over; one partition writes the output directly, more go
//                   through the row kernels' partition combine.
//                   Needs Nq / Nkv <= kGroupsMaxGroup, head_dim a multiple of the
//                   16-byte vector (8 bf16/f16, 4 f32) and 16-byte aligned cache
//                   pointers and block/offset/head strides (checked on the host:
//                   cache_vectors_aligned); otherwise the row kernels run.
//   kQueryTiles     prefill: one block per (16 query rows of a sequence, query head),
//                   keys and values staged in shared memory once for the 16 rows.
//   kMmaTiles       prefill on tensor cores (paged_attention_mma.cu, CUDA): one block
//                   per (64 query rows, query head, 128 output dims), scores and P V
//                   as mma.m16n8k16 with an online softmax in registers. Needs q and
//                   the caches in one 16-bit dtype, head_dim 64/128/256 and 16-byte
//                   cache rows (mma_operands, asked of the kernel on the host).
//
// Default: when max_query_len >= kQueryTilesMinQueryLen, kMmaTiles where its operands
// allow, else kQueryTiles (a 2048-token 9B prefill on the H200: 212 ms against 253
// ms with the row kernels); shorter queries take kGroupsSplitKv where supported, else
// the row kernels (one pass, or split when (rows x heads) cannot fill the GPU and the
// context is long). vt::tuning family "gpu.paged_attention" forces a variant:
// "rows", "query_tiles", "groups_split_kv", "mma_tiles" (each only where the shape
// supports it; otherwise the default stays).
// The row and tile kernels accept any head_dim in [1, kMaxHeadDim] and any block
// size, batch size, query length and cache strides.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vt/error.h"

namespace vt::gpu {

enum class PagedAttentionKernel { kRowsOnePass, kRowsSplitKv, kQueryTiles, kGroupsSplitKv, kMmaTiles };

struct PagedAttentionShape {
  int64_t num_tokens = 0;  // T, query rows of the batch
  int64_t num_heads = 0;   // Nq
  int64_t head_dim = 0;    // D
  int64_t max_seq_len = 0;
  int multiprocessors = 1;
  int64_t max_query_len = 1;
  int64_t num_seqs = 1;      // B
  int64_t num_kv_heads = 0;  // Nkv; 0: unknown (kGroupsSplitKv unsupported)
  int64_t cache_vector_width = 0;      // cache elements per 16-byte vector: 8 (bf16, f16), 4 (f32)
  bool cache_vectors_aligned = false;  // cache pointers and strides 16-byte aligned
  bool mma_operands = false;           // PagedAttentionMmaSupports (paged_attention_mma.h)
};

struct PagedAttentionPlan {
  PagedAttentionKernel kernel = PagedAttentionKernel::kRowsOnePass;
  int64_t partition_size = 0;  // keys per partition (split variants only)
  int64_t num_partitions = 1;
};

inline constexpr int64_t kPagedAttentionMaxHeadDim = 256;
inline constexpr int64_t kPagedAttentionThreads = 128;  // block size of the row and group variants
// Largest grid dimension both CUDA and HIP accept in y and z.
inline constexpr int64_t kPagedAttentionMaxGridYZ = 65535;

inline constexpr int64_t kSplitKvMinPartition = 512;  // keys; a partition shorter than this costs more than it gives
inline constexpr int64_t kSplitKvMaxPartitions = 128;
inline constexpr int64_t kSplitKvBlocksPerMultiprocessor = 4;  // below this many (row, head) blocks, split

inline constexpr int64_t kQueryTilesMinQueryLen = 16;  // a whole tile of rows in some sequence

inline constexpr int64_t kGroupsMaxGroup = 8;  // query heads per kv head the group kernel holds in registers
// (rows x kv heads x partitions) aimed for: 8 blocks of 4 warps per multiprocessor,
// each warp with 4 keys' K and V loads in flight (about 4 KB), keep ~128 KB in
// flight per multiprocessor.
inline constexpr int64_t kGroupsBlocksPerMultiprocessor = 8;
// Partitions of 16 keys at short context: one step of a 128-thread block at D 256
// with kGroup <= 4 (4 keys per warp), two with kGroup 8. There a block's time is its
// chain of dependent steps (block table, then K and V, then the shuffled dot
// products), not bandwidth. At long context the partials' combine costs more than
// the short chains save, so partitions are multiples of 64 keys there. Measured on an
// H100 (tools/gpu/kernel_ab.sh, vt_gpu_bench, B = 1, D 256, medians of 3; 16-key
// multiples / 64-key multiples): Nkv 4 context 512 17.0 / 21.3 us, 2048 41.5 / 24.8,
// 8192 86.3 / 65.7; Nkv 2 (groups of 8) 512 24.2 / 35.3, 2048 39.7 / 38.8. A line
// through each kind's points crosses near 800 keys for Nkv 4, hence the switch at 768.
inline constexpr int64_t kGroupsMinPartition = 16;
inline constexpr int64_t kGroupsFinePartitionMaxContext = 768;
// The multiple a group plan's partition size is rounded up to (and its smallest size).
inline constexpr int64_t GroupsPartitionMultiple(int64_t max_seq_len) {
  return max_seq_len <= kGroupsFinePartitionMaxContext ? kGroupsMinPartition : 64;
}
inline constexpr int64_t kGroupsMaxPartitions = 512;

inline bool SupportsShape(PagedAttentionKernel kernel, const PagedAttentionShape& s, const PagedAttentionPlan& plan) {
  const bool common = s.head_dim >= 1 && s.head_dim <= kPagedAttentionMaxHeadDim && s.num_tokens >= 1 &&
                      s.num_heads >= 1 && s.num_heads <= kPagedAttentionMaxGridYZ;
  const bool partitions = plan.partition_size >= 1 && plan.num_partitions >= 1 &&
                          plan.num_partitions <= kPagedAttentionMaxGridYZ &&
                          plan.num_partitions * plan.partition_size >= s.max_seq_len;
  switch (kernel) {
    case PagedAttentionKernel::kRowsOnePass: return common && plan.num_partitions == 1;
    case PagedAttentionKernel::kQueryTiles:  // grid x: ceil(T / 16) + B blocks
      return common && plan.num_partitions == 1 && s.num_seqs >= 1 &&
             s.num_tokens / 16 + s.num_seqs < (int64_t{1} << 31) - 1;
    case PagedAttentionKernel::kMmaTiles:  // grid x: ceil(T / 64) + B blocks
      return common && s.mma_operands && plan.num_partitions == 1 && s.num_seqs >= 1 &&
             s.num_tokens / 64 + s.num_seqs < (int64_t{1} << 31) - 1;
    case PagedAttentionKernel::kRowsSplitKv: return common && partitions;
    case PagedAttentionKernel::kGroupsSplitKv:
      return common && partitions && s.num_kv_heads >= 1 && s.num_heads % s.num_kv_heads == 0 &&
             s.num_heads / s.num_kv_heads <= kGroupsMaxGroup &&
             (s.cache_vector_width == 4 || s.cache_vector_width == 8) && s.head_dim % s.cache_vector_width == 0 &&
             s.cache_vectors_aligned;
  }
  return false;
}

// The row kernels' plan: split only when (rows x heads) blocks cannot fill the GPU.
inline PagedAttentionPlan ChooseRowsPlan(const PagedAttentionShape& s) {
  PagedAttentionPlan plan;
  const int64_t blocks = s.num_tokens * s.num_heads;
  const bool few_blocks = blocks < static_cast<int64_t>(s.multiprocessors) * kSplitKvBlocksPerMultiprocessor;
  if (!few_blocks || s.max_seq_len <= kSplitKvMinPartition) return plan;
  int64_t partition = (s.max_seq_len + kSplitKvMaxPartitions - 1) / kSplitKvMaxPartitions;
  partition = partition < kSplitKvMinPartition ? kSplitKvMinPartition : (partition + 63) / 64 * 64;
  plan.kernel = PagedAttentionKernel::kRowsSplitKv;
  plan.partition_size = partition;
  plan.num_partitions = (s.max_seq_len + partition - 1) / partition;
  return plan;
}

// The group kernel's plan: as many partitions (a multiple of
// GroupsPartitionMultiple(max_seq_len) keys) as it takes for (rows x kv heads x partitions) to reach
// kGroupsBlocksPerMultiprocessor blocks per multiprocessor. Whether the shape is
// supported is SupportsShape's answer.
inline PagedAttentionPlan ChooseGroupsPlan(const PagedAttentionShape& s) {
  const int64_t work = s.num_tokens * (s.num_kv_heads > 0 ? s.num_kv_heads : 1);
  const int64_t target = static_cast<int64_t>(s.multiprocessors) * kGroupsBlocksPerMultiprocessor;
  int64_t wanted = work >= target ? 1 : (target + work - 1) / work;
  if (wanted > kGroupsMaxPartitions) wanted = kGroupsMaxPartitions;
  const int64_t len = s.max_seq_len > 1 ? s.max_seq_len : 1;
  const int64_t multiple = GroupsPartitionMultiple(len);
  int64_t partition = ((len + wanted - 1) / wanted + multiple - 1) / multiple * multiple;
  if (partition < multiple) partition = multiple;
  return {PagedAttentionKernel::kGroupsSplitKv, partition, (len + partition - 1) / partition};
}

inline PagedAttentionPlan ChoosePagedAttention(const PagedAttentionShape& s) {
  const PagedAttentionPlan mma{PagedAttentionKernel::kMmaTiles, 0, 1};
  if (s.max_query_len >= kQueryTilesMinQueryLen && SupportsShape(mma.kernel, s, mma)) return mma;
  const PagedAttentionPlan tiles{PagedAttentionKernel::kQueryTiles, 0, 1};
  if (s.max_query_len >= kQueryTilesMinQueryLen && SupportsShape(tiles.kernel, s, tiles)) return tiles;
  const PagedAttentionPlan groups = ChooseGroupsPlan(s);
  if (SupportsShape(groups.kernel, s, groups)) return groups;
  return ChooseRowsPlan(s);
}

inline constexpr std::string_view kPagedAttentionVariantFamily = "gpu.paged_attention";

// `chosen` replaced by the forced variant where the shape supports it: "rows" (the
// row kernels' own plan), "query_tiles" (kQueryTiles), "groups_split_kv"
// (kGroupsSplitKv), "mma_tiles" (kMmaTiles); "" keeps `chosen`. Throws for an
// unknown name.
inline PagedAttentionPlan ApplyPagedAttentionVariant(const PagedAttentionPlan& chosen, const PagedAttentionShape& s,
                                                     std::string_view variant) {
  if (variant.empty()) return chosen;
  if (variant == "rows") return ChooseRowsPlan(s);
  if (variant == "query_tiles") {
    const PagedAttentionPlan tiles{PagedAttentionKernel::kQueryTiles, 0, 1};
    return SupportsShape(tiles.kernel, s, tiles) ? tiles : chosen;
  }
  if (variant == "mma_tiles") {
    const PagedAttentionPlan mma{PagedAttentionKernel::kMmaTiles, 0, 1};
    return SupportsShape(mma.kernel, s, mma) ? mma : chosen;
  }
  if (variant == "groups_split_kv") {
    const PagedAttentionPlan groups = ChooseGroupsPlan(s);
    return SupportsShape(groups.kernel, s, groups) ? groups : chosen;
  }
  throw Error("vt::PagedAttention: unknown variant '" + std::string(variant) + "' forced for " +
              std::string(kPagedAttentionVariantFamily) + " (known: rows, query_tiles, groups_split_kv, mma_tiles)");
}

}  // namespace vt::gpu
