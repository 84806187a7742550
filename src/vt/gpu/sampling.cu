// GPU kernels of the sampling helpers: LogSoftmax, Argmax, Sample, Penalties, TopLogprobs.
//
// Shapes (op_args.h): LogSoftmax x [rows..., V] float (strided rows) -> out f32 of
// the same shape (out may be x itself when x is f32). Argmax x [R, V] float ->
// out [R] i32, the first index of the largest value.
//
// One block per row: the row max and the sum of exponentials are block reductions
// in f32, then each thread writes x - max - log(sum) for the same columns it read
// (so an in-place out needs no barrier). Argmax reduces (value, index) pairs with
// ties going to the lower index, over chunks of a row in parallel (see ArgmaxGpu).
// Sample (see SampleGpu): a block per row finds the row's keep threshold by radix
// selection, then the chunks of the row race with their Gumbel noise as Argmax's do.
// Penalties: a block per row over its token list only (never the vocabulary), with
// a zeroed count per (row, vocabulary entry) in device memory: atomics count the
// outputs and mark what was seen, then the first thread to take a token's count
// (atomicExch to 0) adjusts that token, once.
// TopLogprobs: a block per row reads the row once. Each thread keeps an online
// (max, sum of exponentials) and its own k best (value, index) pairs, sorted, in
// shared memory; its indices come in increasing order, so a later equal value never
// displaces an earlier one. The block then merges the threads' lists in k rounds of
// BlockBest over their heads (largest value, then lower index: the host's order).
#include "gpu_common.cuh"
#include "vt/ops.h"
#include "vt/sample_noise.h"

namespace vt::gpu {
namespace {

constexpr int kRowThreads = 256;

template <typename T>
struct SoftmaxParams {
  const T* x;
  float* out;
  Layout x_rows, out_rows;
  int64_t width;
};

template <typename T>
__global__ void __launch_bounds__(kRowThreads) LogSoftmaxRows(SoftmaxParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float scratch[kMaxWarpsPerBlock];
  const T* x = p.x + p.x_rows.Offset(blockIdx.x);
  float* out = p.out + p.out_rows.Offset(blockIdx.x);
  float local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) local_max = fmaxf(local_max, ToFloat(x[i]));
  const float row_max = BlockMax(local_max, scratch);
  float local_sum = 0.0f;
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) local_sum += expf(ToFloat(x[i]) - row_max);
  const float log_sum = logf(BlockSum(local_sum, scratch));
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) out[i] = ToFloat(x[i]) - row_max - log_sum;
}

void LogSoftmaxGpu(const LogSoftmaxArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  DispatchFloat(a.x.dtype(), "LogSoftmax", [&](auto tag) {
    using T = decltype(tag);
    SoftmaxParams<T> p{static_cast<const T*>(a.x.data()), a.out.data_ptr<float>(), MakeRowLayout(a.x, "LogSoftmax"),
                       MakeRowLayout(a.out, "LogSoftmax"), a.x.size(-1)};
    LaunchKernel(LogSoftmaxRows<T>, GridFor(NumRows(a.x), 1, "LogSoftmax"), kRowThreads, 0, stream, p);
  });
  CheckLaunch("LogSoftmax");
}

// The better of two candidates: larger value, then lower index.
__device__ inline void KeepLarger(float& value, int64_t& index, float other_value, int64_t other_index) {
  if (other_index >= 0 && (index < 0 || other_value > value || (other_value == value && other_index < index))) {
    value = other_value;
    index = other_index;
  }
}

template <typename T>
struct ArgmaxParams {
  const T* x;
  int64_t row_stride, width;
  int64_t chunk;               // values per block of the first pass
  float* partial_values;       // [R, chunks] (two passes only)
  int32_t* partial_indices;    // [R, chunks]
  int32_t* out;                // [R] (one pass only)
  const uint32_t* allowed;     // [R, allowed_words] bitmask, or null: every index
  int64_t allowed_words;
};

// The best (value, index) of the block's threads (ties: lower index) into thread 0.
__device__ inline void BlockBest(float& best, int64_t& best_index) {
  __shared__ float values[kMaxWarpsPerBlock];
  __shared__ int64_t indices[kMaxWarpsPerBlock];
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const float other = ShuffleXor(best, offset);
    const int other_index = ShuffleXor(static_cast<int>(best_index), offset);  // V < 2^31
    KeepLarger(best, best_index, other, other_index);
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    values[warp] = best;
    indices[warp] = best_index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / kWarpSize); ++w) KeepLarger(best, best_index, values[w], indices[w]);
  }
}

// Whether `allowed` (a row's bitmask words, or null: every index) sets index i.
__device__ inline bool IsAllowed(const uint32_t* allowed, int64_t i) {
  return allowed == nullptr || ((allowed[i >> 5] >> (i & 31)) & 1u);
}

// The block's best of chunk blockIdx.y of `row` (thread 0 after BlockBest): the row's
// index when the row is one chunk, else a partial for ArgmaxOfPartials.
__device__ inline void StoreChunkBest(float best, int64_t best_index, int64_t row, int32_t* out,
                                      float* partial_values, int32_t* partial_indices) {
  if (gridDim.y == 1) {
    out[row] = static_cast<int32_t>(best_index < 0 ? 0 : best_index);
  } else {
    partial_values[row * gridDim.y + blockIdx.y] = best;
    partial_indices[row * gridDim.y + blockIdx.y] = static_cast<int32_t>(best_index);
  }
}

// grid (R, chunks): block (r, c) takes values [c chunk, (c + 1) chunk) of row r.
// One chunk: the result goes to out; several: to the partials for ArgmaxOfPartials.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) ArgmaxChunks(ArgmaxParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t row = blockIdx.x, begin = static_cast<int64_t>(blockIdx.y) * p.chunk;
  const int64_t end = begin + p.chunk < p.width ? begin + p.chunk : p.width;
  const T* x = p.x + row * p.row_stride;
  float best = -INFINITY;
  int64_t best_index = -1;
  const uint32_t* allowed = p.allowed ? p.allowed + row * p.allowed_words : nullptr;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (!IsAllowed(allowed, i)) continue;
    KeepLarger(best, best_index, ToFloat(x[i]), i);
  }
  BlockBest(best, best_index);
  if (threadIdx.x == 0) StoreChunkBest(best, best_index, row, p.out, p.partial_values, p.partial_indices);
}

// grid R: the row's chunk results, in chunk order, reduced to its index.
__global__ void __launch_bounds__(kRowThreads) ArgmaxOfPartials(const float* values, const int32_t* indices,
                                                                int64_t chunks, int32_t* out) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t row = blockIdx.x;
  float best = -INFINITY;
  int64_t best_index = -1;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    KeepLarger(best, best_index, values[row * chunks + c], indices[row * chunks + c]);
  }
  BlockBest(best, best_index);
  if (threadIdx.x == 0) out[row] = static_cast<int32_t>(best_index < 0 ? 0 : best_index);
}

// A row of a vocabulary (248320 values) read by one block is latency-bound on one
// multiprocessor; chunks of kArgmaxChunk values spread it over the device, and a
// second small launch combines the chunks. Rows up to one chunk take one launch.
constexpr int64_t kArgmaxChunk = 8192;

void ArgmaxGpu(const ArgmaxArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const int64_t rows = a.x.size(0), width = a.x.size(1);
  const int64_t chunks = (width + kArgmaxChunk - 1) / kArgmaxChunk;
  Tensor partial_values, partial_indices;
  if (chunks > 1) {
    partial_values = Tensor::Empty({rows, chunks}, DType::kF32, a.x.device());
    partial_indices = Tensor::Empty({rows, chunks}, DType::kI32, a.x.device());
  }
  DispatchFloat(a.x.dtype(), "Argmax", [&](auto tag) {
    using T = decltype(tag);
    ArgmaxParams<T> p{static_cast<const T*>(a.x.data()),
                      a.x.stride(0),
                      width,
                      kArgmaxChunk,
                      chunks > 1 ? partial_values.data_ptr<float>() : nullptr,
                      chunks > 1 ? static_cast<int32_t*>(partial_indices.data()) : nullptr,
                      static_cast<int32_t*>(a.out.data()),
                      a.allowed.defined() ? static_cast<const uint32_t*>(a.allowed.data()) : nullptr,
                      a.allowed.defined() ? a.allowed.size(1) : 0};
    const dim3 grid(GridFor(rows, 1, "Argmax"), GridFor(chunks, 1, "Argmax"));
    LaunchKernel(ArgmaxChunks<T>, grid, kRowThreads, 0, stream, p);
  });
  if (chunks > 1) {
    LaunchKernel(ArgmaxOfPartials, GridFor(rows, 1, "Argmax"), kRowThreads, 0, stream, partial_values.data_ptr<float>(),
                 static_cast<const int32_t*>(partial_indices.data()), chunks, static_cast<int32_t*>(a.out.data()));
  }
  CheckLaunch("Argmax");
}

// ---- Sample ------------------------------------------------------------------------
// Two passes, three launches (op_args.h gives the contract; the CPU kernel in
// src/vt/cpu/kernels/sample.cpp the same tokens):
//   SampleThresholds  a block per row: the candidates' maximum m, then the keep
//                     threshold max(m + T log(min_p), the k-th largest value, the
//                     top-p value), each selection a radix select over the values'
//                     order-preserving 32-bit keys, 8 bits a pass (4 passes), with a
//                     256-bin histogram of counts (top-k) or of softmax weights
//                     (top-p) in shared memory. A row with T = 0 or no filter writes
//                     -inf and returns at once.
//   SampleRace        grid (rows, chunks): the race argmax (x_i / T + Gumbel_i) over
//                     the chunk's candidates at or above the threshold (x_i itself at
//                     T = 0), then ArgmaxOfPartials as Argmax's.
// A row of a 248k vocabulary is ~1 MB read 2 + 4 (top-k) + 4 (top-p) times by one
// block for the threshold: tens of microseconds, against the milliseconds of copying
// the logits to the host.

constexpr int kSelectThreads = 1024;
constexpr int kRadixBins = 256;
constexpr int64_t kRaceChunk = 4096;  // the noise costs ~100 instructions a value: more blocks

template <typename T>
struct SampleParams {
  const T* x;
  int64_t row_stride, width;
  const uint32_t* allowed;  // [R, allowed_words] or null
  int64_t allowed_words;
  const SampleRow* rows;  // [R]
  float* thresholds;      // [R]
};

// Larger floats have larger keys (negative values' bits inverted, positive ones'
// sign bit set).
__device__ inline uint32_t OrderedKey(float v) {
  const uint32_t bits = __float_as_uint(v);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}
__device__ inline float FromOrderedKey(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

template <typename T>
__device__ inline bool IsCandidate(const SampleParams<T>& p, const T* x, int64_t row, int64_t i, float& v) {
  if (p.allowed && !IsAllowed(p.allowed + row * p.allowed_words, i)) return false;
  v = ToFloat(x[i]);
  return !isnan(v);
}

// The value whose key the 4 passes of 8 bits single out among the candidates at or
// above `floor`: the largest v with sum of weight(x) over candidates x >= v reaching
// `target`, weight 1 (count: the target-th largest) or the softmax weight. When the
// weights' rounding leaves no bin reaching the target, the lowest non-empty bin is
// taken (everything stays). Every thread calls it; every thread gets the value.
template <bool kMass, typename T>
__device__ float RadixSelect(const SampleParams<T>& p, const T* x, int64_t row, float floor, float target, float m,
                             float t, float top_p) {
  __shared__ float hist[kRadixBins];
  __shared__ uint32_t prefix_shared;
  __shared__ float target_shared;
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kRadixBins; b += blockDim.x) hist[b] = 0.0f;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) {
      float v;
      if (!IsCandidate(p, x, row, i, v) || v < floor) continue;
      const uint32_t key = OrderedKey(v);
      if ((key & mask) != prefix) continue;
      atomicAdd(&hist[(key >> shift) & 0xffu], kMass ? expf((v - m) / t) : 1.0f);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (kMass && shift == 24) {  // the candidates' whole mass: the target is top_p of it
        float total = 0.0f;
        for (int b = 0; b < kRadixBins; ++b) total += hist[b];
        target = top_p * total;
      }
      float above = 0.0f;
      int chosen = -1, lowest = 0;
      for (int b = kRadixBins - 1; b >= 0; --b) {
        if (hist[b] == 0.0f) continue;
        lowest = b;
        if (above + hist[b] >= target) {
          chosen = b;
          break;
        }
        above += hist[b];
      }
      if (chosen < 0) {  // rounding: keep everything down to the lowest bin
        chosen = lowest;
        above -= hist[lowest];
      }
      prefix_shared = prefix | (static_cast<uint32_t>(chosen) << shift);
      target_shared = target - above;
    }
    __syncthreads();
    prefix = prefix_shared;
    target = target_shared;
    mask |= 0xffu << shift;
    __syncthreads();  // the next pass clears hist
  }
  return FromOrderedKey(prefix);
}

template <typename T>
__global__ void __launch_bounds__(kSelectThreads) SampleThresholds(SampleParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float scratch[kMaxWarpsPerBlock];
  const int64_t row = blockIdx.x;
  const SampleRow params = p.rows[row];
  const float t = params.temperature, min_p = params.min_p, top_p = params.top_p;
  const int32_t top_k = params.top_k;
  const bool by_k = top_k > 0 && top_k < p.width;
  float thr = -INFINITY;
  if (t > 0.0f && (min_p > 0.0f || by_k || top_p < 1.0f)) {
    const T* x = p.x + row * p.row_stride;
    float local_max = -INFINITY;
    for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) {
      float v;
      if (IsCandidate(p, x, row, i, v)) local_max = fmaxf(local_max, v);
    }
    const float m = BlockMax(local_max, scratch);
    if (min_p > 0.0f) thr = m + t * logf(min_p);
    if (by_k) {
      float local_count = 0.0f;  // exact: a vocabulary is far below 2^24
      for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) {
        float v;
        if (IsCandidate(p, x, row, i, v) && v >= thr) local_count += 1.0f;
      }
      if (BlockSum(local_count, scratch) > static_cast<float>(top_k)) {
        thr = fmaxf(thr, RadixSelect<false>(p, x, row, thr, static_cast<float>(top_k), m, t, top_p));
      }
    }
    if (top_p < 1.0f) thr = fmaxf(thr, RadixSelect<true>(p, x, row, thr, 0.0f, m, t, top_p));
  }
  if (threadIdx.x == 0) p.thresholds[row] = thr;
}

// grid (R, chunks): block (r, c) races values [c chunk, (c + 1) chunk) of row r; the
// winner goes to out (one chunk) or to the partials for ArgmaxOfPartials.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) SampleRace(SampleParams<T> p, int64_t chunk, float* partial_values,
                                                          int32_t* partial_indices, int32_t* out) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t row = blockIdx.x, begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < p.width ? begin + chunk : p.width;
  const T* x = p.x + row * p.row_stride;
  const SampleRow params = p.rows[row];
  const float t = params.temperature, thr = p.thresholds[row];
  const bool greedy = !(t > 0.0f);
  const uint64_t seed = params.Seed();
  const int64_t offset = params.Offset();
  float best = -INFINITY;
  int64_t best_index = -1;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float v;
    if (!IsCandidate(p, x, row, i, v)) continue;
    if (!greedy) {
      if (v < thr) continue;
      v = v / t + sample_noise::Gumbel(seed, offset, i);
    }
    KeepLarger(best, best_index, v, i);
  }
  BlockBest(best, best_index);
  if (threadIdx.x == 0) StoreChunkBest(best, best_index, row, out, partial_values, partial_indices);
}

void SampleGpu(const SampleArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const int64_t rows = a.x.size(0), width = a.x.size(1);
  const int64_t chunks = (width + kRaceChunk - 1) / kRaceChunk;
  Tensor thresholds = Tensor::Empty({rows}, DType::kF32, a.x.device());
  Tensor partial_values, partial_indices;
  if (chunks > 1) {
    partial_values = Tensor::Empty({rows, chunks}, DType::kF32, a.x.device());
    partial_indices = Tensor::Empty({rows, chunks}, DType::kI32, a.x.device());
  }
  int32_t* out = static_cast<int32_t*>(a.out.data());
  DispatchFloat(a.x.dtype(), "Sample", [&](auto tag) {
    using T = decltype(tag);
    const SampleParams<T> p{static_cast<const T*>(a.x.data()),
                            a.x.stride(0),
                            width,
                            a.allowed.defined() ? static_cast<const uint32_t*>(a.allowed.data()) : nullptr,
                            a.allowed.defined() ? a.allowed.size(1) : 0,
                            static_cast<const SampleRow*>(a.params.data()),
                            thresholds.data_ptr<float>()};
    LaunchKernel(SampleThresholds<T>, GridFor(rows, 1, "Sample"), kSelectThreads, 0, stream, p);
    const dim3 grid(GridFor(rows, 1, "Sample"), GridFor(chunks, 1, "Sample"));
    LaunchKernel(SampleRace<T>, grid, kRowThreads, 0, stream, p, kRaceChunk,
                 chunks > 1 ? partial_values.data_ptr<float>() : nullptr,
                 chunks > 1 ? static_cast<int32_t*>(partial_indices.data()) : nullptr, out);
  });
  if (chunks > 1) {
    LaunchKernel(ArgmaxOfPartials, GridFor(rows, 1, "Sample"), kRowThreads, 0, stream, partial_values.data_ptr<float>(),
                 static_cast<const int32_t*>(partial_indices.data()), chunks, out);
  }
  CheckLaunch("Sample");
}

struct PenaltiesParams {
  float* x;
  int64_t x_row_stride, vocab, length;
  const int32_t* ids;
  const int32_t* output_begin;
  const float* params;
  uint32_t* counts;  // [rows, vocab], zero
  BadIndexRecord* bad_index;
};

__global__ void __launch_bounds__(kRowThreads) PenaltyRows(PenaltiesParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  constexpr uint32_t kSeen = 1u << 31;  // the low bits count outputs
  const int64_t row = blockIdx.x;
  const int32_t* ids = p.ids + row * p.length;
  uint32_t* counts = p.counts + row * p.vocab;
  const int64_t begin = p.output_begin[row];
  for (int64_t i = threadIdx.x; i < p.length; i += blockDim.x) {
    const int32_t t = ids[i];
    if (t == -1) continue;
    if (t < -1 || t >= p.vocab) {
      RecordBadIndex(p.bad_index, CheckedIndexOp::kPenalties, row * p.length + i, t, p.vocab, p.length);
      continue;
    }
    atomicOr(&counts[t], kSeen);
    if (i >= begin) atomicAdd(&counts[t], 1u);
  }
  __syncthreads();
  const double repetition = p.params[3 * row], frequency = p.params[3 * row + 1], presence = p.params[3 * row + 2];
  float* x = p.x + row * p.x_row_stride;
  for (int64_t i = threadIdx.x; i < p.length; i += blockDim.x) {
    const int32_t t = ids[i];
    if (t < 0 || t >= p.vocab) continue;
    const uint32_t c = atomicExch(&counts[t], 0u);
    if (c == 0) continue;  // another position of the same token took it
    const uint32_t n = c & ~kSeen;
    double v = x[t];
    v = v > 0 ? v / repetition : v * repetition;
    if (n > 0) v -= frequency * n + presence;
    x[t] = static_cast<float>(v);
  }
}

void PenaltiesGpu(const PenaltiesArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const int64_t rows = a.x.size(0), vocab = a.x.size(1);
  const Tensor counts = Tensor::Zeros({rows, vocab}, DType::kI32, a.x.device());
  const PenaltiesParams p{a.x.data_ptr<float>(),
                          a.x.stride(0),
                          vocab,
                          a.token_ids.size(1),
                          static_cast<const int32_t*>(a.token_ids.data()),
                          static_cast<const int32_t*>(a.output_begin.data()),
                          a.params.data_ptr<float>(),
                          static_cast<uint32_t*>(counts.data()),
                          BadIndexRecordFor(a.x.device())};
  LaunchKernel(PenaltyRows, GridFor(rows, 1, "Penalties"), kRowThreads, 0, stream, p);
  CheckLaunch("Penalties");
}

constexpr int kTopLogprobsThreads = 256;  // lists of kMaxTopLogprobs pairs: 40 KB of shared memory

template <typename T>
struct TopLogprobsParams {
  const T* x;
  int64_t row_stride, width;
  const int32_t* token;     // [R]
  const uint32_t* allowed;  // [R, allowed_words] bitmask, or null: every index
  int64_t allowed_words;
  int32_t* ids;   // [R, 1 + k]
  float* values;  // [R, 1 + k]
  int k;
  BadIndexRecord* bad_index;
};

template <typename T>
__global__ void __launch_bounds__(kTopLogprobsThreads) TopLogprobsRows(TopLogprobsParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  constexpr int kThreads = kTopLogprobsThreads;
  __shared__ float list_values[kMaxTopLogprobs * kThreads];  // thread t's j-th best at [j * kThreads + t]
  __shared__ int32_t list_indices[kMaxTopLogprobs * kThreads];
  __shared__ float scratch[kMaxWarpsPerBlock];
  __shared__ int64_t winner;
  const int64_t row = blockIdx.x;
  const int k = p.k;
  const T* x = p.x + row * p.row_stride;
  const uint32_t* allowed = p.allowed ? p.allowed + row * p.allowed_words : nullptr;
  float* mine = list_values + threadIdx.x;
  int32_t* mine_at = list_indices + threadIdx.x;
  int count = 0;
  float local_max = -INFINITY, local_sum = 0.0f;  // sum of exp(v - local_max)
  for (int64_t i = threadIdx.x; i < p.width; i += kThreads) {
    const float v = IsAllowed(allowed, i) ? ToFloat(x[i]) : -INFINITY;
    if (v > local_max) {
      local_sum = local_sum * expf(local_max - v) + 1.0f;
      local_max = v;
    } else if (v != -INFINITY) {
      local_sum += expf(v - local_max);
    }
    if (k > 0 && (count < k || v > mine[(k - 1) * kThreads])) {
      int j = count < k ? count++ : k - 1;
      for (; j > 0 && v > mine[(j - 1) * kThreads]; --j) {
        mine[j * kThreads] = mine[(j - 1) * kThreads];
        mine_at[j * kThreads] = mine_at[(j - 1) * kThreads];
      }
      mine[j * kThreads] = v;
      mine_at[j * kThreads] = static_cast<int32_t>(i);
    }
  }
  const float row_max = BlockMax(local_max, scratch);
  const float scaled = local_max == -INFINITY ? 0.0f : local_sum * expf(local_max - row_max);
  const float log_norm = row_max + logf(BlockSum(scaled, scratch));
  int32_t* ids = p.ids + row * (k + 1);
  float* values = p.values + row * (k + 1);
  if (threadIdx.x == 0) {
    const int32_t t = p.token[row];
    if (t < 0 || t >= p.width) {
      RecordBadIndex(p.bad_index, CheckedIndexOp::kTopLogprobs, row, t, p.width, 1);
      ids[0] = -1;
      values[0] = NAN;
    } else {
      ids[0] = t;
      values[0] = (IsAllowed(allowed, t) ? ToFloat(x[t]) : -INFINITY) - log_norm;
    }
  }
  int head = 0;
  for (int j = 0; j < k; ++j) {
    float best = head < count ? mine[head * kThreads] : -INFINITY;
    int64_t best_index = head < count ? mine_at[head * kThreads] : -1;
    BlockBest(best, best_index);  // thread 0
    if (threadIdx.x == 0) {
      winner = best_index;
      ids[1 + j] = static_cast<int32_t>(best_index);
      values[1 + j] = best - log_norm;
    }
    __syncthreads();
    if (head < count && mine_at[head * kThreads] == winner) ++head;
    __syncthreads();  // winner and BlockBest's shared slots are written again next round
  }
}

void TopLogprobsGpu(const TopLogprobsArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const int64_t rows = a.x.size(0);
  DispatchFloat(a.x.dtype(), "TopLogprobs", [&](auto tag) {
    using T = decltype(tag);
    const TopLogprobsParams<T> p{static_cast<const T*>(a.x.data()),
                                 a.x.stride(0),
                                 a.x.size(1),
                                 static_cast<const int32_t*>(a.token.data()),
                                 a.allowed.defined() ? static_cast<const uint32_t*>(a.allowed.data()) : nullptr,
                                 a.allowed.defined() ? a.allowed.size(1) : 0,
                                 static_cast<int32_t*>(a.ids.data()),
                                 a.values.data_ptr<float>(),
                                 static_cast<int>(a.ids.size(1) - 1),
                                 BadIndexRecordFor(a.x.device())};
    LaunchKernel(TopLogprobsRows<T>, GridFor(rows, 1, "TopLogprobs"), kTopLogprobsThreads, 0, stream, p);
  });
  CheckLaunch("TopLogprobs");
}

}  // namespace

VT_REGISTER_KERNEL(LogSoftmax, VT_GPU_DEVICE, LogSoftmaxGpu);
VT_REGISTER_KERNEL(Argmax, VT_GPU_DEVICE, ArgmaxGpu);
VT_REGISTER_KERNEL(Penalties, VT_GPU_DEVICE, PenaltiesGpu);
VT_REGISTER_KERNEL(Sample, VT_GPU_DEVICE, SampleGpu);
VT_REGISTER_KERNEL(TopLogprobs, VT_GPU_DEVICE, TopLogprobsGpu);

}  // namespace vt::gpu
