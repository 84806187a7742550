// GdnChunkedPrefill on the GPU in the chunked (WY) form, for sequences of at least
// kChunkedGdnMinTokens tokens (gdn.cu runs the rest through the token recurrence).
//
// The math (docs/qwen35.md §3.3; the CPU kernel gdn_chunked.cpp computes the same):
// per (sequence, value head) and chunk of n <= 64 tokens, with S [Dk, Dv] the state
// entering the chunk, Γ_ij = exp(g_{j+1} + ... + g_i) for j <= i (0 above the
// diagonal), e_i = exp(g_0 + ... + g_i) and rows past n zero:
//
//   L = beta_i (k_i.k_j) Γ_ij  (j < i)     M = (I + L)^-1          [64, 64]
//   P = (q_i.k_j) Γ_ij         (j <= i)                            [64, 64]
//   Z = beta ⊙ (V - e ⊙ (K S))                                     [64, Dv]
//   δ = M Z                    (the chunk's "new values", U - W S in the CPU's terms)
//   O = e ⊙ (Q S) + P δ
//   S = e_{n-1} S + (Γ_{n-1,·} ⊙ K)^T δ
//
// Γ is built from sums of the chunk's own log-decays (never differences of a running
// sum: those lose ~|G| 2^-24 in the exponent), every exponent <= 0. All arithmetic is
// f32, as the token recurrence's: the outputs agree with it to f32 rounding.
//
// Three launches:
//   GdnChunkOffsets   one block: chunk_offsets[s] = the first chunk of sequence s (a
//                     prefix sum of ceil(len / 64) over the chunked sequences), so
//                     no host copy of query_start_loc is needed.
//   GdnChunkMatrices  a block per (chunk, value head), all chunks at once: K K^T and
//                     Q K^T as 4x4 register tiles, L and P, then M by forward
//                     substitution (thread c owns column c, in registers). Writes
//                     M^T, P^T, e and Γ_{n-1,·} to a scratch of kMatrixFloats per
//                     (chunk, head).
//   GdnChunkScan      a block per (sequence, value head, 32 value columns) walks the
//                     sequence's chunks in order with its [Dk, 32] slice of the
//                     state: [K; Q] S as one [128, Dk] x [Dk, 32] product (4x4 tiles
//                     from shared memory, the A operand stored k-major so a warp's
//                     loads are broadcasts), Z, δ = M Z, then O (half the threads)
//                     and the state update (the other half, which keep the state in
//                     registers) side by side.
// Why: the token recurrence (GdnWarpColumns) runs a 2048-token prompt at ~1 us a
// token and layer, a chain of dependent reductions per token; here the chain is one
// link per chunk of 64 tokens and the work in a link is dense products.
//
// Shared memory: GdnChunkMatrices ~103 KB (two blocks an SM on Hopper),
// GdnChunkScan ~166 KB (one); ChunkedGdnFits checks the device's limit.
#include <algorithm>
#include <string>

#include "gdn_chunked.h"
#include "gpu_common.cuh"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::gpu {
namespace {

constexpr int kChunk = 64;
constexpr int kMaxHeadDim = 128;      // Dk and Dv
constexpr int kThreads = 256;
constexpr int kScanColumns = 32;      // value columns of the state a scan block owns
constexpr int kChunkRow = kChunk + 4;         // shared rows of 64 floats, padded (16-byte aligned)
constexpr int kHeadRow = 2 * kChunk + 4;      // [K | Q]^T rows of 128 floats, padded
constexpr int kKeyRow = kMaxHeadDim + 4;      // rows of Dk floats, padded

// The scratch of one (chunk, value head): M^T and P^T [64][64], e [64], Γ_{n-1,·} [64].
constexpr int64_t kMtOffset = 0;
constexpr int64_t kPtOffset = kChunk * kChunk;
constexpr int64_t kEOffset = 2 * kChunk * kChunk;
constexpr int64_t kLastOffset = kEOffset + kChunk;
constexpr int64_t kMatrixFloats = kLastOffset + kChunk;

constexpr size_t kMatricesSharedFloats = 2 * kMaxHeadDim * kChunkRow + 2 * kChunk * kChunkRow + 2 * kChunk;
constexpr size_t kScanSharedFloats = kMaxHeadDim * kHeadRow + kChunk * kKeyRow + 2 * kChunk * kChunkRow +
                                     2 * kChunk * kScanColumns + kMaxHeadDim * kScanColumns + 3 * kChunk;

template <typename T>
struct ChunkParams {
  const T* q;
  const T* k;
  const T* v;
  const float* g;
  const float* beta;
  float* states;
  const int32_t* query_start_loc;
  const int32_t* slot_ids;
  T* out;
  int64_t q_strides[2], k_strides[2], v_strides[2], out_strides[2];  // token, head
  int64_t key_heads, value_heads, key_dim, value_dim, num_seqs, num_slots;
  bool tiled_value_heads;
  int32_t* chunk_offsets;  // [num_seqs + 1]
  float* matrices;         // [max_chunks * value_heads, kMatrixFloats]
};

// Sequence s's tokens [begin, end) when it takes the chunked kernels (a slot inside
// the pool and at least kChunkedGdnMinTokens tokens).
template <typename T>
__device__ inline bool ChunkedSequence(const ChunkParams<T>& p, int64_t s, int64_t& begin, int64_t& end) {
  const int64_t slot = p.slot_ids[s];
  begin = p.query_start_loc[s];
  end = p.query_start_loc[s + 1];
  return slot >= 0 && slot < p.num_slots && end - begin >= kChunkedGdnMinTokens;
}

template <typename T>
__device__ inline int64_t KeyHeadOf(const ChunkParams<T>& p, int64_t head) {
  return p.tiled_value_heads ? head % p.key_heads : head / (p.value_heads / p.key_heads);
}

__device__ inline float4 Load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline void Store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// acc[r][c] += a[r] * b[c] for the 4 x 4 tile.
__device__ inline void OuterProduct4(float (&acc)[4][4], float4 a, float4 b) {
  const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int r = 0; r < 4; ++r) {
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] += av[r] * bv[c];
  }
}

// ---- chunk offsets -------------------------------------------------------------

constexpr int kOffsetThreads = 1024;

template <typename T>
__device__ inline int32_t ChunksOf(const ChunkParams<T>& p, int64_t s) {
  int64_t begin, end;
  return ChunkedSequence(p, s, begin, end) ? static_cast<int32_t>((end - begin + kChunk - 1) / kChunk) : 0;
}

// One block: thread i sums the chunks of a contiguous run of sequences, a block-wide
// scan of those sums gives each run its first chunk.
template <typename T>
__global__ void __launch_bounds__(kOffsetThreads) GdnChunkOffsets(ChunkParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ int32_t totals[kOffsetThreads];
  const int64_t per_thread = (p.num_seqs + kOffsetThreads - 1) / kOffsetThreads;
  const int64_t first = threadIdx.x * per_thread;
  const int64_t last = first + per_thread < p.num_seqs ? first + per_thread : p.num_seqs;
  int32_t sum = 0;
  for (int64_t s = first; s < last; ++s) sum += ChunksOf(p, s);
  totals[threadIdx.x] = sum;
  __syncthreads();
  for (int offset = 1; offset < kOffsetThreads; offset *= 2) {  // inclusive scan
    const int32_t add = static_cast<int>(threadIdx.x) >= offset ? totals[threadIdx.x - offset] : 0;
    __syncthreads();
    totals[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t running = threadIdx.x > 0 ? totals[threadIdx.x - 1] : 0;
  for (int64_t s = first; s < last; ++s) {
    p.chunk_offsets[s] = running;
    running += ChunksOf(p, s);
  }
  if (threadIdx.x == kOffsetThreads - 1) p.chunk_offsets[p.num_seqs] = totals[kOffsetThreads - 1];
}

// ---- per-chunk matrices ------------------------------------------------------------

// Grid (max_chunks, value heads); blocks past the last chunk return.
template <typename T>
__global__ void __launch_bounds__(kThreads) GdnChunkMatrices(ChunkParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t chunk = blockIdx.x, head = blockIdx.y;
  if (chunk >= p.chunk_offsets[p.num_seqs]) return;
  int64_t seq = 0;  // the last sequence whose first chunk is <= chunk (empty ones share offsets)
  for (int64_t lo = 0, hi = p.num_seqs - 1; lo <= hi;) {
    const int64_t mid = (lo + hi) / 2;
    if (p.chunk_offsets[mid] <= chunk) seq = mid, lo = mid + 1; else hi = mid - 1;
  }
  const int64_t t0 = p.query_start_loc[seq] + (chunk - p.chunk_offsets[seq]) * kChunk;
  const int64_t remaining = p.query_start_loc[seq + 1] - t0;
  const int n = static_cast<int>(remaining < kChunk ? remaining : kChunk);
  const int64_t key_head = KeyHeadOf(p, head);
  const int key_dim = static_cast<int>(p.key_dim);

  extern __shared__ float4 shared4[];
  float* kt = reinterpret_cast<float*>(shared4);  // [Dk][kChunkRow]: K^T
  float* qt = kt + kMaxHeadDim * kChunkRow;        // [Dk][kChunkRow]: Q^T
  float* decay = qt + kMaxHeadDim * kChunkRow;     // [64][kChunkRow]: Γ
  float* lower = decay + kChunk * kChunkRow;       // [64][kChunkRow]: L
  float* g = lower + kChunk * kChunkRow;           // [64]
  float* beta = g + kChunk;                        // [64]
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kChunk) {
    g[tid] = tid < n ? p.g[(t0 + tid) * p.value_heads + head] : 0.0f;
    beta[tid] = tid < n ? p.beta[(t0 + tid) * p.value_heads + head] : 0.0f;
  }
  for (int index = tid; index < kChunk * key_dim; index += kThreads) {
    const int i = index / key_dim, d = index % key_dim;
    float kv = 0.0f, qv = 0.0f;
    if (i < n) {
      kv = ToFloat(p.k[(t0 + i) * p.k_strides[0] + key_head * p.k_strides[1] + d]);
      qv = ToFloat(p.q[(t0 + i) * p.q_strides[0] + key_head * p.q_strides[1] + d]);
    }
    kt[d * kChunkRow + i] = kv;
    qt[d * kChunkRow + i] = qv;
  }
  __syncthreads();
  float* out = p.matrices + (chunk * p.value_heads + head) * kMatrixFloats;
  if (tid < kChunk) {
    // Column j of Γ, walked down: Γ_ij = exp(g_{j+1} + ... + g_i).
    const int j = tid;
    float sum = 0.0f;
    for (int i = 0; i < kChunk; ++i) {
      float value = i == j ? 1.0f : 0.0f;
      if (i > j) {
        sum += g[i];
        value = expf(sum);
      }
      decay[i * kChunkRow + j] = value;
    }
  } else if (tid < 2 * kChunk) {
    const int i = tid - kChunk;  // e_i, summed in the CPU kernel's order
    float sum = 0.0f;
    for (int l = 0; l <= i; ++l) sum += g[l];
    out[kEOffset + i] = i < n ? expf(sum) : 0.0f;
  }
  // K K^T and Q K^T: thread (ti, tj) owns rows 4 ti .. 4 ti + 3, columns 4 tj .. 4 tj + 3.
  const int ti = tid / 16, tj = tid % 16;
  float kk[4][4] = {}, qk[4][4] = {};
  for (int d = 0; d < key_dim; ++d) {
    const float4 key_column = Load4(kt + d * kChunkRow + 4 * tj);
    OuterProduct4(kk, Load4(kt + d * kChunkRow + 4 * ti), key_column);
    OuterProduct4(qk, Load4(qt + d * kChunkRow + 4 * ti), key_column);
  }
  __syncthreads();  // Γ written
  if (tid < kChunk) out[kLastOffset + tid] = tid < n ? decay[(n - 1) * kChunkRow + tid] : 0.0f;
  float pt[4][4];  // pt[c][r] = P[4 ti + r][4 tj + c]
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = 4 * ti + r;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int j = 4 * tj + c;
      const float gamma = decay[i * kChunkRow + j];
      lower[i * kChunkRow + j] = j < i ? beta[i] * kk[r][c] * gamma : 0.0f;
      pt[c][r] = j <= i ? qk[r][c] * gamma : 0.0f;
    }
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    Store4(out + kPtOffset + (4 * tj + c) * kChunk + 4 * ti, make_float4(pt[c][0], pt[c][1], pt[c][2], pt[c][3]));
  }
  __syncthreads();  // L written
  if (tid < kChunk) {
    // Column c of M = (I + L)^-1 by forward substitution: M_ic = [i == c] - sum_{j<i} L_ij M_jc.
    // It is row c of M^T, which GdnChunkScan reads k-major.
    const int c = tid;
    float m[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      float acc = i == c ? 1.0f : 0.0f;
#pragma unroll
      for (int j = 0; j < i; ++j) acc -= lower[i * kChunkRow + j] * m[j];
      m[i] = acc;
    }
#pragma unroll
    for (int i = 0; i < kChunk; i += 4) Store4(out + kMtOffset + c * kChunk + i, make_float4(m[i], m[i + 1], m[i + 2], m[i + 3]));
  }
}

// ---- the scan over a sequence's chunks ------------------------------------------

// Grid (sequences, value heads, ceil(Dv / 32)). Thread (tr, tc) = (tid / 8, tid % 8):
// in [K; Q] S, rows 4 tr .. 4 tr + 3 (K rows for tr < 16, Q rows after) and columns
// 4 tc .. 4 tc + 3 of the block's 32; threads tid < 128 then own state rows
// 8 tr .. 8 tr + 7 (in registers), threads tid >= 128 output rows 4 (tr - 16) ...
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) GdnChunkScan(ChunkParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t seq = blockIdx.x, head = blockIdx.y;
  int64_t begin, end;
  if (!ChunkedSequence(p, seq, begin, end)) return;  // uniform across the block
  const int64_t slot = p.slot_ids[seq];
  const int64_t first_column = static_cast<int64_t>(blockIdx.z) * kScanColumns;
  const int64_t key_head = KeyHeadOf(p, head);
  const int key_dim = static_cast<int>(p.key_dim);
  const int columns = static_cast<int>(p.value_dim - first_column < kScanColumns ? p.value_dim - first_column
                                                                                  : kScanColumns);

  extern __shared__ float4 shared4[];
  float* kq = reinterpret_cast<float*>(shared4);  // [Dk][kHeadRow]: K^T (columns 0..63), Q^T (64..127)
  float* kd = kq + kMaxHeadDim * kHeadRow;          // [64][kKeyRow]: Γ_{n-1,j} K_j
  float* mt = kd + kChunk * kKeyRow;                // [64][kChunkRow]: M^T
  float* pt = mt + kChunk * kChunkRow;              // [64][kChunkRow]: P^T
  float* z = pt + kChunk * kChunkRow;               // [64][32]: V, then Z
  float* delta = z + kChunk * kScanColumns;         // [64][32]: δ
  float* state = delta + kChunk * kScanColumns;     // [Dk][32]: S (rows past Dk zero)
  float* e = state + kMaxHeadDim * kScanColumns;    // [64]
  float* last = e + kChunk;                         // [64]: Γ_{n-1,·}
  float* beta = last + kChunk;                      // [64]
  const int tid = static_cast<int>(threadIdx.x);
  const int tr = tid / 8, tc = tid % 8;
  const bool owns_state = tid < kThreads / 2;

  float* global_state = p.states + (slot * p.value_heads + head) * p.key_dim * p.value_dim + first_column;
  for (int index = tid; index < kMaxHeadDim * kScanColumns; index += kThreads) {
    const int d = index / kScanColumns, c = index % kScanColumns;
    state[index] = d < key_dim && c < columns ? global_state[d * p.value_dim + c] : 0.0f;
  }
  __syncthreads();
  float s[8][4];  // owns_state: S rows 8 tr + r, columns 4 tc + c
#pragma unroll
  for (int r = 0; r < 8; ++r) {
#pragma unroll
    for (int c = 0; c < 4; ++c) s[r][c] = owns_state ? state[(8 * tr + r) * kScanColumns + 4 * tc + c] : 0.0f;
  }

  const int64_t first_chunk = p.chunk_offsets[seq];
  for (int64_t t0 = begin; t0 < end; t0 += kChunk) {
    const int n = static_cast<int>(end - t0 < kChunk ? end - t0 : kChunk);
    const float* matrices = p.matrices + ((first_chunk + (t0 - begin) / kChunk) * p.value_heads + head) * kMatrixFloats;
    // Loads of the chunk.
    if (tid < kChunk) {
      e[tid] = matrices[kEOffset + tid];
      last[tid] = matrices[kLastOffset + tid];
      beta[tid] = tid < n ? p.beta[(t0 + tid) * p.value_heads + head] : 0.0f;
    }
    for (int index = tid; index < kChunk * key_dim; index += kThreads) {
      const int i = index / key_dim, d = index % key_dim;
      float kv = 0.0f, qv = 0.0f;
      if (i < n) {
        kv = ToFloat(p.k[(t0 + i) * p.k_strides[0] + key_head * p.k_strides[1] + d]);
        qv = ToFloat(p.q[(t0 + i) * p.q_strides[0] + key_head * p.q_strides[1] + d]);
      }
      kq[d * kHeadRow + i] = kv;
      kq[d * kHeadRow + kChunk + i] = qv;
      kd[i * kKeyRow + d] = kv * matrices[kLastOffset + i];
    }
    for (int index = tid; index < kChunk * kChunk / 4; index += kThreads) {
      const int row = index / (kChunk / 4), quad = index % (kChunk / 4);
      Store4(mt + row * kChunkRow + 4 * quad, Load4(matrices + kMtOffset + row * kChunk + 4 * quad));
      Store4(pt + row * kChunkRow + 4 * quad, Load4(matrices + kPtOffset + row * kChunk + 4 * quad));
    }
    for (int index = tid; index < kChunk * kScanColumns; index += kThreads) {
      const int i = index / kScanColumns, c = index % kScanColumns;
      z[index] = i < n && c < columns
                     ? ToFloat(p.v[(t0 + i) * p.v_strides[0] + head * p.v_strides[1] + first_column + c])
                     : 0.0f;
    }
    __syncthreads();

    // [K; Q] S.
    float x[4][4] = {};
    for (int d = 0; d < key_dim; ++d) {
      OuterProduct4(x, Load4(kq + d * kHeadRow + 4 * tr), Load4(state + d * kScanColumns + 4 * tc));
    }
    const int row0 = owns_state ? 4 * tr : 4 * (tr - kThreads / 16);  // chunk row of x[0]
    if (owns_state) {
      // Z = beta ⊙ (V - e ⊙ (K S)), over V in place.
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = row0 + r;
        float* zi = z + i * kScanColumns + 4 * tc;
        const float4 vi = Load4(zi);
        const float ei = e[i], bi = beta[i];
        Store4(zi, make_float4(bi * (vi.x - ei * x[r][0]), bi * (vi.y - ei * x[r][1]), bi * (vi.z - ei * x[r][2]),
                               bi * (vi.w - ei * x[r][3])));
      }
    } else {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int c = 0; c < 4; ++c) x[r][c] *= e[row0 + r];  // e ⊙ (Q S)
      }
    }
    __syncthreads();

    // δ = M Z (M is unit lower triangular: row i sums j <= i): thread rows 2 tr, 2 tr + 1.
    {
      float acc[2][4] = {};
      const int i0 = 2 * tr;
      for (int j = 0; j <= i0 + 1 && j < n; ++j) {
        const float2 m = *reinterpret_cast<const float2*>(mt + j * kChunkRow + i0);
        const float4 zj = Load4(z + j * kScanColumns + 4 * tc);
        const float zv[4] = {zj.x, zj.y, zj.z, zj.w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[0][c] += m.x * zv[c];
          acc[1][c] += m.y * zv[c];
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) Store4(delta + (i0 + r) * kScanColumns + 4 * tc, make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    }
    __syncthreads();

    if (owns_state) {
      // S = e_{n-1} S + (Γ_{n-1,·} ⊙ K)^T δ.
      const float chunk_decay = e[n - 1];
#pragma unroll
      for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int c = 0; c < 4; ++c) s[r][c] *= chunk_decay;
      }
      for (int j = 0; j < n; ++j) {
        const float4 dj = Load4(delta + j * kScanColumns + 4 * tc);
        const float4 k0 = Load4(kd + j * kKeyRow + 8 * tr), k1 = Load4(kd + j * kKeyRow + 8 * tr + 4);
        const float kv[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
        const float dv[4] = {dj.x, dj.y, dj.z, dj.w};
#pragma unroll
        for (int r = 0; r < 8; ++r) {
#pragma unroll
          for (int c = 0; c < 4; ++c) s[r][c] += kv[r] * dv[c];
        }
      }
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        Store4(state + (8 * tr + r) * kScanColumns + 4 * tc, make_float4(s[r][0], s[r][1], s[r][2], s[r][3]));
      }
    } else {
      // O = e ⊙ (Q S) + P δ (P lower triangular with its diagonal: row i sums j <= i).
      for (int j = 0; j <= row0 + 3 && j < n; ++j) {
        OuterProduct4(x, Load4(pt + j * kChunkRow + row0), Load4(delta + j * kScanColumns + 4 * tc));
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = row0 + r;
        if (i >= n) continue;
        T* out_row = p.out + (t0 + i) * p.out_strides[0] + head * p.out_strides[1] + first_column;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          if (4 * tc + c < columns) out_row[4 * tc + c] = FromFloat<T>(x[r][c]);
        }
      }
    }
    __syncthreads();  // the state is written; the chunk's shared rows are no longer read
  }
  if (owns_state) {
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int d = 8 * tr + r;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (d < key_dim && 4 * tc + c < columns) global_state[d * p.value_dim + 4 * tc + c] = s[r][c];
      }
    }
  }
}

template <typename Kernel>
void AllowSharedBytes(Kernel kernel, size_t bytes) {
  CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes)),
           "raising the shared-memory limit of the chunked GDN kernels");
}

}  // namespace

bool ChunkedGdnFits(int64_t key_dim, int64_t value_dim, Device device) {
  return key_dim <= kMaxHeadDim && value_dim <= kMaxHeadDim &&
         MaxSharedBytesPerBlock(device) >= kScanSharedFloats * sizeof(float);
}

void LaunchChunkedGdn(const char* op, const GdnArgs& a, gpuStream_t stream) {
  const int64_t tokens = a.q.size(0), seqs = a.state_slot_ids.size(0), value_heads = a.v.size(1);
  // Chunks of the chunked sequences: sum ceil(len / 64) <= tokens / 64 + (their
  // count, at most tokens / kChunkedGdnMinTokens): the scratch is bounded by the
  // batch's tokens, never by its sequence count.
  const int64_t max_chunks =
      (tokens + kChunk - 1) / kChunk + std::min(seqs, tokens / kChunkedGdnMinTokens);
  if (tokens < kChunkedGdnMinTokens || seqs == 0) return;
  const Device device = a.q.device();
  const Tensor offsets = Tensor::Empty({seqs + 1}, DType::kI32, device);
  const Tensor matrices = Tensor::Empty({max_chunks * value_heads, kMatrixFloats}, DType::kF32, device);
  DispatchFloat(a.q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const ChunkParams<T> p{static_cast<const T*>(a.q.data()),
                           static_cast<const T*>(a.k.data()),
                           static_cast<const T*>(a.v.data()),
                           a.g.data_ptr<float>(),
                           a.beta.data_ptr<float>(),
                           a.states.data_ptr<float>(),
                           static_cast<const int32_t*>(a.query_start_loc.data()),
                           static_cast<const int32_t*>(a.state_slot_ids.data()),
                           static_cast<T*>(a.out.data()),
                           {a.q.stride(0), a.q.stride(1)},
                           {a.k.stride(0), a.k.stride(1)},
                           {a.v.stride(0), a.v.stride(1)},
                           {a.out.stride(0), a.out.stride(1)},
                           a.q.size(1),
                           value_heads,
                           a.q.size(2),
                           a.v.size(2),
                           seqs,
                           a.states.size(0),
                           a.tiled_value_heads,
                           offsets.data_ptr<int32_t>(),
                           matrices.data_ptr<float>()};
    LaunchKernel(GdnChunkOffsets<T>, 1, kOffsetThreads, 0, stream, p);
    const size_t matrices_bytes = kMatricesSharedFloats * sizeof(float);
    AllowSharedBytes(GdnChunkMatrices<T>, matrices_bytes);
    LaunchKernel(GdnChunkMatrices<T>, dim3(static_cast<unsigned>(max_chunks), static_cast<unsigned>(value_heads)),
                 kThreads, matrices_bytes, stream, p);
    const size_t scan_bytes = kScanSharedFloats * sizeof(float);
    AllowSharedBytes(GdnChunkScan<T>, scan_bytes);
    LaunchKernel(GdnChunkScan<T>,
                 dim3(GridFor(seqs, 1, op), static_cast<unsigned>(value_heads),
                      GridFor(a.v.size(2), kScanColumns, op)),
                 kThreads, scan_bytes, stream, p);
  });
  CheckLaunch(op);
}

}  // namespace vt::gpu
