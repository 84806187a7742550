// Shared pieces of the Gated DeltaNet CPU kernels (causal_conv1d*.cpp, gdn_gates.cpp,
// gdn_recurrent*.cpp, gdn_chunked*.cpp): the per-sequence table, f32 row staging,
// and the per-instruction-set entry points.
//
// This header holds declarations and plain structs only. It is included by
// *_avx2.cpp / *_avx512.cpp files too, and an inline function defined here would be
// compiled there with AVX instructions; the linker may keep that copy for everyone.
#pragma once

#include <cstdint>
#include <vector>

#include "vt/op_args.h"
#include "vt/tensor.h"

namespace vt::cpu::gdn {

// Tokens [begin, end) of one sequence and the state slot it reads and writes.
struct SequenceSpan {
  int64_t begin, end, slot;
};

// query_start_loc [B + 1] and state_slot_ids [B] (i32, CPU) as spans. Throws a
// vt::Error naming `op` unless 0 <= start[b] <= start[b+1] <= num_tokens,
// 0 <= slot < num_slots, and no two non-empty sequences share a slot.
std::vector<SequenceSpan> ReadSequences(const char* op, const Tensor& query_start_loc, const Tensor& slot_ids,
                                        int64_t num_tokens, int64_t num_slots);
// One token per sequence: row b is sequence b (the decode step), same checks.
std::vector<SequenceSpan> ReadDecodeSlots(const char* op, const Tensor& slot_ids, int64_t num_slots);

// The token recurrence (gdn_recurrent.cpp) over `seqs` of args: GdnRecurrent's kernel,
// and GdnChunkedPrefill's for its sequences of fewer than kChunkedMinTokens tokens.
void RunRecurrentSequences(const GdnArgs& args, const std::vector<SequenceSpan>& seqs);
// Below this many tokens a sequence's chunk costs more than its tokens one by one
// (measured on a 2-vCPU Zen 4, Dk = Dv = 128: 2 value heads, recurrence 2.9 / 9.6 /
// 15.2 us for 1 / 4 / 8 tokens against 11.7 / 22.2 / 25.5 for a chunk; 32 heads, 41 /
// 87 / 153 against 69 / 89 / 125): MTP's verification rows and the decode rows of a
// mixed step.
inline constexpr int64_t kChunkedMinTokens = 8;

// The most tokens any one sequence has (0 for none): sizes per-worker scratch, which
// a decode step (one token each) should not pay for at prefill size.
int64_t LongestSequence(const std::vector<SequenceSpan>& seqs);

// Rows t in [begin, begin + count) of head `head` of x [T, heads, D] (any float
// dtype, strided rows, unit last stride) -> dst [count][ld] as f32 (columns >= D untouched).
void LoadHeadRows(const Tensor& x, int64_t head, int64_t begin, int64_t count, float* dst, int64_t ld);
// The inverse: src [count][ld] f32 -> rows of head `head` of out [T, heads, D].
void StoreHeadRows(const float* src, int64_t ld, const Tensor& out, int64_t head, int64_t begin, int64_t count);

// Asks the cache to fetch those rows ahead of use (hardware prefetchers do not see
// the pattern: a head's rows are a token row apart, other heads' rows in between).
void PrefetchHeadRows(const Tensor& x, int64_t head, int64_t begin, int64_t count);

// Key head read by value head `value_head` (see GdnArgs::tiled_value_heads).
int64_t KeyHeadOf(int64_t value_head, int64_t key_heads, int64_t value_heads, bool tiled_value_heads);

// Sets the calling thread's flush-to-zero and denormals-are-zero modes for its
// lifetime, restoring them after. Decays exp(G) of a long chunk reach 1e-38 and
// below, where denormal arithmetic costs ~100x; results change below 1e-38 only.
class FlushDenormalsScope {
 public:
  FlushDenormalsScope();
  ~FlushDenormalsScope();
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;

 private:
  unsigned saved_mode_;
};

// ---- CausalConv1d: one token of one channel block ---------------------------------
// out[c] = act(w[K-1][c] * x[c] + sum_{j<K-1} w[j][c] * window[j][c]) for c < n, and
// newest[c] = x[c] as f32. window[0] is the oldest input; `newest` may be window[0]
// (each element is read before it is written). x and out have `dtype`.
struct ConvTokenArgs {
  const void* x;
  void* out;
  DType dtype;
  int64_t n;
  int64_t kernel;               // K
  const float* const* weights;  // K rows of f32 weights for these channels
  const float* const* window;   // K - 1 rows, oldest first
  float* newest;
  bool silu;
};
void ConvTokenPortable(const ConvTokenArgs& a);
void ConvTokenAvx2(const ConvTokenArgs& a);

// ---- GdnRecurrent: one value head of one sequence ---------------------------------
// For each token t: S = decay[t] S; delta = beta[t] (v_t - S^T k_t); S += k_t delta^T;
// out_t = S^T q_t. All rows f32 and contiguous.
struct RecurrentHeadArgs {
  float* state;  // [Dk, Dv], updated in place
  int64_t key_dim, value_dim, tokens;
  const float* q;      // [tokens, Dk]
  const float* k;      // [tokens, Dk]
  const float* v;      // [tokens, Dv]
  const float* decay;  // [tokens] exp(g)
  const float* beta;   // [tokens]
  const float* qk;     // [tokens] q_t . k_t
  float* out;          // [tokens, Dv]
};
void RecurrentHeadPortable(const RecurrentHeadArgs& a);
void RecurrentHeadAvx2(const RecurrentHeadArgs& a);
void RecurrentHeadAvx512(const RecurrentHeadArgs& a);

// ---- GdnChunkedPrefill: the dense products of one chunk ---------------------------
// C = c_scale * C + ab_scale * A B, with A [m, k] read as a[i * a_row_stride + p *
// a_col_stride], B [k, n] rows of ldb, C [m, n] rows of ldc. n is a multiple of 16.
// c_scale == 0 does not read C. a_lower_triangular promises A[i][p] == 0 for p > i,
// so the inner loop for rows [i0, i1) stops at i1. c_lower_triangular asks only for
// C[i][j] with j <= i; other elements may or may not be written.
struct ChunkMatMulArgs {
  int64_t m, n, k;
  const float* a;
  int64_t a_row_stride, a_col_stride;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  float c_scale, ab_scale;
  bool a_lower_triangular;
  bool c_lower_triangular;
};
struct ChunkKernels {
  void (*matmul)(const ChunkMatMulArgs& a);
  // x[i] = exp(x[i]) for i < n (n a multiple of 16); -inf gives 0.
  void (*exp_in_place)(float* x, int64_t n);
};
const ChunkKernels& ChunkKernelsPortable();
const ChunkKernels& ChunkKernelsAvx2();
const ChunkKernels& ChunkKernelsAvx512();

}  // namespace vt::cpu::gdn
