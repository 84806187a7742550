// The one place that picks a PagedAttention kernel for a batch shape.
//
// Every variant states what it supports (SupportsShape), and the choice only
// returns a plan whose kernel supports the shape; the launcher checks it again and
// throws instead of launching anything else. Unit-tested at every boundary in
// tests/vt/gpu/paged_attention_choice_test.cpp without a GPU, including head_dim
// 64/128/256 at batch sizes 1..512.
//
// Variants (paged_attention.cu):
//   kRowsOnePass   one block per (query row, query head) walks all keys of the row's
//                  causal context with an online softmax and writes the output.
//   kRowsSplitKv   the same walk cut into partitions of partition_size keys, one
//                  block per (row, head, partition), each writing a partial
//                  (max, sum, weighted V); a second kernel combines the partitions.
//                  Used when (rows x heads) is too small to fill the GPU and the
//                  context is long (decode of a few sequences): the partitions
//                  supply the missing parallelism.
//   kQueryTiles    prefill: one block per (16 query rows of a sequence, query head),
//                  keys and values staged in shared memory once for the 16 rows.
//                  Not chosen by default yet (written without a GPU at hand):
//                  vt::tuning family "gpu.paged_attention" forces it ("query_tiles")
//                  or the row kernels ("rows"); tests/vt/gpu/paged_attention_
//                  variants_test.cpp checks it against the CPU.
// All accept any head_dim in [1, kMaxHeadDim] and any block size, batch size,
// query length and cache strides.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vt/error.h"

namespace vt::gpu {

enum class PagedAttentionKernel { kRowsOnePass, kRowsSplitKv, kQueryTiles };

struct PagedAttentionShape {
  int64_t num_tokens = 0;  // T, query rows of the batch
  int64_t num_heads = 0;   // Nq
  int64_t head_dim = 0;    // D
  int64_t max_seq_len = 0;
  int multiprocessors = 1;
  int64_t max_query_len = 1;
  int64_t num_seqs = 1;    // B
};

struct PagedAttentionPlan {
  PagedAttentionKernel kernel = PagedAttentionKernel::kRowsOnePass;
  int64_t partition_size = 0;  // keys per partition (kRowsSplitKv only)
  int64_t num_partitions = 1;
};

inline constexpr int64_t kPagedAttentionMaxHeadDim = 256;
inline constexpr int64_t kPagedAttentionThreads = 128;  // block size of both variants
// Largest grid dimension both CUDA and HIP accept in y and z.
inline constexpr int64_t kPagedAttentionMaxGridYZ = 65535;

inline constexpr int64_t kSplitKvMinPartition = 512;  // keys; a partition shorter than this costs more than it gives
inline constexpr int64_t kSplitKvMaxPartitions = 128;
inline constexpr int64_t kSplitKvBlocksPerMultiprocessor = 4;  // below this many (row, head) blocks, split

inline bool SupportsShape(PagedAttentionKernel kernel, const PagedAttentionShape& s, const PagedAttentionPlan& plan) {
  const bool common = s.head_dim >= 1 && s.head_dim <= kPagedAttentionMaxHeadDim && s.num_tokens >= 1 &&
                      s.num_heads >= 1 && s.num_heads <= kPagedAttentionMaxGridYZ;
  if (kernel == PagedAttentionKernel::kRowsOnePass) return common && plan.num_partitions == 1;
  if (kernel == PagedAttentionKernel::kQueryTiles) {  // grid x: ceil(T / 16) + B blocks
    return common && plan.num_partitions == 1 && s.num_seqs >= 1 && s.num_tokens / 16 + s.num_seqs < (int64_t{1} << 31) - 1;
  }
  return common && plan.partition_size >= 1 && plan.num_partitions >= 1 &&
         plan.num_partitions <= kPagedAttentionMaxGridYZ && plan.num_partitions * plan.partition_size >= s.max_seq_len;
}

inline PagedAttentionPlan ChoosePagedAttention(const PagedAttentionShape& s) {
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

inline constexpr std::string_view kPagedAttentionVariantFamily = "gpu.paged_attention";

// `chosen` replaced by the forced variant where the shape supports it: "query_tiles"
// (kQueryTiles), "rows" (the row kernels' own plan); "" keeps `chosen`. Throws for an
// unknown name.
inline PagedAttentionPlan ApplyPagedAttentionVariant(const PagedAttentionPlan& chosen, const PagedAttentionShape& s,
                                                     std::string_view variant) {
  if (variant.empty() || variant == "rows") return chosen.kernel == PagedAttentionKernel::kQueryTiles ? ChoosePagedAttention(s) : chosen;
  if (variant == "query_tiles") {
    const PagedAttentionPlan tiles{PagedAttentionKernel::kQueryTiles, 0, 1};
    return SupportsShape(tiles.kernel, s, tiles) ? tiles : chosen;
  }
  throw Error("vt::PagedAttention: unknown variant '" + std::string(variant) + "' forced for " +
              std::string(kPagedAttentionVariantFamily) + " (known: rows, query_tiles)");
}

}  // namespace vt::gpu
