// The one place that picks a MatMul kernel for a shape (out[M,N] = x[M,K] . w[N,K]^T).
//
//   kSkinnyVectorLoads    M <= kSkinnyMaxRows (decode) with f32 weights and x whose
//                         rows start on 16 bytes: one warp per output column
//                         streams its weight row in 16-byte loads and dots it with
//                         every x row; weight bytes dominate, so this is the
//                         bandwidth path of f32 decode.
//   kQuantGemv            GGUF block weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) at
//                         M <= kQuantGemvBeforeTilesRows, and up to kQuantGemvMaxRows
//                         where the pipelined tiles do not apply (Q6_K, HIP, K not a
//                         multiple of 256): x quantized to 8 bits per 32
//                         values, each weight block read once for all M rows and
//                         dotted on the int8 dot-product units (matmul_quant.cu).
//   kQuantGemvStaged      CUDA, Q8_0 / Q4_0 / Q4_K / Q5_K weights at M <=
//                         kQuantGemvBeforeTilesRows with N >= kQuantGemvStagedMinColumns
//                         (and up to kQuantGemvStagedWideRows rows from
//                         kQuantGemvStagedWideColumns),
//                         K a multiple of 256 and 16-byte aligned rows (every such
//                         model's decode): 16 weight rows at a time copied into shared
//                         memory in 16-byte pieces, two lanes per output column decoding
//                         their blocks from registers (matmul_quant_staged.cu); the
//                         lanes above read the blocks from global memory in 2- and
//                         4-byte words.
//   kSkinnyWarpPerColumn  other decode shapes (block formats without a lane type,
//                         odd K or unaligned rows): the same walk one element per
//                         lane, decoding block formats in registers.
//   kSkinnyLoadsInFlight  decode shapes with f16/bf16 weights (x any float dtype),
//                         rows aligned (every bf16/f16 model's decode): the
//                         vector-load walk with the row count a template constant
//                         (few registers, so full occupancy), four 16-byte weight
//                         loads in flight per lane, and a grid of the device's
//                         resident warps walking the columns.
//   kQuantMma             CUDA, block weights the int8 tensor-core tiles decode
//                         (Q8_0, Q4_0, Q4_K, Q5_K) from kQuantGemvBeforeTilesRows + 1
//                         (pipelined kernel) or kQuantGemvMaxRows + 1 (other shapes) to
//                         kQuantMmaMaxRows rows: x quantized per 32 values, each
//                         weight block decoded once per row tile into int8 in shared
//                         memory, mma.m16n8k32 (matmul_quant_mma.cu, quant_mma.cuh).
//   kTiledShared          anything else: 64x64 output tiles, 16-deep k slices of x
//                         and w staged in shared memory as f32 (block-format
//                         weights decoded on the way in), 4x4 outputs per thread.
//   kVendorBlas           CUDA only: cuBLAS for large dense GEMMs whose x and w have
//                         the same float dtype (f32 computes in true f32, no TF32).
//   kDequantVendorBlas    CUDA only: block weights at larger M, decoded chunk by
//                         chunk into x's dtype and multiplied by cuBLAS (the tiled
//                         kernel decodes every element 64 times over).
//   kCastVendorBlas       CUDA only: float weights of another dtype than x (the f32
//                         router and shared-expert gate of a GGUF with bf16
//                         activations) above the decode rows: the 16-bit operand
//                         widened to f32, cuBLAS in true f32, the f32 result
//                         narrowed to out's dtype (the same f32 products as the
//                         tiled kernel, without its K-long walk per block).
// Every kernel accepts every shape, dtype pair and stride the MatMul contract allows,
// so the choice is about speed only; ROCm (no BLAS packaged) never gets kVendorBlas.
// Unit-tested at its boundaries in tests/vt/gpu/matmul_choice_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vt/error.h"

namespace vt::gpu {

enum class MatMulKernel {
  kSkinnyVectorLoads,
  kSkinnyWarpPerColumn,
  kSkinnyLoadsInFlight,
  kQuantGemv,
  kTiledShared,
  kVendorBlas,
  kDequantVendorBlas,
  kQuantMma,
  kCastVendorBlas,
  kQuantGemvStaged,
};

struct MatMulShape {
  int64_t m = 0, n = 0, k = 0;
  bool weight_is_block = false;    // a GGUF block dtype
  bool weight_matches_x = false;   // same float dtype as x (and out)
  bool vendor_blas_available = false;
  bool rows_16_byte_aligned = false;  // every row of x and w starts on 16 bytes and K fills whole 16-byte vectors
  bool weight_is_16_bit = false;      // f16 or bf16 weights
  bool quant_gemv_accepts = false;    // a block format kQuantGemv decodes, rows aligned as it reads them
  bool quant_mma_accepts = false;     // a block format kQuantMma decodes, on a device with mma.sync (CUDA)
  bool quant_mma_pipelined = false;   // ...and its pipelined kernel takes the shape (K a multiple of 256,
                                      // 16-byte aligned weight rows, M <= 16)
  bool quant_gemv_staged = false;     // kQuantGemvStaged takes the shape (CUDA, a format it reads, K a multiple
                                      // of 256, 16-byte aligned weight rows, M <= kQuantGemvStagedMaxRows)
};

inline constexpr int64_t kSkinnyMaxRows = 8;
// Up to here the int8 GEMV beats decoding the weights for cuBLAS on an H200
// (Q8_0 24576 x 4096: GEMV 152 us at 8 rows, 326 at 16; decode + cuBLAS 206 us
// from 9 to 64 rows; bench/README.md); the GEMV's time grows with the rows (its
// x loads and dp4a per row), the dense route's hardly.
inline constexpr int64_t kQuantGemvMaxRows = 8;
// Up to here the GEMV beats the pipelined int8 tiles, which take 3..16 rows where
// they apply (matmul_quant_mma.cu). Measured on the H200 (Q8_0 24576 x 4096,
// vt_gpu_bench): GEMV 44 us at 1 row, 77 at 4, 161 at 8; the tiles' time hardly
// depends on the rows (70 us at 4, 72 at 16, before their shared-memory traffic was
// cut: bench/README.md has the later figures).
inline constexpr int64_t kQuantGemvBeforeTilesRows = 2;
// The rows the staged GEMV's kernel instances cover (forced by the
// "quant_gemv_staged" variant up to here; chosen up to kQuantGemvBeforeTilesRows).
inline constexpr int64_t kQuantGemvStagedMaxRows = 8;
// A block of the staged GEMV owns 16 columns at a time and walks all of K, so narrow
// weights leave SMs idle (N / 16 column groups; 132 SMs on an H200): below this N the
// lanes' GEMV, whose pairs of warps split K, keeps them. Measured on the H200 with the
// first (32-column) version: N 2048 K 4096 8.3 us both ways.
inline constexpr int64_t kQuantGemvStagedMinColumns = 4096;
// Wide weights keep the staged GEMV to this many rows, where it beats the pipelined
// tiles: measured on the H200 (vt_gpu_bench, N 24576 K 4096, 4 rows): Q8_0 47.8 us
// against 57.5, Q4_K 45.3 against 77.0; at 8 rows the tiles win (Q8_0 56.3 against
// 73.0). Narrower weights at 3..4 rows were not measured and keep the tiles.
inline constexpr int64_t kQuantGemvStagedWideRows = 4;
inline constexpr int64_t kQuantGemvStagedWideColumns = 8192;
// From kQuantGemvMaxRows + 1 rows to here the int8 tensor-core tiles beat decoding
// the weights for cuBLAS: they read each weight block once per row tile and never
// write a decoded copy. Measured on the H200 (Q8_0 24576 x 4096, vt_gpu_bench):
// 16 rows 103 us against 202; the 64-row tiles stay near 80 TFLOP/s (17 rows 164
// against 202, 64 rows 186 against 205, 256 rows 655 against 226), so from 17 rows
// cuBLAS's tiles on the decoded weights are as fast or faster.
inline constexpr int64_t kQuantMmaMaxRows = 16;
// Up to here the tiles are 16 rows (one warp row), above 64 (matmul_quant_mma.cu).
inline constexpr int64_t kQuantMmaSmallTileRows = 16;
// Below this many multiply-adds our tiled kernel is as fast as a library call, and
// keeping it on the route keeps it exercised on CUDA too...
inline constexpr int64_t kVendorBlasMinMacs = int64_t{1} << 24;
// ...unless K is this long: a tiled block walks all of K in 16-deep slices, so few
// output tiles with a long K are latency-bound. Measured on the H200 (ncu, the
// 35B-A3B router N 256, K 2048, and its shared-expert gate N 1): 502 us at 16 rows
// (8.4M multiply-adds, 4 blocks), 253 us for N 1; cuBLAS takes such shapes in
// microseconds.
inline constexpr int64_t kTiledSharedMaxK = 1024;

inline MatMulKernel ChooseMatMul(const MatMulShape& s) {
  if (s.weight_is_block) {
    if (s.quant_gemv_staged && ((s.m <= kQuantGemvBeforeTilesRows && s.n >= kQuantGemvStagedMinColumns) ||
                                (s.m <= kQuantGemvStagedWideRows && s.n >= kQuantGemvStagedWideColumns))) {
      return MatMulKernel::kQuantGemvStaged;
    }
    if (s.quant_gemv_accepts && s.m <= kQuantGemvBeforeTilesRows) return MatMulKernel::kQuantGemv;
    if (s.quant_mma_accepts && s.quant_mma_pipelined && s.m <= kQuantMmaMaxRows) return MatMulKernel::kQuantMma;
    if (s.quant_gemv_accepts && s.m <= kQuantGemvMaxRows) return MatMulKernel::kQuantGemv;
    if (s.m <= kSkinnyMaxRows) return MatMulKernel::kSkinnyWarpPerColumn;
    if (s.quant_mma_accepts && s.m <= kQuantMmaMaxRows) return MatMulKernel::kQuantMma;
    return s.vendor_blas_available ? MatMulKernel::kDequantVendorBlas : MatMulKernel::kTiledShared;
  }
  if (s.m <= kSkinnyMaxRows) {
    if (s.weight_is_block || !s.rows_16_byte_aligned) return MatMulKernel::kSkinnyWarpPerColumn;
    // 16-bit weights (every bf16/f16 model): measured on the H200, 9B-shape decode
    // GEMVs 0.37 -> 0.72 of the copy bandwidth (bench/gpu_notes.md, final run).
    return s.weight_is_16_bit ? MatMulKernel::kSkinnyLoadsInFlight : MatMulKernel::kSkinnyVectorLoads;
  }
  if (s.vendor_blas_available && (s.m * s.n * s.k >= kVendorBlasMinMacs || s.k >= kTiledSharedMaxK)) {
    return s.weight_matches_x ? MatMulKernel::kVendorBlas : MatMulKernel::kCastVendorBlas;
  }
  return MatMulKernel::kTiledShared;
}

// The vt::tuning family whose override picks the decode (M <= kSkinnyMaxRows)
// kernel, for benchmarks and tests that compare the variants in one process:
//   "vector_loads"     kSkinnyVectorLoads (needs float weights and aligned rows)
//   "warp_per_column"  kSkinnyWarpPerColumn (accepts every decode shape)
//   "loads_in_flight"  kSkinnyLoadsInFlight (needs f16/bf16 weights and aligned rows)
//   "quant_gemv"       kQuantGemv (block weights it decodes, M <= kQuantGemvMaxRows)
//   "quant_gemv_staged" kQuantGemvStaged (where it takes the shape, any N)
inline constexpr std::string_view kSkinnyVariantFamily = "gpu.matmul_skinny";

// `chosen` (ChooseMatMul's kernel) replaced by the forced `variant` where the shape
// is a decode shape the variant accepts; "" keeps `chosen`. Throws for an unknown name.
inline MatMulKernel ApplySkinnyVariant(MatMulKernel chosen, const MatMulShape& s, std::string_view variant) {
  if (variant.empty()) return chosen;
  const bool float_aligned = !s.weight_is_block && s.rows_16_byte_aligned;
  MatMulKernel forced;
  bool accepted;
  int64_t max_rows = kSkinnyMaxRows;
  if (variant == "vector_loads") {
    forced = MatMulKernel::kSkinnyVectorLoads;
    accepted = float_aligned;
  } else if (variant == "warp_per_column") {
    forced = MatMulKernel::kSkinnyWarpPerColumn;
    accepted = true;
  } else if (variant == "loads_in_flight") {
    forced = MatMulKernel::kSkinnyLoadsInFlight;
    accepted = float_aligned && s.weight_is_16_bit;
  } else if (variant == "quant_gemv") {
    forced = MatMulKernel::kQuantGemv;
    accepted = s.weight_is_block && s.quant_gemv_accepts;
    max_rows = kQuantGemvMaxRows;
  } else if (variant == "quant_gemv_staged") {
    forced = MatMulKernel::kQuantGemvStaged;
    accepted = s.weight_is_block && s.quant_gemv_staged;
    max_rows = kQuantGemvStagedMaxRows;
  } else {
    throw Error("vt::MatMul: unknown variant '" + std::string(variant) + "' forced for " +
                std::string(kSkinnyVariantFamily) + " (known: vector_loads, warp_per_column, loads_in_flight, quant_gemv, quant_gemv_staged)");
  }
  return s.m <= max_rows && accepted ? forced : chosen;
}

// The vt::tuning family whose override picks the route of block weights, for the
// benchmarks that place kQuantGemvMaxRows and kQuantMmaMaxRows:
//   "quant_mma"     kQuantMma (where quant_mma_accepts), at any M: its pipelined
//                   kernel takes the decode rows too
//   "dequant_blas"  kDequantVendorBlas (where a vendor library is available) above
//                   the decode rows
inline constexpr std::string_view kBlockVariantFamily = "gpu.matmul_block";

inline MatMulKernel ApplyBlockVariant(MatMulKernel chosen, const MatMulShape& s, std::string_view variant) {
  if (variant.empty()) return chosen;
  MatMulKernel forced;
  bool accepted;
  if (variant == "quant_mma") {
    forced = MatMulKernel::kQuantMma;
    accepted = s.quant_mma_accepts;
  } else if (variant == "dequant_blas") {
    forced = MatMulKernel::kDequantVendorBlas;
    accepted = s.vendor_blas_available;
  } else {
    throw Error("vt::MatMul: unknown variant '" + std::string(variant) + "' forced for " +
                std::string(kBlockVariantFamily) + " (known: quant_mma, dequant_blas)");
  }
  const bool rows_fit = s.m > kSkinnyMaxRows || forced == MatMulKernel::kQuantMma;
  return s.weight_is_block && rows_fit && accepted ? forced : chosen;
}

}  // namespace vt::gpu
