// Internals of the CPU PagedAttention kernel shared by its translation units and
// its tests: the kernel choice (plan) and the per-ISA micro-kernels.
//
// The kernel (paged_attention.cpp) cuts a call into work items: (sequence, tile of
// query tokens, kv heads, optionally a slice of the context). For each kv head g of
// an item, its rows are the tokens x the query heads that share g, token-major:
//
//   row r = (token token_begin + r / group, query head g * group + r % group)
//
// An item walks its visible context in segments of at most kMaxSegment positions
// that lie in one cache block, and for each segment and kv head runs three
// micro-kernels on the rows that can see it: scores = q . k, an online-softmax
// step per row, then acc = acc * rescale + p . v. q rows are f32, pre-scaled,
// zero-padded to a multiple of kRowPad floats; so are the f32 accumulators.
#pragma once

#include <cstdint>

#include "../cpu_features.h"
#include "vt/dtype.h"

namespace vt::cpu::paged_attention {

inline constexpr int kMaxSegment = 16;  // positions per micro-kernel call
inline constexpr int kRowPad = 32;      // q / acc rows are padded to this many floats

inline int64_t PaddedHeadDim(int64_t head_dim) { return (head_dim + kRowPad - 1) / kRowPad * kRowPad; }

// ---- kernel choice ------------------------------------------------------------

// What the choice depends on: the call's shapes and host-side bounds.
struct ProblemShape {
  int64_t num_seqs = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_query_len = 0;
  int64_t max_seq_len = 0;
  int num_threads = 1;
  Isa isa = Isa::kPortable;  // the widest instruction set allowed (ActiveIsa())
};

struct Plan {
  // Instruction set of the micro-kernels. AVX-512 takes any head_dim (masked
  // tails); AVX2 needs head_dim % 8 == 0 and otherwise falls back to portable.
  Isa isa = Isa::kPortable;
  // Query tokens per work item: about kTargetRows rows (tokens x group) per kv head.
  int64_t tile_tokens = 1;
  // kv heads per work item. All of them, so that a segment's cache rows are read
  // in memory order, unless there are too few items for the threads and contexts
  // are too short to split.
  int64_t kv_heads_per_item = 1;
  // Context positions per work item; 0 = each item covers its whole context.
  // Nonzero only when there are too few (sequence, token tile) items to keep the
  // threads busy and contexts are long: each slice then yields a partial softmax
  // state, merged per row afterwards (flash-decoding).
  int64_t kv_split_len = 0;
};

inline constexpr int64_t kTargetRows = 32;
inline constexpr int64_t kMinSplitLen = 256;  // a context slice is never shorter

Plan ChoosePlan(const ProblemShape& shape);

// ---- micro-kernels ------------------------------------------------------------

// `len` consecutive positions of one kv head inside one cache block: position j's
// key row is at k + j * k_step elements (the cache's block_size stride), same for v.
struct KvSegment {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_step = 0;
  int64_t v_step = 0;
  int len = 0;  // 1 ..kMaxSegment
};

struct MicroKernels {
  // scores[r * kMaxSegment + j] = q_r . k_j for r < rows, j < seg.len.
  void (*scores)(const float* q, int64_t q_stride, int rows, const KvSegment& seg, int64_t head_dim,
                 float* scores);
  // One online-softmax step of a row: s[0, visible) are its scores (visible >= 1).
  // m_new = max(*m, max s); s[j] = e^(s[j] - m_new) for j < visible and 0 for
  // visible <= j < kMaxSegment; *l = *l * e^(*m - m_new) + sum s; *m = m_new.
  // Returns the rescale factor e^(*m_old - m_new) for the row's accumulator.
  float (*softmax_step)(float* s, int visible, float* m, float* l);
  // acc_r = acc_r * rescale[r] + sum_j p[r * kMaxSegment + j] * v_j, r < rows.
  void (*accumulate)(const float* p, const float* rescale, int rows, const KvSegment& seg, int64_t head_dim,
                     float* acc, int64_t acc_stride);
  // Whether q and acc rows are kept with each group of 32 floats split into its
  // even then its odd elements ([x0, x2, .., x30, x1, x3, .., x31]): the order in
  // which the AVX-512 kernels unpack bf16 pairs. The caller permutes q rows after
  // loading them and acc rows back before storing them (SplitPairs / JoinPairs).
  bool pairs_split;
};

// The permutation of MicroKernels::pairs_split on a row of padded_dim floats (a
// multiple of kRowPad), and its inverse.
void SplitPairs(float* row, int64_t padded_dim);
void JoinPairs(float* row, int64_t padded_dim);

// cache_dtype is f32, bf16 or f16.
const MicroKernels& MicroKernelsPortable(DType cache_dtype);
const MicroKernels& MicroKernelsAvx2(DType cache_dtype);
const MicroKernels& MicroKernelsAvx512(DType cache_dtype);

}  // namespace vt::cpu::paged_attention
