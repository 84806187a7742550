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
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, n, 4096, true, false, true}), MatMulKernel::kTiledShared);   // block weights
  EXPECT_EQ(ChooseMatMul(MatMulShape{m, n, 4096, false, false, true}), MatMulKernel::kTiledShared);  // x f32, w bf16
}

TEST(MatMulChoiceTest, WithoutAVendorLibraryNothingRoutesToIt) {
  for (int64_t m : {1, 8, 9, 64, 4096}) {
    for (bool block : {false, true}) {
      EXPECT_NE(ChooseMatMul(MatMulShape{m, 8192, 8192, block, !block, false}), MatMulKernel::kVendorBlas);
    }
  }
}

}  // namespace
}  // namespace vt::gpu
