// The GPU MatMul kernel choice (src/vt/gpu/matmul_choice.h) at its boundaries,
// without a GPU.
#include "vt/gpu/matmul_choice.h"

#include <gtest/gtest.h>

namespace vt::gpu {
namespace {

MatMulShape Dense(int64_t m, int64_t n, int64_t k, bool vendor, bool aligned = true) {
  return MatMulShape{m, n, k, false, true, vendor, aligned};
}

TEST(MatMulChoiceTest, DecodeRowsTakeASkinnyKernelOnEveryBackend) {
  for (bool vendor : {false, true}) {
    for (int64_t m = 1; m <= kSkinnyMaxRows; ++m) {
      EXPECT_EQ(ChooseMatMul(Dense(m, 4096, 4096, vendor)), MatMulKernel::kSkinnyVectorLoads) << m;
      MatMulShape bf16 = Dense(m, 4096, 4096, vendor);
      bf16.weight_is_16_bit = true;
      EXPECT_EQ(ChooseMatMul(bf16), MatMulKernel::kSkinnyLoadsInFlight) << m;
      bf16.rows_16_byte_aligned = false;
      EXPECT_EQ(ChooseMatMul(bf16), MatMulKernel::kSkinnyWarpPerColumn) << m;
      EXPECT_EQ(ChooseMatMul(Dense(m, 4096, 4097, vendor, false)), MatMulKernel::kSkinnyWarpPerColumn) << m;
      // Block-format weights always take the element-wise walk (decoded in registers).
      EXPECT_EQ(ChooseMatMul(MatMulShape{m, 4096, 4096, true, false, vendor, true}),
                MatMulKernel::kSkinnyWarpPerColumn);
    }
    EXPECT_EQ(ChooseMatMul(Dense(kSkinnyMaxRows + 1, 64, 64, vendor)), MatMulKernel::kTiledShared);
  }
}

TEST(MatMulChoiceTest, VendorBlasOnlyForLargeDenseSameDtypeProducts) {
  const int64_t m = 64, n = 512;
  const int64_t k_at_threshold = kVendorBlasMinMacs / (m * n);
  EXPECT_EQ(ChooseMatMul(Dense(m, n, k_at_threshold, true)), MatMulKernel::kVendorBlas);
  EXPECT_EQ(ChooseMatMul(Dense(m, n, k_at_threshold - 1, true)), MatMulKernel::kTiledShared);
  EXPECT_EQ(ChooseMatMul(Dense(m, n, k_at_threshold, false)), MatMulKernel::kTiledShared);  // ROCm
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, n, 4096, true, false, true}), MatMulKernel::kDequantVendorBlas);  // block weights
  // Float weights of another dtype than x (x f32 with w bf16, or the f32 router of a
  // GGUF with bf16 x): widened to f32 for cuBLAS; the tiled kernel without a library.
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, n, 4096, false, false, true}), MatMulKernel::kCastVendorBlas);
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, n, 4096, false, false, false}), MatMulKernel::kTiledShared);
}

// A long K sends even small products to the library: the tiled kernel's blocks walk
// all of K (the 35B-A3B router, 16 x 256 x 2048, took 502 us on it).
TEST(MatMulChoiceTest, LongKSkipsTheTiledKernelWhereALibraryIsAvailable) {
  const int64_t m = kSkinnyMaxRows + 1;
  ASSERT_LT(m * 256 * kTiledSharedMaxK, kVendorBlasMinMacs);
  EXPECT_EQ(ChooseMatMul(Dense(m, 256, kTiledSharedMaxK, true)), MatMulKernel::kVendorBlas);
  EXPECT_EQ(ChooseMatMul(Dense(m, 256, kTiledSharedMaxK - 1, true)), MatMulKernel::kTiledShared);
  EXPECT_EQ(ChooseMatMul(Dense(m, 256, kTiledSharedMaxK, false)), MatMulKernel::kTiledShared);
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, 1, kTiledSharedMaxK, false, false, true}), MatMulKernel::kCastVendorBlas);
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, 256, kTiledSharedMaxK - 1, false, false, true}), MatMulKernel::kTiledShared);
}

TEST(MatMulChoiceTest, WithoutAVendorLibraryNothingRoutesToIt) {
  for (int64_t m : {1, 8, 9, 64, 4096}) {
    for (bool block : {false, true}) {
      for (bool quant_gemv : {false, true}) {
        MatMulShape shape{m, 8192, 8192, block, !block, false};
        shape.quant_gemv_accepts = block && quant_gemv;
        EXPECT_NE(ChooseMatMul(shape), MatMulKernel::kVendorBlas);
        EXPECT_NE(ChooseMatMul(shape), MatMulKernel::kDequantVendorBlas);
      }
    }
  }
}

// Block weights: the int8 GEMV up to kQuantGemvMaxRows rows where it decodes the
// format, then a dense GEMM on decoded weights (CUDA) or the tiled kernel (ROCm).
TEST(MatMulChoiceTest, BlockWeightsTakeTheQuantGemvUpToItsRowLimit) {
  for (bool vendor : {false, true}) {
    MatMulShape q{1, 4096, 4096, true, false, vendor, false};
    q.quant_gemv_accepts = true;
    for (q.m = 1; q.m <= kQuantGemvMaxRows; ++q.m) EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemv) << q.m;
    q.m = kQuantGemvMaxRows + 1;
    const MatMulKernel large = vendor ? MatMulKernel::kDequantVendorBlas : MatMulKernel::kTiledShared;
    EXPECT_EQ(ChooseMatMul(q), large);
    q.m = 4096;
    EXPECT_EQ(ChooseMatMul(q), large);
    // A format (or layout) the GEMV does not decode: the element-wise walk at decode.
    q.quant_gemv_accepts = false;
    q.m = kSkinnyMaxRows;
    EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kSkinnyWarpPerColumn);
    q.m = kSkinnyMaxRows + 1;
    EXPECT_EQ(ChooseMatMul(q), large);
  }
}

// Where the int8 tensor-core tiles decode the format (CUDA): the pipelined kernel
// from kQuantGemvBeforeTilesRows + 1 rows where it applies, else from the GEMV's limit,
// to kQuantMmaMaxRows, then the dense route.
TEST(MatMulChoiceTest, BlockWeightsTakeTheInt8TilesBetweenTheGemvAndTheDenseRoute) {
  for (bool vendor : {false, true}) {
    for (bool pipelined : {false, true}) {
      MatMulShape q{1, 4096, 4096, true, false, vendor, false};
      q.quant_gemv_accepts = true;
      q.quant_mma_accepts = true;
      q.quant_mma_pipelined = pipelined;
      q.m = kQuantGemvBeforeTilesRows;
      EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemv);
      q.m = kQuantGemvBeforeTilesRows + 1;
      EXPECT_EQ(ChooseMatMul(q), pipelined ? MatMulKernel::kQuantMma : MatMulKernel::kQuantGemv);
      q.m = kQuantGemvMaxRows;
      EXPECT_EQ(ChooseMatMul(q), pipelined ? MatMulKernel::kQuantMma : MatMulKernel::kQuantGemv);
      for (int64_t m : {kQuantGemvMaxRows + 1, kQuantMmaMaxRows}) {
        q.m = m;
        EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantMma) << m;
      }
      q.m = kQuantMmaMaxRows + 1;
      EXPECT_EQ(ChooseMatMul(q), vendor ? MatMulKernel::kDequantVendorBlas : MatMulKernel::kTiledShared);
      q.quant_mma_accepts = false;  // HIP, or Q6_K: the GEMV keeps the decode rows
      q.m = kQuantGemvMaxRows;
      EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemv);
      q.quant_gemv_accepts = false;  // a format the GEMV does not read: the element walk at decode
      q.m = kSkinnyMaxRows;
      EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kSkinnyWarpPerColumn);
    }
  }
}

// Block weights where the staged GEMV takes the shape (CUDA, Q8_0 / Q4_0 / Q4_K /
// Q5_K, K a multiple of 256, aligned rows): it replaces the lanes' GEMV up to kQuantGemvBeforeTilesRows rows from
// kQuantGemvStagedMinColumns columns, and the int8 tiles up to kQuantGemvStagedWideRows rows from
// kQuantGemvStagedWideColumns; narrower weights and more rows keep their
// kernels; forced ("quant_gemv_staged") it runs up to kQuantGemvStagedMaxRows at any N.
TEST(MatMulChoiceTest, BlockDecodeTakesTheStagedGemvFromItsColumnCount) {
  MatMulShape q{1, kQuantGemvStagedMinColumns, 4096, true, false, true, false};
  q.quant_gemv_accepts = true;
  q.quant_mma_accepts = true;
  q.quant_mma_pipelined = true;
  q.quant_gemv_staged = true;
  for (q.m = 1; q.m <= kQuantGemvBeforeTilesRows; ++q.m) EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemvStaged) << q.m;
  q.m = kQuantGemvBeforeTilesRows + 1;
  EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantMma);
  // Wide weights keep it to kQuantGemvStagedWideRows rows.
  q.n = kQuantGemvStagedWideColumns;
  for (q.m = 1; q.m <= kQuantGemvStagedWideRows; ++q.m) EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemvStaged) << q.m;
  q.m = kQuantGemvStagedWideRows + 1;
  EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantMma);
  q.n = kQuantGemvStagedWideColumns - 1;
  q.m = kQuantGemvStagedWideRows;
  EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantMma);
  q.m = 1;
  q.n = kQuantGemvStagedMinColumns - 1;
  EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemv);
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(q), q, "quant_gemv_staged"), MatMulKernel::kQuantGemvStaged);
  q.m = kQuantGemvStagedMaxRows;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(q), q, "quant_gemv_staged"), MatMulKernel::kQuantGemvStaged);
  q.m = kQuantGemvStagedMaxRows + 1;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(q), q, "quant_gemv_staged"), ChooseMatMul(q));
  q.m = 1;
  q.n = kQuantGemvStagedMinColumns;
  q.quant_gemv_staged = false;  // HIP, another format, K not a multiple of 256 or unaligned rows
  EXPECT_EQ(ChooseMatMul(q), MatMulKernel::kQuantGemv);
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(q), q, "quant_gemv_staged"), MatMulKernel::kQuantGemv);
}

// A forced block variant (vt::tuning family gpu.matmul_block) replaces the chosen
// kernel where it applies: dequant_blas above the decode rows, quant_mma at any rows.
TEST(MatMulChoiceTest, ForcedBlockVariantsApplyOnlyWhereTheyFit) {
  MatMulShape q{2048, 4096, 4096, true, false, true, false};
  q.quant_mma_accepts = true;
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, ""), MatMulKernel::kDequantVendorBlas);
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, "quant_mma"), MatMulKernel::kQuantMma);
  q.m = 64;
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, "dequant_blas"), MatMulKernel::kDequantVendorBlas);
  q.m = kSkinnyMaxRows;  // decode rows keep their kernel under dequant_blas...
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, "dequant_blas"), ChooseMatMul(q));
  q.m = 1;  // ...and take the int8 tiles under quant_mma
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, "quant_mma"), MatMulKernel::kQuantMma);
  q.m = 64;
  q.quant_mma_accepts = false;  // HIP, or a format the tiles do not decode
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, "quant_mma"), ChooseMatMul(q));
  q.vendor_blas_available = false;
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(q), q, "dequant_blas"), ChooseMatMul(q));
  const MatMulShape bf16{64, 4096, 4096, false, true, true, true};
  EXPECT_EQ(ApplyBlockVariant(ChooseMatMul(bf16), bf16, "dequant_blas"), ChooseMatMul(bf16));
  EXPECT_THROW(ApplyBlockVariant(ChooseMatMul(q), q, "fastest"), Error);
}

// A forced skinny variant (vt::tuning family gpu.matmul_skinny) replaces the chosen
// kernel only on decode shapes it accepts.
TEST(MatMulChoiceTest, ForcedSkinnyVariantsApplyOnlyWhereTheyFit) {
  MatMulShape bf16 = Dense(1, 4096, 4096, true);
  bf16.weight_is_16_bit = true;
  const MatMulKernel chosen = ChooseMatMul(bf16);
  EXPECT_EQ(ApplySkinnyVariant(chosen, bf16, ""), chosen);
  EXPECT_EQ(ApplySkinnyVariant(chosen, bf16, "loads_in_flight"), MatMulKernel::kSkinnyLoadsInFlight);
  EXPECT_EQ(ApplySkinnyVariant(chosen, bf16, "warp_per_column"), MatMulKernel::kSkinnyWarpPerColumn);
  EXPECT_EQ(ApplySkinnyVariant(chosen, bf16, "vector_loads"), MatMulKernel::kSkinnyVectorLoads);
  MatMulShape eight = bf16;
  eight.m = kSkinnyMaxRows;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(eight), eight, "loads_in_flight"), MatMulKernel::kSkinnyLoadsInFlight);

  // Prefill shapes keep their kernel whatever is forced.
  MatMulShape prefill = bf16;
  prefill.m = kSkinnyMaxRows + 1;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(prefill), prefill, "loads_in_flight"), ChooseMatMul(prefill));
  // 16-bit weights with f32 x (the LM head) take it; f32 weights and unaligned rows do not.
  MatMulShape f32_x = bf16;
  f32_x.weight_matches_x = false;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(f32_x), f32_x, "loads_in_flight"), MatMulKernel::kSkinnyLoadsInFlight);
  MatMulShape f32 = Dense(1, 4096, 4096, true);
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(f32), f32, "loads_in_flight"), MatMulKernel::kSkinnyVectorLoads);
  MatMulShape unaligned = bf16;
  unaligned.rows_16_byte_aligned = false;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(unaligned), unaligned, "loads_in_flight"),
            MatMulKernel::kSkinnyWarpPerColumn);
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(unaligned), unaligned, "vector_loads"),
            MatMulKernel::kSkinnyWarpPerColumn);
  // Block weights take only the element-wise walk.
  const MatMulShape block{1, 4096, 4096, true, false, true, false};
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(block), block, "loads_in_flight"), MatMulKernel::kSkinnyWarpPerColumn);
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(block), block, "quant_gemv"), MatMulKernel::kSkinnyWarpPerColumn);
  MatMulShape quant = block;
  quant.quant_gemv_accepts = true;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(quant), quant, "warp_per_column"), MatMulKernel::kSkinnyWarpPerColumn);
  quant.m = kQuantGemvMaxRows;
  EXPECT_EQ(ApplySkinnyVariant(MatMulKernel::kDequantVendorBlas, quant, "quant_gemv"), MatMulKernel::kQuantGemv);
  quant.m = kQuantGemvMaxRows + 1;
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(quant), quant, "quant_gemv"), ChooseMatMul(quant));
  EXPECT_EQ(ApplySkinnyVariant(ChooseMatMul(bf16), bf16, "quant_gemv"), ChooseMatMul(bf16));  // float weights
  EXPECT_THROW(ApplySkinnyVariant(chosen, bf16, "fastest"), Error);
}

}  // namespace
}  // namespace vt::gpu
