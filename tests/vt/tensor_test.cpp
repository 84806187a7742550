// Tensor views, copies across dtypes, and the dtype helpers.
#include <gtest/gtest.h>

#include <cmath>

#include "testing/op_testing.h"
#include "vt/tensor.h"

namespace vt {
namespace {

TEST(TensorTest, ContiguousStridesAndSizes) {
  Tensor t = Tensor::Empty({2, 3, 4}, DType::kF32);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.nbytes(), 96);
}

TEST(TensorTest, SliceSelectTransposeShareStorage) {
  std::vector<float> values(24);
  for (int i = 0; i < 24; ++i) values[i] = static_cast<float>(i);
  Tensor t = Tensor::FromVector(values, {2, 3, 4});
  Tensor s = t.Slice(2, 1, 3);  // [2, 3, 2]
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.ToFloatVector(), (std::vector<float>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  Tensor row = t.Select(0, 1).Select(0, 2);
  EXPECT_EQ(row.ToFloatVector(), (std::vector<float>{20, 21, 22, 23}));
  Tensor tr = t.Select(0, 0).Transpose(0, 1);  // [4, 3]
  EXPECT_EQ(tr.ToFloatVector(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_TRUE(s.Overlaps(t));
  EXPECT_FALSE(t.Select(0, 0).Overlaps(t.Select(0, 1)));
}

TEST(TensorTest, ViewNeedsContiguousAndMatchingCount) {
  Tensor t = Tensor::Empty({4, 6}, DType::kBF16);
  EXPECT_EQ(t.View({2, -1, 3}).shape(), (Shape{2, 4, 3}));
  EXPECT_THROW(t.View({5, 5}), Error);
  EXPECT_THROW(t.Transpose(0, 1).View({24}), Error);
}

TEST(TensorTest, AsStridedIsBoundsChecked) {
  Tensor t = Tensor::Empty({8}, DType::kF32);
  EXPECT_NO_THROW(t.AsStrided({2, 2}, {4, 1}, 2));
  EXPECT_THROW(t.AsStrided({2, 2}, {4, 1}, 5), Error);
  EXPECT_THROW(t.Slice(0, 3, 9), Error);
}

TEST(TensorTest, BlockDtypesKeepWholeBlocks) {
  Tensor q = Tensor::Empty({4, 64}, DType::kQ8_0);
  EXPECT_EQ(q.nbytes(), 4 * 2 * 34);
  EXPECT_NO_THROW(q.Slice(0, 1, 3));
  EXPECT_NO_THROW(q.Slice(1, 32, 64));
  EXPECT_THROW(q.Slice(1, 0, 16), Error);
  EXPECT_THROW(Tensor::Empty({3, 20}, DType::kQ4_0), Error);
}

TEST(TensorTest, CopyFromCastsThroughAnyStrides) {
  std::mt19937 rng(1);
  Tensor src = testing::RandomTensor({5, 7}, DType::kF32, kCpu, rng);
  Tensor dst = Tensor::Empty({7, 5}, DType::kBF16).Transpose(0, 1);
  dst.CopyFrom(src);
  std::vector<float> a = src.ToFloatVector(), b = dst.ToFloatVector();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], std::fabs(a[i]) * 4e-3);
}

TEST(TensorTest, DescribeNamesDtypeShapeStridesAndDevice) {
  Tensor t = Tensor::Empty({3, 4}, DType::kBF16).Transpose(0, 1);
  EXPECT_EQ(t.Describe(), "bf16 [4, 3] strides [1, 4] on cpu");
}

TEST(DTypeTest, HalfConversionsRoundToNearestEven) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f}) {
    EXPECT_NEAR(F16ToF32(F32ToF16(f)), f, std::fabs(f) * 1e-3 + 6e-8) << f;
    EXPECT_NEAR(Bf16ToF32(F32ToBf16(f)), f, std::fabs(f) * 4e-3) << f;
  }
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_TRUE(std::isinf(F16ToF32(F32ToF16(1e6f))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
  // Every f16 bit pattern survives a round trip through f32.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
  }
}

TEST(DTypeTest, ParseNamesAndBlockBytes) {
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(ParseDType("q4_k"), DType::kQ4_K);
  EXPECT_THROW(ParseDType("q3_k"), std::invalid_argument);
  EXPECT_EQ(BytesFor(DType::kQ6_K, 512), 420);
  EXPECT_THROW(BytesFor(DType::kQ8_0, 33), std::invalid_argument);
}

}  // namespace
}  // namespace vt
