// MatMul with GGUF block weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K): out[M, N] =
// x[M, K] . w[N, K]^T for the decode and small-batch shapes (M <= kQuantGemvMaxRows).
//
//   1. x -> XBlock [M, K / 32] (gpu_quant_dot.cuh's QuantizeXRows, four threads per
//      block of 32 values): a few KB, read by every warp afterwards; quantized by each
//      GEMV block into its shared memory when it fits (kGemvSharedXMaxBytes), else
//      by QuantizeActivations before the GEMV.
//   2. QuantGemv: each warp owns output columns; for a column it streams the weight
//      row once, kWarpSize / kLanes blocks per step, decoding each lane's word in
//      registers and dotting it with the row's x words for all M rows at once
//      (weight bytes are read once whatever M is), kGemvDepth steps' loads in flight.
// The weights are the only large input, but the kernel's time is set by the
// instructions it issues per weight byte (loads of the 2-byte aligned blocks,
// dp4a per row and word, scales): 0.4-0.65 of the copy bandwidth at M = 1 on an
// H200 (bench/README.md), falling with M.
//
// DequantizeWeightRows (for the vendor-BLAS route of larger M, cuda_matmul.cu):
// rows [row0, row0 + rows) of w decoded into a dense [rows, K] matrix of out's dtype.
// Each thread decodes its 8 values from global memory one byte load at a time
// (DequantizeRowsKernel), which issues ~1.25 loads per value and reached 0.53 of the
// copy bandwidth on the H200 (the 9B Q8_0 step at batch 256: 11 ms of 46,
// bench/gpu_notes.md). DequantizeTilesKernel (rows 16-byte aligned, K a multiple of
// kDequantTileValues) copies a tile of a row's block bytes into shared memory in
// 16-byte loads and decodes it from there; it runs only when vt::tuning family
// "gpu.dequantize" forces "tiles" ("elements" forces the other) until it has run on a
// GPU (written and compiled on 2026-12-07, when no device started).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "gpu_dot.cuh"
#include "gpu_quant_dot.cuh"
#include "matmul.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {
namespace {

// ---- 1. activations to 8 bits ------------------------------------------------------

constexpr int kQuantizeThreads = 256;

// Four threads a block of 32 values (QuantizeXRows), the grid striding over them.
template <typename X>
__global__ void __launch_bounds__(kQuantizeThreads)
    QuantizeRowsKernel(const X* x, int64_t x_row_stride, int64_t blocks_per_row, int64_t num_blocks, XBlock* out) {
  WaitForPriorKernels();  // gpu_launch.cuh
  QuantizeXRows(x, x_row_stride, blocks_per_row, num_blocks, out,
                static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                static_cast<int64_t>(gridDim.x) * blockDim.x);
}

// ---- 2. the GEMV -----------------------------------------------------------------

template <typename X>
struct QuantGemvParams {
  const uint8_t* w;
  int64_t w_row_bytes;   // bytes from one weight row to the next
  const XBlock* xq;      // [m, blocks_per_row * kValues / 32], or null: quantized by each block (kXShared)
  const X* x;            // [m, K] with rows x_row_stride apart, read when xq is null
  int64_t x_row_stride;
  int64_t x_blocks_per_row;
  X* out;
  int64_t out_row_stride;
  int n, blocks_per_row, m;
};

constexpr int kGemvThreads = 256;
// Weight blocks per lane whose loads are issued before the first dot. (Four, with
// one quant word per lane instead of two, measured 25-35% slower on the H200:
// the GEMV is bound by instructions per weight byte, not by bytes in flight.)
template <int kRows>
inline constexpr int kGemvDepth = 2;

// x's XBlocks of all rows in shared memory up to this size: each block then quantizes
// x itself (a few KB read from L2 by every block) instead of a separate launch
// before the GEMV, which in a decode step costs more than the reads (one launch per
// block-weight MatMul). At 24 KB an SM still holds 9 blocks (its 228 KB), more than
// the GEMV's registers allow; it covers one row up to K = 19,660, four rows up to
// 4,915, eight up to 2,457; larger x takes the separate launch.
constexpr int64_t kGemvSharedXMaxBytes = 24 * 1024;

// kXShared: x quantized by the block into dynamic shared memory (p.xq unused).
template <typename Lane, typename X, int kRows, bool kXShared>
__global__ void __launch_bounds__(kGemvThreads, kRows <= 4 ? 4 : 2) QuantGemvKernel(QuantGemvParams<X> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  extern __shared__ uint4 gemv_shared[];
  const XBlock* xq = p.xq;
  if constexpr (kXShared) {
    auto* shared_x = reinterpret_cast<XBlock*>(gemv_shared);
    QuantizeXRows(p.x, p.x_row_stride, p.x_blocks_per_row, p.m * p.x_blocks_per_row, shared_x, threadIdx.x, blockDim.x);
    __syncthreads();
    xq = shared_x;
  }
  constexpr int kBlocksPerStep = kWarpSize / Lane::kLanes;
  constexpr int kXPerBlock = Lane::kValues / kXBlockValues;
  constexpr int kDepth = kGemvDepth<kRows>;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warps_per_block = static_cast<int>(blockDim.x) / kWarpSize;
  const int sub = lane / Lane::kLanes, t = lane % Lane::kLanes;
  for (int column = static_cast<int>(blockIdx.x) * warps_per_block + static_cast<int>(threadIdx.x) / kWarpSize;
       column < p.n; column += static_cast<int>(gridDim.x) * warps_per_block) {
    const uint8_t* w_row = p.w + static_cast<int64_t>(column) * p.w_row_bytes;
    float acc[kRows] = {};
    for (int base = sub; base < p.blocks_per_row; base += kDepth * kBlocksPerStep) {
      Lane lanes[kDepth];
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
        const int b = base + u * kBlocksPerStep;
        if (b < p.blocks_per_row) lanes[u].Load(w_row + static_cast<int64_t>(b) * Lane::kBytes, t);
      }
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
        const int b = base + u * kBlocksPerStep;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < p.m && b < p.blocks_per_row) {
            acc[r] += lanes[u].Dot(xq + r * p.x_blocks_per_row + static_cast<int64_t>(b) * kXPerBlock, t);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r < p.m) {  // uniform across the warp
        const float sum = WarpSum(acc[r]);
        if (lane == 0) p.out[r * p.out_row_stride + column] = FromFloat<X>(sum);
      }
    }
  }
}

// One wave of the blocks the device holds, columns spread evenly over its warps.
template <typename Lane, typename X, int kRows, bool kXShared>
void LaunchQuantGemvRows(const QuantGemvParams<X>& p, Device device, gpuStream_t stream) {
  const auto kernel = &QuantGemvKernel<Lane, X, kRows, kXShared>;
  const size_t shared_bytes = kXShared ? static_cast<size_t>(p.m * p.x_blocks_per_row) * sizeof(XBlock) : 0;
  const int warps_per_block = kGemvThreads / WarpSize(device);
  const int64_t resident =
      static_cast<int64_t>(MultiprocessorCount(device)) *
      ResidentBlocksPerMultiprocessor(reinterpret_cast<const void*>(kernel), kGemvThreads, device, shared_bytes);
  const int64_t needed = GridFor(p.n, warps_per_block, "MatMul");
  const int64_t rounds = (needed + resident - 1) / resident;
  LaunchKernel(kernel, static_cast<unsigned>((needed + rounds - 1) / rounds), kGemvThreads, shared_bytes, stream, p);
}

template <typename Lane, typename X, bool kXShared>
void LaunchQuantGemv(const QuantGemvParams<X>& p, Device device, gpuStream_t stream) {
  if (p.m == 1) {
    LaunchQuantGemvRows<Lane, X, 1, kXShared>(p, device, stream);
  } else if (p.m <= 2) {
    LaunchQuantGemvRows<Lane, X, 2, kXShared>(p, device, stream);
  } else if (p.m <= 4) {
    LaunchQuantGemvRows<Lane, X, 4, kXShared>(p, device, stream);
  } else {
    static_assert(kQuantGemvMaxRows == 8, "the row templates cover 1 to kQuantGemvMaxRows");
    LaunchQuantGemvRows<Lane, X, 8, kXShared>(p, device, stream);
  }
}

// ---- dequantization for the BLAS route ----------------------------------------------

constexpr int kDequantChunk = 8;  // consecutive values per thread: one or two 16-byte stores

// Thread i decodes values [8j, 8j + 8) of one row (K is a multiple of 32, so they are
// in one block); the dtype is a template argument, so DequantElement's switch folds.
template <typename T, DType kDType>
__global__ void DequantizeRowsKernel(const uint8_t* w, int64_t w_row_bytes, int64_t row0, int64_t rows, int64_t k,
                                     T* out, int64_t out_row_stride) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t chunks_per_row = k / kDequantChunk, total = rows * chunks_per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks_per_row, c = (i % chunks_per_row) * kDequantChunk;
    const uint8_t* row = w + (row0 + r) * w_row_bytes;
    T values[kDequantChunk];
#pragma unroll
    for (int j = 0; j < kDequantChunk; ++j) values[j] = FromFloat<T>(DequantElement(row, kDType, c + j));
    constexpr int kVectors = kDequantChunk * static_cast<int>(sizeof(T)) / 16;  // 16-byte stores per thread
    auto* dst = reinterpret_cast<uint4*>(out + r * out_row_stride + c);
    const auto* src = reinterpret_cast<const uint4*>(values);
#pragma unroll
    for (int v = 0; v < kVectors; ++v) dst[v] = src[v];
  }
}

// A tile: 2048 values of one row (8 super-blocks of 256, 64 blocks of 32), whose
// bytes are a multiple of 16 in every format (Q8_0 2176, Q4_0 / Q4_K 1152, Q5_K 1408,
// Q6_K 1680). A block of 256 threads decodes 8 values a thread: one or two 16-byte
// stores of bf16 / f16, four of f32.
constexpr std::string_view kDequantizeVariantFamily = "gpu.dequantize";
constexpr int64_t kDequantTileValues = 2048;
constexpr int kDequantTileThreads = kDequantTileValues / kDequantChunk;
constexpr int kDequantTileMaxBytes = 2176;  // Q8_0's, the widest format per value

template <typename T, DType kDType>
__global__ void __launch_bounds__(kDequantTileThreads)
    DequantizeTilesKernel(const uint8_t* w, int64_t w_row_bytes, int64_t row0, int64_t rows, int64_t k,
                          int tile_bytes, T* out, int64_t out_row_stride) {
  __shared__ uint4 tile_vectors[kDequantTileMaxBytes / 16];  // 16-byte aligned
  const auto* tile = reinterpret_cast<const uint8_t*>(tile_vectors);
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t tiles_per_row = k / kDequantTileValues, total = rows * tiles_per_row;
  const int vectors = tile_bytes / 16;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t r = t / tiles_per_row, first = (t % tiles_per_row) * kDequantTileValues;
    const uint8_t* row = w + (row0 + r) * w_row_bytes;
    const auto* src = reinterpret_cast<const uint4*>(row + (first / kDequantTileValues) * tile_bytes);
    __syncthreads();  // the previous tile has been decoded
    for (int v = static_cast<int>(threadIdx.x); v < vectors; v += kDequantTileThreads) {
      tile_vectors[v] = src[v];
    }
    __syncthreads();
    const int c = static_cast<int>(threadIdx.x) * kDequantChunk;
    T values[kDequantChunk];
#pragma unroll
    for (int j = 0; j < kDequantChunk; ++j) values[j] = FromFloat<T>(DequantElement(tile, kDType, c + j));
    constexpr int kVectors = kDequantChunk * static_cast<int>(sizeof(T)) / 16;
    auto* dst = reinterpret_cast<uint4*>(out + r * out_row_stride + first + c);
    const auto* packed = reinterpret_cast<const uint4*>(values);
#pragma unroll
    for (int v = 0; v < kVectors; ++v) dst[v] = packed[v];
  }
}

// Calls fn(integral_constant<DType, dtype>) for the block dtypes MatMul accepts.
template <typename Fn>
void DispatchBlockDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kQ8_0: fn(std::integral_constant<DType, DType::kQ8_0>{}); return;
    case DType::kQ4_0: fn(std::integral_constant<DType, DType::kQ4_0>{}); return;
    case DType::kQ4_K: fn(std::integral_constant<DType, DType::kQ4_K>{}); return;
    case DType::kQ5_K: fn(std::integral_constant<DType, DType::kQ5_K>{}); return;
    case DType::kQ6_K: fn(std::integral_constant<DType, DType::kQ6_K>{}); return;
    default: throw Error(std::string("vt::MatMul: internal error: no GPU dequantization of ") + DTypeName(dtype));
  }
}

}  // namespace

bool QuantLanesRead(const Tensor& w) {
  const DType dtype = w.dtype();
  if (!DispatchQuantLane(dtype, [](auto) {})) return false;
  // Q4_K / Q5_K read 4-byte words: every row must start on 4 bytes (every real
  // layout does: blocks of 144 / 176 bytes in storage aligned to at least 32).
  if (dtype == DType::kQ4_K || dtype == DType::kQ5_K) {
    if (reinterpret_cast<uintptr_t>(w.data()) % 4 != 0) return false;
    for (int d = 0; d + 1 < w.ndim(); ++d) {
      if (w.size(d) > 1 && BytesFor(dtype, w.stride(d)) % 4 != 0) return false;
    }
  }
  const int64_t k = w.size(-1);
  return k % kXBlockValues == 0 && k / Info(dtype).block_elems <= INT32_MAX;
}

bool QuantGemvAccepts(const MatMulArgs& a) { return QuantLanesRead(a.w) && a.w.size(0) <= INT32_MAX; }

Tensor QuantizeActivations(const Tensor& x) {
  const int64_t m = x.size(0), k = x.size(1);
  const int64_t blocks_per_row = k / kXBlockValues;
  // XBlock is 40 bytes: a [M, K/32, 10] i32 tensor holds them.
  Tensor out = Tensor::Empty({m, blocks_per_row, static_cast<int64_t>(sizeof(XBlock) / 4)}, DType::kI32, x.device());
  gpuStream_t stream = PrepareDevice(x.device());
  DispatchFloat(x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    const int64_t num_blocks = m * blocks_per_row;
    LaunchKernel(QuantizeRowsKernel<X>, GridFor(num_blocks * kXQuantThreadsPerBlock, kQuantizeThreads, "MatMul"),
                 kQuantizeThreads, 0, stream, static_cast<const X*>(x.data()), x.stride(0), blocks_per_row, num_blocks,
                 static_cast<XBlock*>(out.data()));
  });
  CheckLaunch("MatMul");
  return out;
}

void RunQuantGemv(const MatMulArgs& a) {
  const int64_t k = a.x.size(1);
  const bool x_shared = a.x.size(0) * (k / kXBlockValues) * static_cast<int64_t>(sizeof(XBlock)) <= kGemvSharedXMaxBytes;
  reach::Hit(x_shared ? "MatMulGpu.quant_gemv.x_shared" : "MatMulGpu.quant_gemv.x_separate");
  const Tensor xq = x_shared ? Tensor() : QuantizeActivations(a.x);
  gpuStream_t stream = PrepareDevice(a.out.device());
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    QuantGemvParams<X> p{static_cast<const uint8_t*>(a.w.data()),
                         BytesFor(a.w.dtype(), a.w.stride(0)),
                         x_shared ? nullptr : static_cast<const XBlock*>(xq.data()),
                         static_cast<const X*>(a.x.data()),
                         a.x.stride(0),
                         k / kXBlockValues,
                         static_cast<X*>(a.out.data()),
                         a.out.stride(0),
                         static_cast<int>(a.w.size(0)),
                         static_cast<int>(k / Info(a.w.dtype()).block_elems),
                         static_cast<int>(a.x.size(0))};
    DispatchQuantLane(a.w.dtype(), [&](auto lane) {
      if (x_shared) {
        LaunchQuantGemv<decltype(lane), X, true>(p, a.out.device(), stream);
      } else {
        LaunchQuantGemv<decltype(lane), X, false>(p, a.out.device(), stream);
      }
    });
  });
  CheckLaunch("MatMul");
}

void DequantizeWeightRows(const Tensor& w, int64_t row0, const Tensor& out) {
  gpuStream_t stream = PrepareDevice(out.device());
  const int64_t rows = out.size(0), k = out.size(1);
  const bool aligned = reinterpret_cast<uintptr_t>(out.data()) % 16 == 0 &&
                       (rows == 1 || (out.stride(0) * BytesFor(out.dtype(), 1)) % 16 == 0);
  if (k % kXBlockValues != 0 || !aligned) {
    throw Error("vt::MatMul on " + out.device().ToString() + ": internal error: dequantizing into " + out.Describe() +
                " (needs K a multiple of 32 and 16-byte aligned rows)");
  }
  const int64_t w_row_bytes = BytesFor(w.dtype(), w.stride(0)), tile_bytes = BytesFor(w.dtype(), kDequantTileValues);
  const std::string variant = tuning::Variant(kDequantizeVariantFamily);
  if (!variant.empty() && variant != "elements" && variant != "tiles") {
    throw Error("vt::MatMul: unknown variant '" + variant + "' forced for " + std::string(kDequantizeVariantFamily) +
                " (known: elements, tiles)");
  }
  const bool tiles = variant == "tiles" && k % kDequantTileValues == 0 && tile_bytes % 16 == 0 &&
                     tile_bytes <= kDequantTileMaxBytes && reinterpret_cast<uintptr_t>(w.data()) % 16 == 0 &&
                     (rows == 1 || w_row_bytes % 16 == 0);
  reach::Hit(tiles ? "MatMulGpu.dequantize.tiles" : "MatMulGpu.dequantize.elements");
  DispatchFloat(out.dtype(), "MatMul", [&](auto tag) {
    using T = decltype(tag);
    DispatchBlockDType(w.dtype(), [&](auto dtype) {
      if (tiles) {
        const int64_t total = rows * (k / kDequantTileValues);
        const unsigned cap = static_cast<unsigned>(MultiprocessorCount(out.device())) * 8u;
        LaunchKernel(DequantizeTilesKernel<T, decltype(dtype)::value>,
                     static_cast<unsigned>(std::min<int64_t>(total, cap)), kDequantTileThreads, 0, stream,
                     static_cast<const uint8_t*>(w.data()), w_row_bytes, row0, rows, k, static_cast<int>(tile_bytes),
                     static_cast<T*>(out.data()), out.stride(0));
        return;
      }
      LaunchKernel(DequantizeRowsKernel<T, decltype(dtype)::value>,
                   GridStrideBlocks(rows * k / kDequantChunk, out.device(), "MatMul"), kElementwiseThreads, 0, stream,
                   static_cast<const uint8_t*>(w.data()), BytesFor(w.dtype(), w.stride(0)), row0, rows, k,
                   static_cast<T*>(out.data()), out.stride(0));
    });
  });
  CheckLaunch("MatMul");
}

}  // namespace vt::gpu
