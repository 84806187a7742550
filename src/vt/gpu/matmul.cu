// Our GPU GEMM kernels: out[M, N] = x[M, K] . w[N, K]^T, f32 accumulation.
//
// Shapes (op_args.h): x [M, K] f32/f16/bf16 with strided rows, w [N, K] with
// contiguous rows (f32/f16/bf16 or a GGUF block type whose block divides K; rows
// may be strided by whole blocks), out [M, N] in x's dtype, strided rows.
// These run on ROCm for every shape and on CUDA for the shapes matmul_choice.h
// keeps off cuBLAS.
//
// kSkinnyVectorLoads / kSkinnyWarpPerColumn: for decode-sized M the cost is reading
// w once, so each warp owns one output column, streams its weight row (16-byte
// loads of 8 values per lane for aligned float rows; else one element per lane,
// block formats decoded in registers) and keeps up to 8 row sums in registers.
// kSkinnyLoadsInFlight: the same walk for 16-bit weights, tuned for bytes in flight.
// Decode GEMV time is weight bytes over the bandwidth that the loads in flight can
// sustain (Little's law: ~3 MB must be in flight on an H200). kSkinnyVectorLoads
// takes 64 registers (8 runtime-guarded rows), so an SM holds 32 warps with one
// 512-byte warp load each; this kernel fixes the row count at compile time (M = 1:
// a few dozen registers, 64 warps per SM), issues 4 loads per lane before using
// them (2 KB per warp), streams weights past L1 (x stays there), and sizes its grid
// so that every warp walks the same number of columns within one wave of the blocks
// the device actually holds (no block waits for a second wave, no round of columns
// left to a few); where N alone cannot fill the device, pairs of warps split K.
// kTiledShared: the classic shared-memory tiling; every x and w element loaded into
// shared memory is used by 64 outputs, so the kernel is arithmetic-bound rather
// than bandwidth-bound for large M.
#include <cstdint>
#include <string>

#include "gpu_dot.cuh"
#include "matmul.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::gpu {
namespace {

template <typename X>
struct GemmParams {
  const X* x;
  X* out;
  WeightMatrix w;
  int64_t m, n, k;
  int64_t x_row_stride, out_row_stride;
};

constexpr int kSkinnyThreads = 128;

template <typename X>
__global__ void __launch_bounds__(kSkinnyThreads) SkinnyWarpPerColumn(GemmParams<X> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int lane = threadIdx.x % kWarpSize;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (column >= p.n) return;  // whole warps leave together
  const void* w_row = p.w.Row(column);
  float acc[kSkinnyMaxRows] = {};
  for (int64_t i = lane; i < p.k; i += kWarpSize) {
    const float w = WeightAt(w_row, p.w.dtype, i);
#pragma unroll
    for (int r = 0; r < kSkinnyMaxRows; ++r) {
      if (r < p.m) acc[r] += w * ToFloat(p.x[r * p.x_row_stride + i]);
    }
  }
#pragma unroll
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r < p.m) {
      const float sum = WarpSum(acc[r]);
      if (lane == 0) p.out[r * p.out_row_stride + column] = FromFloat<X>(sum);
    }
  }
}

// kSkinnyVectorLoads: each lane takes 8 consecutive values per step, read as one
// or two 16-byte loads of the (aligned) row.
constexpr int kChunk = 8;

template <typename T>
__device__ inline void LoadChunk(const T* p, float (&out)[kChunk]) {
  constexpr int kVectors = kChunk * sizeof(T) / 16;
  uint4 raw[kVectors];
#pragma unroll
  for (int v = 0; v < kVectors; ++v) raw[v] = reinterpret_cast<const uint4*>(p)[v];
  T values[kChunk];
  memcpy(values, raw, sizeof(values));
#pragma unroll
  for (int j = 0; j < kChunk; ++j) out[j] = ToFloat(values[j]);
}

// A lane's weight chunks loaded before the first is used: one chunk a step left each
// lane with one load in flight, so a 2048-value f32 row (the MoE router's, 8 steps)
// took 8 memory latencies: ~6.8 us a [257 x 2048] router launch on an H200 (ncu,
// 35B-A3B decode step), for 2 MB.
constexpr int kVectorChunksInFlight = 4;

template <typename X, typename W>
__global__ void __launch_bounds__(kSkinnyThreads) SkinnyVectorLoads(GemmParams<X> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int lane = threadIdx.x % kWarpSize;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (column >= p.n) return;  // whole warps leave together
  const W* w_row = static_cast<const W*>(p.w.data) + column * p.w.row_stride;
  float acc[kSkinnyMaxRows] = {};
  constexpr int64_t kStep = kWarpSize * kChunk;  // values of a warp-wide chunk
  for (int64_t first = static_cast<int64_t>(lane) * kChunk; first < p.k; first += kStep * kVectorChunksInFlight) {
    float w[kVectorChunksInFlight][kChunk];
#pragma unroll
    for (int c = 0; c < kVectorChunksInFlight; ++c) {
      if (first + c * kStep < p.k) LoadChunk(w_row + first + c * kStep, w[c]);
    }
#pragma unroll
    for (int c = 0; c < kVectorChunksInFlight; ++c) {
      const int64_t base = first + c * kStep;
      if (base >= p.k) break;
#pragma unroll
      for (int r = 0; r < kSkinnyMaxRows; ++r) {
        if (r < p.m) {
          float x[kChunk];
          LoadChunk(p.x + r * p.x_row_stride + base, x);
#pragma unroll
          for (int j = 0; j < kChunk; ++j) acc[r] += w[c][j] * x[j];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r < p.m) {
      const float sum = WarpSum(acc[r]);
      if (lane == 0) p.out[r * p.out_row_stride + column] = FromFloat<X>(sum);
    }
  }
}

constexpr int kInFlightThreads = 256;
constexpr int kLoadsInFlight = 4;      // 16-byte weight loads issued per lane before the first is used

// acc[r] += dot(8 weights in `raw`, x[r, at .. at + 8)) for the kRows rows (m of them real).
template <typename X, typename W, int kRows>
__device__ inline void AccumulateChunk(const uint4& raw, const GemmParams<X>& p, int64_t at, float (&acc)[kRows]) {
  W w[kChunk];
  memcpy(w, &raw, sizeof(w));
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < p.m) {
      float x[kChunk];
      LoadChunk(p.x + r * p.x_row_stride + at, x);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) acc[r] += ToFloat(w[j]) * x[j];
    }
  }
}

// W is f16 or bf16 (8 values per 16-byte vector), X any float type; m <= kRows;
// rows 16-byte aligned. With kSplit = 2, the two warps of a pair take the two halves
// of one column's K and add their sums through shared memory: twice the warps on
// a launch whose N alone cannot fill the device (the 9B's down and out
// projections: N 4096 against 8448 resident warps). 32-bit indices (the launcher
// checks N and K / 8 fit) and the launch bound keep the M = 1 kernel at 32
// registers, 8 blocks per SM (ptxas: no spill for bf16 x; 16 bytes spilled outside
// the inner loop for the split and f32-x instances; measured faster, gpu_notes.md).
template <typename X, typename W, int kRows, int kSplit>
__global__ void __launch_bounds__(kInFlightThreads, kRows == 1 ? 8 : 1) SkinnyLoadsInFlight(GemmParams<X> p) {
  static_assert(sizeof(W) * kChunk == 16, "one 16-byte vector holds a chunk of weights");
  __shared__ float partial[kSplit > 1 ? kInFlightThreads / 32 : 1][kRows];  // [warp][row] (kSplit > 1)
  const int lane = threadIdx.x % kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int columns_per_block = static_cast<int>(blockDim.x) / kWarpSize / kSplit;
  const int column_slots = static_cast<int>(gridDim.x) * columns_per_block;
  const int vectors = static_cast<int>(p.k / kChunk);  // 16-byte vectors per weight row
  const int part_vectors = (vectors + kSplit - 1) / kSplit;
  const int begin = (warp % kSplit) * part_vectors;
  const int end = begin + part_vectors < vectors ? begin + part_vectors : vectors;
  constexpr int step = kLoadsInFlight * kWarpSize;
  const int n = static_cast<int>(p.n);
  // The first round's weights are fetched into L2 while the kernel ahead finishes
  // (gpu_launch.cuh); x is its output, read only after the wait.
  if (const int first = static_cast<int>(blockIdx.x) * columns_per_block + warp / kSplit; first < n) {
    const uint4* w_row =
        reinterpret_cast<const uint4*>(static_cast<const W*>(p.w.data) + static_cast<int64_t>(first) * p.w.row_stride);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      if (begin + lane + u * kWarpSize < end) PrefetchToL2(w_row + begin + lane + u * kWarpSize);
    }
  }
  WaitForPriorKernels();
  // Whole warps take the same columns, so the warp sums below see every lane; whole
  // blocks take the same rounds, so every warp of a block meets the barriers.
  for (int base = static_cast<int>(blockIdx.x) * columns_per_block; base < n; base += column_slots) {
    const int column = base + warp / kSplit;
    float acc[kRows] = {};
    if (column < n) {
      const uint4* w_row = reinterpret_cast<const uint4*>(static_cast<const W*>(p.w.data) +
                                                          static_cast<int64_t>(column) * p.w.row_stride);
      int v = begin + lane;
      for (; v + step - kWarpSize < end; v += step) {
        uint4 raw[kLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) raw[u] = LoadOnce16(w_row + v + u * kWarpSize);
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
          AccumulateChunk<X, W, kRows>(raw[u], p, static_cast<int64_t>(v + u * kWarpSize) * kChunk, acc);
        }
      }
      for (; v < end; v += kWarpSize) {
        AccumulateChunk<X, W, kRows>(LoadOnce16(w_row + v), p, static_cast<int64_t>(v) * kChunk, acc);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = r < p.m ? WarpSum(acc[r]) : 0.0f;
    if constexpr (kSplit == 1) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < p.m && lane == 0 && column < n) p.out[r * p.out_row_stride + column] = FromFloat<X>(acc[r]);
      }
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (lane == 0) partial[warp][r] = acc[r];
      }
      __syncthreads();
      if (warp % kSplit == 0 && lane == 0 && column < n) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < p.m) {
            float sum = 0.0f;
            for (int part = 0; part < kSplit; ++part) sum += partial[warp + part][r];
            p.out[r * p.out_row_stride + column] = FromFloat<X>(sum);
          }
        }
      }
      __syncthreads();  // partial is rewritten by the next round
    }
  }
}

// One wave of resident blocks in which every warp has the same work. The resident
// count comes from the runtime (at 38 registers this kernel fitted 6 of 8 blocks
// per H200 SM; a grid sized for 8 left a second, partial wave of 232 blocks on the
// 9B gate|up projection, ncu). When twice N fits in the resident warps, pairs of
// warps split each column's K (kSplit 2). Otherwise a grid of all resident warps
// over N columns would leave the last round to a fraction of them (N = 12352 on
// 6336 warps: 1 or 2 columns each); so columns per warp first, then as few warps as
// give each that many.
template <typename X, typename W, int kRows>
void LaunchSkinnyLoadsInFlightRows(const GemmParams<X>& p, Device device, gpuStream_t stream) {
  if (p.n > INT32_MAX || p.k / kChunk > INT32_MAX) {
    throw Error("vt::MatMul on " + device.ToString() + ": N " + std::to_string(p.n) + " or K " +
                std::to_string(p.k) + " is past the decode kernel's 32-bit indices");
  }
  const int warps_per_block = kInFlightThreads / WarpSize(device);
  const auto resident_warps = [&](auto kernel) {
    return static_cast<int64_t>(MultiprocessorCount(device)) *
           ResidentBlocksPerMultiprocessor(reinterpret_cast<const void*>(kernel), kInFlightThreads, device) *
           warps_per_block;
  };
  const auto split = &SkinnyLoadsInFlight<X, W, kRows, 2>;
  if (2 * p.n <= resident_warps(split)) {
    LaunchKernel(split, GridFor(p.n, warps_per_block / 2, "MatMul"), kInFlightThreads, 0, stream, p);
    return;
  }
  const auto whole = &SkinnyLoadsInFlight<X, W, kRows, 1>;
  const int64_t whole_warps = resident_warps(whole);
  const int64_t columns_per_warp = (p.n + whole_warps - 1) / whole_warps;
  const unsigned grid = GridFor((p.n + columns_per_warp - 1) / columns_per_warp, warps_per_block, "MatMul");
  LaunchKernel(whole, grid, kInFlightThreads, 0, stream, p);
}

template <typename X, typename W>
void LaunchSkinnyLoadsInFlight(const GemmParams<X>& p, Device device, gpuStream_t stream) {
  if (p.m == 1) {
    LaunchSkinnyLoadsInFlightRows<X, W, 1>(p, device, stream);
  } else if (p.m <= 4) {
    LaunchSkinnyLoadsInFlightRows<X, W, 4>(p, device, stream);
  } else {
    LaunchSkinnyLoadsInFlightRows<X, W, static_cast<int>(kSkinnyMaxRows)>(p, device, stream);
  }
}

constexpr int kTile = 64;       // output rows and columns per block
constexpr int kTileK = 16;      // k depth staged per step
constexpr int kTileThreads = 256;
constexpr int kPerThread = 4;   // outputs per thread along m and along n (16 x 16 threads x 4 x 4)

template <typename X>
__global__ void __launch_bounds__(kTileThreads) TiledShared(GemmParams<X> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float xs[kTileK][kTile + 4];  // [k][m], padded against bank conflicts
  __shared__ float ws[kTileK][kTile + 4];  // [k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile, n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  float acc[kPerThread][kPerThread] = {};
  for (int64_t k0 = 0; k0 < p.k; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTile * kTileK; e += kTileThreads) {
      const int kk = e % kTileK, row = e / kTileK;
      const int64_t kg = k0 + kk;
      const int64_t m = m0 + row, n = n0 + row;
      xs[kk][row] = m < p.m && kg < p.k ? ToFloat(p.x[m * p.x_row_stride + kg]) : 0.0f;
      ws[kk][row] = n < p.n && kg < p.k ? WeightAt(p.w.Row(n), p.w.dtype, kg) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[kPerThread], b[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        a[i] = xs[kk][ty + 16 * i];
        b[i] = ws[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t m = m0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (m < p.m && n < p.n) p.out[m * p.out_row_stride + n] = FromFloat<X>(acc[i][j]);
    }
  }
}

}  // namespace

namespace {

// Whether every row of t starts on a 16-byte boundary and holds whole 8-value chunks.
bool RowsAligned(const Tensor& t) {
  const int64_t elem = Info(t.dtype()).block_bytes;
  const bool start = reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
  const bool stride = t.size(0) == 1 || (t.stride(0) * elem) % 16 == 0;
  return start && stride && t.size(1) % kChunk == 0;
}

}  // namespace

MatMulShape DescribeMatMul(const MatMulArgs& a, bool vendor_blas_available) {
  MatMulShape shape;
  shape.m = a.x.size(0);
  shape.n = a.w.size(0);
  shape.k = a.x.size(1);
  shape.weight_is_block = IsQuantized(a.w.dtype());
  shape.weight_matches_x = a.w.dtype() == a.x.dtype();
  shape.vendor_blas_available = vendor_blas_available;
  shape.rows_16_byte_aligned = !shape.weight_is_block && RowsAligned(a.x) && RowsAligned(a.w);
  shape.weight_is_16_bit = a.w.dtype() == DType::kF16 || a.w.dtype() == DType::kBF16;
  shape.quant_gemv_accepts = shape.weight_is_block && QuantGemvAccepts(a);
  shape.quant_mma_accepts = shape.weight_is_block && QuantMmaAccepts(a);
  shape.quant_mma_pipelined = shape.quant_mma_accepts && QuantMmaPipelinedTakes(a);
  shape.quant_gemv_staged = shape.weight_is_block && QuantGemvStagedTakes(a);
  return shape;
}

MatMulArgs WithWidenedX(const MatMulArgs& a) {
  const Tensor x = Tensor::Empty({a.x.size(0), a.x.size(1)}, DType::kF32, a.out.device());
  Copy({.src = a.x, .dst = x});
  reach::Hit("MatMulGpu.widened_x");
  return {.x = x, .w = a.w, .out = a.out};
}

void RunOwnMatMul(const MatMulArgs& a, MatMulKernel kernel) {
  if (a.out.dtype() != a.x.dtype()) {
    throw Error("vt::MatMul on " + a.out.device().ToString() + ": internal error: our kernels got x " +
                a.x.Describe() + " with out " + a.out.Describe() + " (widen x first)");
  }
  if (kernel == MatMulKernel::kQuantGemv) {
    RunQuantGemv(a);
    return;
  }
  if (kernel == MatMulKernel::kQuantMma) {
    RunQuantMma(a);
    return;
  }
  if (kernel == MatMulKernel::kQuantGemvStaged) {
    RunQuantGemvStaged(a);
    return;
  }
  gpuStream_t stream = PrepareDevice(a.out.device());
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    GemmParams<X> p{static_cast<const X*>(a.x.data()),
                    static_cast<X*>(a.out.data()),
                    MakeWeightMatrix(a.w.data(), a.w.dtype(), a.w.stride(0)),
                    a.x.size(0),
                    a.w.size(0),
                    a.x.size(1),
                    a.x.stride(0),
                    a.out.stride(0)};
    if (kernel == MatMulKernel::kSkinnyVectorLoads) {
      reach::Hit("MatMulGpu.skinny_vector_loads");
      const int columns_per_block = kSkinnyThreads / WarpSize(a.out.device());
      DispatchFloat(a.w.dtype(), "MatMul", [&](auto w_tag) {
        using W = decltype(w_tag);
        LaunchKernel(SkinnyVectorLoads<X, W>, GridFor(p.n, columns_per_block, "MatMul"), kSkinnyThreads, 0, stream, p);
      });
    } else if (kernel == MatMulKernel::kSkinnyLoadsInFlight) {
      reach::Hit("MatMulGpu.skinny_loads_in_flight");
      if (a.w.dtype() == DType::kBF16) {
        LaunchSkinnyLoadsInFlight<X, bf16_t>(p, a.out.device(), stream);
      } else if (a.w.dtype() == DType::kF16) {
        LaunchSkinnyLoadsInFlight<X, f16_t>(p, a.out.device(), stream);
      } else {
        throw Error("vt::MatMul on " + a.out.device().ToString() +
                    ": internal error: the loads-in-flight kernel got w " + a.w.Describe());
      }
    } else if (kernel == MatMulKernel::kSkinnyWarpPerColumn) {
      reach::Hit("MatMulGpu.skinny_warp_per_column");
      const int columns_per_block = kSkinnyThreads / WarpSize(a.out.device());
      LaunchKernel(SkinnyWarpPerColumn<X>, GridFor(p.n, columns_per_block, "MatMul"), kSkinnyThreads, 0, stream, p);
    } else if (kernel == MatMulKernel::kTiledShared) {
      reach::Hit("MatMulGpu.tiled_shared");
      const dim3 grid(GridFor(p.n, kTile, "MatMul"), GridFor(p.m, kTile, "MatMul"));
      LaunchKernel(TiledShared<X>, grid, kTileThreads, 0, stream, p);
    } else {
      throw Error("vt::MatMul on " + a.out.device().ToString() + ": internal error: RunOwnMatMul got a vendor route");
    }
  });
  CheckLaunch("MatMul");
}

}  // namespace vt::gpu
