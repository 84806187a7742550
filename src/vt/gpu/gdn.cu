// GPU kernels of the Gated DeltaNet ops: CausalConv1d, CausalConv1dUpdate,
// GdnGates, GdnChunkedPrefill, GdnRecurrent.
//
// Shapes (op_args.h): x [T, C] (strided rows), weight [C, K], conv_states
// [slots, C, K-1] f32; q, k [T, Hk, Dk], v, out [T, Hv, Dv]; g, beta [T, Hv] f32;
// states [slots, Hv, Dk, Dv] f32; query_start_loc [B + 1], state_slot_ids [B].
// A sequence whose slot id is outside [0, slots) is skipped (no output, no state).
//
// Conv: one thread per (sequence, channel) walks the sequence's tokens in order;
// inputs before the sequence start come from the conv state, which is rewritten at
// the end with the last K-1 inputs (older state shifted in for short sequences).
// Threads of a warp take neighbouring channels, so every x/out access is coalesced.
// A prompt (CausalConv1d, K <= kConvChunkMaxTaps) instead takes two launches:
// CausalConvChunks, one thread per (channel, kConvChunk consecutive tokens of the
// batch), its taps and a sliding window of the last K-1 inputs in registers (a
// 2048-token 9B prefill spent 1.45 ms per layer walking each channel's tokens in
// one thread), reading the old states; then CausalConvStates rewrites the states.
// (out never overlaps x or the states in CausalConv1d, so the order is free.)
//
// Delta rule (both GDN ops, see GdnTokenRecurrence): one block of 64 threads per
// (sequence, value head, 64 value columns). Thread j owns column j of the head's
// [Dk, Dv] state and applies, token by token,
//   S = e^g S;  u = S^T k;  S += k (beta (v - u))^T;  o = S^T q
// to it, which needs no communication between threads: each column's update
// reads only that column and the shared q_t, k_t. The state tile stays in shared
// memory for the whole sequence (Dk x 64 f32 = 32 KB at Dk = 128, inside the 64 KB
// LDS of gfx90a) and is read and written to global memory once; for Dk > 160 it
// stays in global memory (read-modify-write per token, cached in L1/L2).
// GdnChunkedPrefill runs the same token recurrence (mathematically identical to
// the chunked form, docs/qwen35.md §3.3): exact, but it does not use the chunked
// matrix form's parallelism over a chunk's tokens.
//
// A decode step (GdnRecurrent) at Dk <= 128 takes GdnStateInRegisters ("state_in_registers"):
// blocks of 4 x 64 threads per (sequence, value head, 64 value columns); thread
// (group, j) keeps rows [group R, group R + R) of column j in registers (R =
// ceil(Dk / 4) <= 32). At decode (one token per sequence, 64 blocks at batch 1)
// GdnTokenRecurrence is latency-bound on each thread's Dk dependent state loads
// (16 us per 9B layer on the H200); here each thread issues R independent loads,
// four times the threads share the work, and the two dot products over Dk are four
// partial sums combined through shared memory (0.36 ms less per 9B decode step,
// bench/gpu_notes.md). Over a prompt the state stays in registers from the first
// token to the last, and the next token's q, k, v, g, beta are loaded while the
// current one is computed (a 2048-token 9B prefill spent 12.4 ms per layer in the
// token recurrence, each token waiting for its loads behind four barriers; 4.1 ms
// in this kernel). A prompt (GdnChunkedPrefill) at Dk <= 128 takes GdnWarpColumns
// ("warp_columns"): one warp per 4 value columns, no barrier (see the kernel).
// A prompt whose head sizes fit (Dk, Dv <= 128, Hopper's shared memory) instead takes
// the chunked form (gdn_chunked.cu, "chunks") for its sequences of 32 tokens or more,
// and GdnWarpColumns for the shorter ones in the same call.
// vt::tuning family "gpu.gdn_recurrent" forces any of the four for both ops:
// "token_recurrence", "state_in_registers", "warp_columns" or "chunks"
// (tests/vt/gpu/gdn_variants_test.cpp).
#include <limits>
#include <string>

#include "gdn_chunked.h"
#include "gpu_common.cuh"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {
namespace {

// ---- causal depthwise conv ------------------------------------------------------

template <typename T>
struct ConvParams {
  const T* x;
  T* out;
  const void* weight;
  DType weight_dtype;
  float* states;
  const int32_t* query_start_loc;  // null for the one-token update
  const int32_t* slot_ids;
  int64_t x_row_stride, out_row_stride;
  int64_t num_seqs, channels, kernel, num_slots;
  bool apply_silu;
};

// One (sequence, channel) of a launch over num_seqs x channels: its state row and
// its tokens [start, start + length).
struct ConvRow {
  int64_t channel, start, length, width;
  float* state;
};

// Thread `index`'s row; false past the end or for a sequence whose slot is outside
// the state pool (skipped).
template <typename T>
__device__ inline bool ConvRowOfThread(const ConvParams<T>& p, ConvRow& r) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= p.num_seqs * p.channels) return false;
  const int64_t seq = index / p.channels;
  const int64_t slot = p.slot_ids[seq];
  if (slot < 0 || slot >= p.num_slots) return false;
  r.channel = index % p.channels;
  r.width = p.kernel - 1;
  r.state = p.states + (slot * p.channels + r.channel) * r.width;
  r.start = p.query_start_loc != nullptr ? p.query_start_loc[seq] : seq;
  r.length = p.query_start_loc != nullptr ? p.query_start_loc[seq + 1] - r.start : 1;
  return true;
}

// Input at sequence position `pos` (negative: from the state, oldest first).
template <typename T>
__device__ inline float ConvInput(const ConvParams<T>& p, const ConvRow& r, int64_t pos) {
  return pos >= 0 ? ToFloat(p.x[(r.start + pos) * p.x_row_stride + r.channel]) : r.state[r.width + pos];
}

// New state: inputs at positions length - width .. length - 1. Ascending order is
// safe in place: entry i reads old entry length + i >= i, not yet overwritten.
template <typename T>
__device__ inline void UpdateConvState(const ConvParams<T>& p, const ConvRow& r) {
  for (int64_t i = 0; i < r.width; ++i) r.state[i] = ConvInput(p, r, r.length - r.width + i);
}

template <typename T>
__global__ void CausalConvSequences(ConvParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  ConvRow r;
  if (!ConvRowOfThread(p, r)) return;
  // The last output is written after the state update, which still reads the last
  // input: CausalConv1dUpdate allows out to be the same view as x.
  float last = 0.0f;
  for (int64_t t = 0; t < r.length; ++t) {
    float sum = 0.0f;
    for (int64_t j = 0; j < p.kernel; ++j) {
      sum += LoadAsFloat(p.weight, p.weight_dtype, r.channel * p.kernel + j) * ConvInput(p, r, t - r.width + j);
    }
    last = p.apply_silu ? Silu(sum) : sum;
    if (t + 1 < r.length) p.out[(r.start + t) * p.out_row_stride + r.channel] = FromFloat<T>(last);
  }
  UpdateConvState(p, r);
  if (r.length > 0) p.out[(r.start + r.length - 1) * p.out_row_stride + r.channel] = FromFloat<T>(last);
}

constexpr int kConvChunk = 16;          // tokens per thread of CausalConvChunks
constexpr int kConvChunkMaxTaps = 8;    // K of the chunked kernel's registers

// Thread (channel c, chunk): tokens [chunk * 16, +16) of the flat batch, crossing
// into later sequences as query_start_loc says.
template <typename T>
__global__ void CausalConvChunks(ConvParams<T> p, int64_t num_tokens) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= p.channels) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kConvChunk;
  const int64_t last = first + kConvChunk < num_tokens ? first + kConvChunk : num_tokens;
  const int width = static_cast<int>(p.kernel) - 1;
  // w[j] multiplies window[j] (input t - width + j); w_current the token itself.
  float w[kConvChunkMaxTaps - 1];
#pragma unroll
  for (int j = 0; j < kConvChunkMaxTaps - 1; ++j) {
    w[j] = j < width ? LoadAsFloat(p.weight, p.weight_dtype, c * p.kernel + j) : 0.0f;
  }
  const float w_current = LoadAsFloat(p.weight, p.weight_dtype, c * p.kernel + width);
  // The sequence holding `first`: the last whose start is <= first.
  int64_t seq = 0, lo = 0, hi = p.num_seqs - 1;
  while (lo <= hi) {
    const int64_t mid = (lo + hi) / 2;
    if (p.query_start_loc[mid] <= first) seq = mid, lo = mid + 1; else hi = mid - 1;
  }
  float window[kConvChunkMaxTaps - 1];  // window[width - 1] is the newest earlier input
  int64_t seq_end = -1, slot = -1;
  for (int64_t t = first; t < last; ++t) {
    while (t >= seq_end) {  // entering the sequence holding t (empty ones are passed over)
      if (seq_end >= 0) ++seq;
      if (seq >= p.num_seqs) return;  // rows past the last sequence belong to none
      const int64_t seq_start = p.query_start_loc[seq];
      seq_end = p.query_start_loc[seq + 1];
      if (t >= seq_end) continue;
      slot = p.slot_ids[seq];
      const bool valid = slot >= 0 && slot < p.num_slots;
      const float* state = valid ? p.states + (slot * p.channels + c) * width : nullptr;
#pragma unroll
      for (int j = 0; j < kConvChunkMaxTaps - 1; ++j) {
        if (j >= width || !valid) continue;
        const int64_t pos = t - width + j;  // window slot j holds input t - width + j
        window[j] = pos >= seq_start ? ToFloat(p.x[pos * p.x_row_stride + c]) : state[width + (pos - seq_start)];
      }
    }
    const float current = ToFloat(p.x[t * p.x_row_stride + c]);
    if (slot < 0 || slot >= p.num_slots) continue;
    float sum = w_current * current;
#pragma unroll
    for (int j = 0; j < kConvChunkMaxTaps - 1; ++j) {
      if (j < width) sum += w[j] * window[j];
    }
#pragma unroll
    for (int j = 0; j < kConvChunkMaxTaps - 1; ++j) {  // shift left, the token enters last
      if (j + 1 < width) {
        window[j] = window[j + 1];
      } else if (j + 1 == width) {
        window[j] = current;
      }
    }
    p.out[t * p.out_row_stride + c] = FromFloat<T>(p.apply_silu ? Silu(sum) : sum);
  }
}

// After CausalConvChunks: each (sequence, channel) state becomes its last K-1 inputs
// (older state shifted in for sequences shorter than that).
template <typename T>
__global__ void CausalConvStates(ConvParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  ConvRow r;
  if (ConvRowOfThread(p, r)) UpdateConvState(p, r);
}

template <typename T>
ConvParams<T> MakeConvParams(const Tensor& x, const Tensor& out, const Tensor& weight, const Tensor& states,
                             const Tensor& slot_ids, bool apply_silu) {
  return ConvParams<T>{static_cast<const T*>(x.data()), static_cast<T*>(out.data()), weight.data(), weight.dtype(),
                       states.data_ptr<float>(), nullptr, static_cast<const int32_t*>(slot_ids.data()),
                       x.stride(0), out.stride(0), slot_ids.size(0), x.size(1), weight.size(1), states.size(0),
                       apply_silu};
}

void LaunchConv(const char* op, const Tensor& x, const Tensor& out, const Tensor& weight, const Tensor& states,
                const Tensor* query_start_loc, const Tensor& slot_ids, bool apply_silu) {
  gpuStream_t stream = PrepareDevice(x.device());
  DispatchFloat(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    ConvParams<T> p = MakeConvParams<T>(x, out, weight, states, slot_ids, apply_silu);
    if (query_start_loc != nullptr) p.query_start_loc = static_cast<const int32_t*>(query_start_loc->data());
    const unsigned grid = GridFor(p.num_seqs * p.channels, kElementwiseThreads, op);
    LaunchKernel(CausalConvSequences<T>, grid, kElementwiseThreads, 0, stream, p);
  });
  CheckLaunch(op);
}

void CausalConv1dGpu(const CausalConv1dArgs& a) {
  // The chunk index is the grid's y (at most 65535 chunks: a million tokens).
  if (a.weight.size(1) > kConvChunkMaxTaps || a.x.size(0) > int64_t{65535} * kConvChunk) {
    LaunchConv("CausalConv1d", a.x, a.out, a.weight, a.conv_states, &a.query_start_loc, a.state_slot_ids,
               a.apply_silu);
    return;
  }
  gpuStream_t stream = PrepareDevice(a.x.device());
  DispatchFloat(a.x.dtype(), "CausalConv1d", [&](auto tag) {
    using T = decltype(tag);
    ConvParams<T> p = MakeConvParams<T>(a.x, a.out, a.weight, a.conv_states, a.state_slot_ids, a.apply_silu);
    p.query_start_loc = static_cast<const int32_t*>(a.query_start_loc.data());
    const int64_t tokens = a.x.size(0);
    if (tokens > 0) {
      const dim3 grid(GridFor(p.channels, kElementwiseThreads, "CausalConv1d"),
                      GridFor(tokens, kConvChunk, "CausalConv1d"));
      LaunchKernel(CausalConvChunks<T>, grid, kElementwiseThreads, 0, stream, p, tokens);
    }
    LaunchKernel(CausalConvStates<T>, GridFor(p.num_seqs * p.channels, kElementwiseThreads, "CausalConv1d"),
                 kElementwiseThreads, 0, stream, p);
  });
  CheckLaunch("CausalConv1d");
}

// One token per sequence: row b of x is sequence b (query_start_loc = 0, 1, ..., B).
void CausalConv1dUpdateGpu(const CausalConv1dUpdateArgs& a) {
  LaunchConv("CausalConv1dUpdate", a.x, a.out, a.weight, a.conv_states, nullptr, a.state_slot_ids, a.apply_silu);
}

// ---- gates ---------------------------------------------------------------------

template <typename T>
struct GateParams {
  const T* a;
  const T* b;
  const void* A;
  const void* dt_bias;
  DType A_dtype, dt_bias_dtype;
  int64_t A_stride, dt_bias_stride;  // [Hv] vectors may be strided views
  float* g;
  float* beta;
  int64_t a_row_stride, b_row_stride, heads, count;
};

template <typename T>
__global__ void GdnGateElements(GateParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / p.heads, h = i % p.heads;
    const float dt_bias = LoadAsFloat(p.dt_bias, p.dt_bias_dtype, h * p.dt_bias_stride);
    const float x = ToFloat(p.a[t * p.a_row_stride + h]) + dt_bias;
    const float softplus = x > 20.0f ? x : log1pf(expf(x));
    p.g[i] = LoadAsFloat(p.A, p.A_dtype, h * p.A_stride) * softplus;
    p.beta[i] = Sigmoid(ToFloat(p.b[t * p.b_row_stride + h]));
  }
}

void GdnGatesGpu(const GdnGatesArgs& a) {
  gpuStream_t stream = PrepareDevice(a.a.device());
  DispatchFloat(a.a.dtype(), "GdnGates", [&](auto tag) {
    using T = decltype(tag);
    GateParams<T> p{static_cast<const T*>(a.a.data()), static_cast<const T*>(a.b.data()), a.A.data(),
                    a.dt_bias.data(), a.A.dtype(), a.dt_bias.dtype(), a.A.stride(0), a.dt_bias.stride(0),
                    a.g.data_ptr<float>(),
                    a.beta.data_ptr<float>(), a.a.stride(0), a.b.stride(0), a.a.size(1), a.a.numel()};
    LaunchKernel(GdnGateElements<T>, GridStrideBlocks(p.count, a.a.device(), "GdnGates"), kElementwiseThreads, 0,
                 stream, p);
  });
  CheckLaunch("GdnGates");
}

// ---- gated delta rule -------------------------------------------------------------

constexpr int kStateColumns = 64;                   // value columns (threads) per block
constexpr int64_t kSharedStateMaxKeyDim = 160;      // Dk x 64 x 4 B <= 40 KB of shared memory

template <typename T>
struct DeltaParams {
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
  int64_t key_heads, value_heads, key_dim, value_dim, num_slots;
  bool tiled_value_heads;
  // Sequences of more tokens are skipped (GdnWarpColumns: those the chunked kernels take).
  int64_t max_sequence_tokens;
};

// Dynamic shared memory: q_t [Dk], k_t [Dk], then (kSharedState) the state tile [Dk][64].
template <typename T, bool kSharedState>
__global__ void __launch_bounds__(kStateColumns) GdnTokenRecurrence(DeltaParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  extern __shared__ float shared[];
  float* q = shared;
  float* k = shared + p.key_dim;
  const int64_t seq = blockIdx.x, head = blockIdx.y;
  const int64_t slot = p.slot_ids[seq];
  if (slot < 0 || slot >= p.num_slots) return;  // uniform across the block
  const int64_t column = static_cast<int64_t>(blockIdx.z) * kStateColumns + threadIdx.x;
  const bool active = column < p.value_dim;
  const int64_t group = p.value_heads / p.key_heads;
  const int64_t key_head = p.tiled_value_heads ? head % p.key_heads : head / group;
  float* global_state = p.states + (slot * p.value_heads + head) * p.key_dim * p.value_dim;
  // Element (i, column) of the state: in the shared tile, or in global memory.
  float* state = kSharedState ? shared + 2 * p.key_dim : global_state;
  const int64_t state_stride = kSharedState ? kStateColumns : p.value_dim;
  const int64_t state_column = kSharedState ? threadIdx.x : column;
  if (kSharedState && active) {
    for (int64_t i = 0; i < p.key_dim; ++i) {
      state[i * state_stride + state_column] = global_state[i * p.value_dim + column];
    }
  }
  const int64_t begin = p.query_start_loc[seq], end = p.query_start_loc[seq + 1];
  for (int64_t t = begin; t < end; ++t) {
    __syncthreads();  // the previous token's q, k are no longer read
    for (int64_t i = threadIdx.x; i < p.key_dim; i += blockDim.x) {
      q[i] = ToFloat(p.q[t * p.q_strides[0] + key_head * p.q_strides[1] + i]);
      k[i] = ToFloat(p.k[t * p.k_strides[0] + key_head * p.k_strides[1] + i]);
    }
    __syncthreads();
    if (!active) continue;
    const float decay = expf(p.g[t * p.value_heads + head]);
    const float beta = p.beta[t * p.value_heads + head];
    float read = 0.0f;
    for (int64_t i = 0; i < p.key_dim; ++i) read += state[i * state_stride + state_column] * k[i];
    const float v = ToFloat(p.v[t * p.v_strides[0] + head * p.v_strides[1] + column]);
    const float delta = beta * (v - decay * read);
    float o = 0.0f;
    for (int64_t i = 0; i < p.key_dim; ++i) {
      const float s = decay * state[i * state_stride + state_column] + k[i] * delta;
      state[i * state_stride + state_column] = s;
      o += s * q[i];
    }
    p.out[t * p.out_strides[0] + head * p.out_strides[1] + column] = FromFloat<T>(o);
  }
  if (kSharedState && active) {
    for (int64_t i = 0; i < p.key_dim; ++i) {
      global_state[i * p.value_dim + column] = state[i * state_stride + state_column];
    }
  }
}

constexpr int kRegisterGroups = 4;   // thread groups splitting the Dk rows of a column
constexpr int kRegisterRows = 32;    // state rows per thread: Dk <= 128
constexpr int64_t kRegisterStateMaxKeyDim = kRegisterGroups * kRegisterRows;

template <typename T>
__global__ void __launch_bounds__(kStateColumns * kRegisterGroups) GdnStateInRegisters(DeltaParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float q[kRegisterStateMaxKeyDim];
  __shared__ float k[kRegisterStateMaxKeyDim];
  __shared__ float partial[kRegisterGroups][kStateColumns];
  const int64_t seq = blockIdx.x, head = blockIdx.y;
  const int64_t slot = p.slot_ids[seq];
  if (slot < 0 || slot >= p.num_slots) return;  // uniform across the block
  const int local = threadIdx.x % kStateColumns, group = threadIdx.x / kStateColumns;
  const int64_t column = static_cast<int64_t>(blockIdx.z) * kStateColumns + local;
  const bool active = column < p.value_dim;
  const int64_t rows = (p.key_dim + kRegisterGroups - 1) / kRegisterGroups;
  const int64_t first_row = group * rows;
  const int64_t group_size = p.value_heads / p.key_heads;
  const int64_t key_head = p.tiled_value_heads ? head % p.key_heads : head / group_size;
  float* global_state = p.states + (slot * p.value_heads + head) * p.key_dim * p.value_dim;
  // Row first_row + r of this thread's column, for r < rows and rows inside Dk.
  auto owns = [&](int r) { return active && r < rows && first_row + r < p.key_dim; };
  float s[kRegisterRows];
#pragma unroll
  for (int r = 0; r < kRegisterRows; ++r) s[r] = owns(r) ? global_state[(first_row + r) * p.value_dim + column] : 0.0f;
  const int64_t begin = p.query_start_loc[seq], end = p.query_start_loc[seq + 1];
  // The inputs of token t, loaded one token ahead (Dk <= blockDim.x: one q and one
  // k value per thread).
  float q_next = 0.0f, k_next = 0.0f, v_next = 0.0f, g_next = 0.0f, beta_next = 0.0f;
  const auto fetch = [&](int64_t t) {
    if (threadIdx.x < p.key_dim) {
      q_next = ToFloat(p.q[t * p.q_strides[0] + key_head * p.q_strides[1] + threadIdx.x]);
      k_next = ToFloat(p.k[t * p.k_strides[0] + key_head * p.k_strides[1] + threadIdx.x]);
    }
    if (active) v_next = ToFloat(p.v[t * p.v_strides[0] + head * p.v_strides[1] + column]);
    g_next = p.g[t * p.value_heads + head];
    beta_next = p.beta[t * p.value_heads + head];
  };
  if (begin < end) fetch(begin);
  for (int64_t t = begin; t < end; ++t) {
    __syncthreads();  // the previous token's q, k and partial sums are no longer read
    if (threadIdx.x < p.key_dim) {
      q[threadIdx.x] = q_next;
      k[threadIdx.x] = k_next;
    }
    const float decay = expf(g_next), beta = beta_next, v = v_next;
    __syncthreads();
    if (t + 1 < end) fetch(t + 1);  // in flight while this token is computed
    float read = 0.0f;
#pragma unroll
    for (int r = 0; r < kRegisterRows; ++r) {
      if (owns(r)) read += s[r] * k[first_row + r];
    }
    partial[group][local] = read;
    __syncthreads();
    read = 0.0f;
#pragma unroll
    for (int g = 0; g < kRegisterGroups; ++g) read += partial[g][local];
    const float delta = beta * (v - decay * read);
    float o = 0.0f;
#pragma unroll
    for (int r = 0; r < kRegisterRows; ++r) {
      if (owns(r)) {
        s[r] = decay * s[r] + k[first_row + r] * delta;
        o += s[r] * q[first_row + r];
      }
    }
    __syncthreads();  // every thread has read the partial reads
    partial[group][local] = o;
    __syncthreads();
    if (group == 0 && active) {
      float total = 0.0f;
#pragma unroll
      for (int g = 0; g < kRegisterGroups; ++g) total += partial[g][local];
      p.out[t * p.out_strides[0] + head * p.out_strides[1] + column] = FromFloat<T>(total);
    }
  }
#pragma unroll
  for (int r = 0; r < kRegisterRows; ++r) {
    if (owns(r)) global_state[(first_row + r) * p.value_dim + column] = s[r];
  }
}

// ---- warp columns: the prompt's token recurrence without barriers ----------------

constexpr int kWarpColumnsThreads = 128;  // a block: 16 value columns of one head
constexpr int kWarpColumnsPerBlock = 16;
constexpr int64_t kWarpColumnsMaxKeyDim = 128;

// x[c] summed over the warp for the kCols columns at once, and scattered: lane l
// returns the total of column l / (kWarpSize / kCols). Each halving step trades
// half the columns with the lane kWarpSize / 2, / 4, ... away (one shuffle per
// column kept), then the last column is summed over the remaining lanes:
// log2(kWarpSize) + kCols - 1 shuffles instead of kCols log2(kWarpSize).
template <int kCols>
__device__ inline float ReduceScatterColumns(float (&x)[kCols]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  int offset = kWarpSize / 2;
#pragma unroll
  for (int width = kCols; width > 1; width /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < width / 2; ++i) {
      const float keep = upper ? x[i + width / 2] : x[i];
      const float send = upper ? x[i] : x[i + width / 2];
      x[i] = keep + ShuffleXor(send, offset);
    }
  }
  float total = x[0];
  for (; offset > 0; offset /= 2) total += ShuffleXor(total, offset);
  return total;
}

// GdnChunkedPrefill's default at Dk <= 128: each warp owns kCols value columns of
// one head's state and walks the sequence alone. Lane l keeps rows l, l + W, ...
// (kRows = 128 / W of them) of its kCols columns in registers (16 floats); the two
// dot products over Dk are warp reductions (ReduceScatterColumns, the read then
// gathered back with kCols ShuffleFrom), so a token costs no barrier and no shared
// memory: GdnStateInRegisters' four barriers per token held a 2048-token 9B
// prefill at 4.1 ms per layer (~2 us a token) on 64 blocks. q, k of a lane's rows,
// the kCols values of v, g and beta of the next token are loaded while the current
// one is computed. Grid: (sequence, value head, Dv / 16); 128 threads = 4 warps of
// 4 columns on NVIDIA, 2 wavefronts of 8 on CDNA.
template <typename T>
__global__ void __launch_bounds__(kWarpColumnsThreads) GdnWarpColumns(DeltaParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  constexpr int kWarps = kWarpColumnsThreads / kWarpSize;
  constexpr int kCols = kWarpColumnsPerBlock / kWarps;
  constexpr int kRows = static_cast<int>(kWarpColumnsMaxKeyDim) / kWarpSize;
  const int64_t seq = blockIdx.x, head = blockIdx.y;
  const int64_t slot = p.slot_ids[seq];
  if (slot < 0 || slot >= p.num_slots) return;
  const int64_t begin = p.query_start_loc[seq], end = p.query_start_loc[seq + 1];
  if (end - begin > p.max_sequence_tokens) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int64_t first_column = static_cast<int64_t>(blockIdx.z) * kWarpColumnsPerBlock + warp * kCols;
  const int64_t group_size = p.value_heads / p.key_heads;
  const int64_t key_head = p.tiled_value_heads ? head % p.key_heads : head / group_size;
  float* global_state = p.states + (slot * p.value_heads + head) * p.key_dim * p.value_dim;
  auto row_of = [&](int r) { return static_cast<int64_t>(lane) + static_cast<int64_t>(r) * kWarpSize; };
  auto owns = [&](int r, int c) { return row_of(r) < p.key_dim && first_column + c < p.value_dim; };
  float s[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) s[r][c] = owns(r, c) ? global_state[row_of(r) * p.value_dim + first_column + c] : 0.0f;
  }
  float q_next[kRows] = {}, k_next[kRows] = {}, v_next[kCols] = {}, g_next = 0.0f, beta_next = 0.0f;
  const auto fetch = [&](int64_t t) {
    const T* q_row = p.q + t * p.q_strides[0] + key_head * p.q_strides[1];
    const T* k_row = p.k + t * p.k_strides[0] + key_head * p.k_strides[1];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const bool inside = row_of(r) < p.key_dim;
      q_next[r] = inside ? ToFloat(q_row[row_of(r)]) : 0.0f;
      k_next[r] = inside ? ToFloat(k_row[row_of(r)]) : 0.0f;
    }
    const T* v_row = p.v + t * p.v_strides[0] + head * p.v_strides[1];
#pragma unroll
    for (int c = 0; c < kCols; ++c) v_next[c] = first_column + c < p.value_dim ? ToFloat(v_row[first_column + c]) : 0.0f;
    g_next = p.g[t * p.value_heads + head];
    beta_next = p.beta[t * p.value_heads + head];
  };
  if (begin < end) fetch(begin);
  constexpr int kLanesPerColumn = kWarpSize / kCols;
  for (int64_t t = begin; t < end; ++t) {
    float q[kRows], k[kRows], v[kCols];
#pragma unroll
    for (int r = 0; r < kRows; ++r) q[r] = q_next[r], k[r] = k_next[r];
#pragma unroll
    for (int c = 0; c < kCols; ++c) v[c] = v_next[c];
    const float decay = expf(g_next), beta = beta_next;
    if (t + 1 < end) fetch(t + 1);
    float partial[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      partial[c] = 0.0f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) partial[c] += s[r][c] * k[r];
    }
    const float my_read = ReduceScatterColumns(partial);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const float read = ShuffleFrom(my_read, c * kLanesPerColumn);
      const float delta = beta * (v[c] - decay * read);
      partial[c] = 0.0f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        s[r][c] = decay * s[r][c] + k[r] * delta;
        partial[c] += s[r][c] * q[r];
      }
    }
    const float o = ReduceScatterColumns(partial);
    const int64_t column = first_column + lane / kLanesPerColumn;
    if (lane % kLanesPerColumn == 0 && column < p.value_dim) {
      p.out[t * p.out_strides[0] + head * p.out_strides[1] + column] = FromFloat<T>(o);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (owns(r, c)) global_state[row_of(r) * p.value_dim + first_column + c] = s[r][c];
    }
  }
}

enum class GdnKernel { kTokenRecurrence, kStateInRegisters, kWarpColumns, kChunks };

// The kernel of `op` (see the top comment): a prompt (GdnChunkedPrefill) takes the
// chunked form where its head sizes and the device allow it (GdnWarpColumns for its
// sequences under 32 tokens), else GdnWarpColumns; a decode step GdnStateInRegisters
// (one token: its 64 blocks of 4 groups read the state coalesced, where a warp's
// lanes would read 32 rows), both at Dk <= 128; the token recurrence otherwise.
// vt::tuning's gpu.gdn_recurrent forces one for both ops where the sizes allow it.
GdnKernel ChooseGdnKernel(const char* op, bool prompt, int64_t key_dim, int64_t value_dim, Device device) {
  const std::string variant = tuning::Variant("gpu.gdn_recurrent");
  const bool registers_fit = key_dim <= kRegisterStateMaxKeyDim, warp_fits = key_dim <= kWarpColumnsMaxKeyDim;
  // The chunked kernels hand their short sequences to GdnWarpColumns.
  const bool chunks_fit = warp_fits && ChunkedGdnFits(key_dim, value_dim, device);
  if (variant.empty()) {
    if (prompt && chunks_fit) return GdnKernel::kChunks;
    if (prompt && warp_fits) return GdnKernel::kWarpColumns;
    return registers_fit ? GdnKernel::kStateInRegisters : GdnKernel::kTokenRecurrence;
  }
  if (variant == "token_recurrence") return GdnKernel::kTokenRecurrence;
  if (variant == "state_in_registers") return registers_fit ? GdnKernel::kStateInRegisters : GdnKernel::kTokenRecurrence;
  if (variant == "warp_columns") return warp_fits ? GdnKernel::kWarpColumns : GdnKernel::kTokenRecurrence;
  if (variant == "chunks") return chunks_fit ? GdnKernel::kChunks : GdnKernel::kTokenRecurrence;
  throw Error(std::string("vt::") + op + ": unknown variant '" + variant +
              "' forced for gpu.gdn_recurrent (known: token_recurrence, state_in_registers, warp_columns, chunks)");
}

void GdnGpu(const char* op, bool prompt, const GdnArgs& a) {
  gpuStream_t stream = PrepareDevice(a.q.device());
  const int64_t key_dim = a.q.size(2), value_dim = a.v.size(2);
  const bool shared_state = key_dim <= kSharedStateMaxKeyDim;
  const size_t shared_bytes = sizeof(float) * (2 * key_dim + (shared_state ? key_dim * kStateColumns : 0));
  const dim3 grid(GridFor(a.state_slot_ids.size(0), 1, op), static_cast<unsigned>(a.v.size(1)),
                  GridFor(value_dim, kStateColumns, op));
  DispatchFloat(a.q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    DeltaParams<T> p{static_cast<const T*>(a.q.data()),
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
                     a.v.size(1),
                     key_dim,
                     value_dim,
                     a.states.size(0),
                     a.tiled_value_heads,
                     std::numeric_limits<int64_t>::max()};
    const GdnKernel kernel = ChooseGdnKernel(op, prompt, key_dim, value_dim, a.q.device());
    const dim3 columns_grid(grid.x, grid.y, GridFor(value_dim, kWarpColumnsPerBlock, op));
    if (kernel == GdnKernel::kChunks) {
      reach::Hit("GdnGpu.chunks");
      LaunchChunkedGdn(op, a, stream);
      p.max_sequence_tokens = kChunkedGdnMinTokens - 1;  // the rest: the token recurrence
      LaunchKernel(GdnWarpColumns<T>, columns_grid, kWarpColumnsThreads, 0, stream, p);
    } else if (kernel == GdnKernel::kWarpColumns) {
      reach::Hit("GdnGpu.warp_columns");
      LaunchKernel(GdnWarpColumns<T>, columns_grid, kWarpColumnsThreads, 0, stream, p);
    } else if (kernel == GdnKernel::kStateInRegisters) {
      reach::Hit("GdnGpu.state_in_registers");
      LaunchKernel(GdnStateInRegisters<T>, grid, kStateColumns * kRegisterGroups, 0, stream, p);
    } else if (shared_state) {
      reach::Hit("GdnGpu.token_recurrence");
      LaunchKernel(GdnTokenRecurrence<T, true>, grid, kStateColumns, shared_bytes, stream, p);
    } else {
      reach::Hit("GdnGpu.token_recurrence");
      // q_t and k_t alone may pass the 48 KB default for a very large Dk.
      CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(&GdnTokenRecurrence<T, false>),
                                   gpuFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
               "raising the shared-memory limit of the GDN kernel");
      LaunchKernel(GdnTokenRecurrence<T, false>, grid, kStateColumns, shared_bytes, stream, p);
    }
  });
  CheckLaunch(op);
}

void GdnChunkedPrefillGpu(const GdnChunkedPrefillArgs& a) { GdnGpu("GdnChunkedPrefill", true, a); }
void GdnRecurrentGpu(const GdnRecurrentArgs& a) { GdnGpu("GdnRecurrent", false, a); }

}  // namespace

VT_REGISTER_KERNEL(CausalConv1d, VT_GPU_DEVICE, CausalConv1dGpu);
VT_REGISTER_KERNEL(CausalConv1dUpdate, VT_GPU_DEVICE, CausalConv1dUpdateGpu);
VT_REGISTER_KERNEL(GdnGates, VT_GPU_DEVICE, GdnGatesGpu);
VT_REGISTER_KERNEL(GdnChunkedPrefill, VT_GPU_DEVICE, GdnChunkedPrefillGpu);
VT_REGISTER_KERNEL(GdnRecurrent, VT_GPU_DEVICE, GdnRecurrentGpu);

}  // namespace vt::gpu
