// Contract tests of vt::RopeNeox against a double-precision reference: NeoX
// rotate-half pairs (i, i + rotary_dim/2) on the first rotary_dim dims, the rest
// untouched; partial and full widths, theta 1e7 and 1e4, i32/i64 positions up to
// 2e5, strided x and positions, f32/bf16/f16, every device and CPU ISA level. A
// width of 0 leaves x untouched without dispatching any kernel.
#include <cmath>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::DefaultTolerance;
using testing::ForEachDeviceAndIsa;
using testing::RandomTensor;
using testing::ToDoubles;

// The angle is the one HF computes, in f32 and in its order of operations
// (inv_freq = 1 / theta^(f32(2i) / rotary_dim), angle = f32(position) * inv_freq):
// that is the contract, because the model's reference logits come from it. At
// position 2e5 the f32 angle differs from the exact one by ~1e-2 rad, so a kernel
// that computes angles differently fails. The rotation itself is done in double.
std::vector<double> Reference(const Tensor& x, const std::vector<int64_t>& positions, int64_t rotary_dim,
                              float theta) {
  std::vector<double> out = ToDoubles(x);
  const int64_t heads = x.size(1), d = x.size(2), half = rotary_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
      const double angle = static_cast<float>(positions[t]) * inv_freq;
      const double c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < heads; ++h) {
        double* head = &out[(t * heads + h) * d];
        const double x1 = head[i], x2 = head[i + half];
        head[i] = x1 * c - x2 * s;
        head[i + half] = x2 * c + x1 * s;
      }
    }
  }
  return out;
}

// positions [T] of `dtype` whose elements sit 2 apart in memory.
Tensor StridedPositions(const std::vector<int64_t>& values, DType dtype, Device device) {
  std::vector<int64_t> padded;
  for (int64_t v : values) padded.insert(padded.end(), {v, -7});
  Tensor buffer = Tensor::Empty({static_cast<int64_t>(values.size()), 2}, dtype, device);
  buffer.CopyFrom(Tensor::FromVector(padded, {static_cast<int64_t>(values.size()), 2}));
  return buffer.Select(1, 0);
}

// Tolerance: one rounding of the output to its dtype after f32 math (DefaultTolerance);
// f32 cos/sin are within an ulp of the double ones for the same f32 angle.
TEST(RopeNeoxTest, MatchesReference) {
  std::mt19937 rng(71);
  struct Case {
    int64_t heads, d, rotary_dim;
    float theta;
  };
  const std::vector<Case> cases = {{2, 8, 8, 1e4f}, {3, 256, 64, 1e7f}, {4, 128, 128, 1e6f}, {1, 130, 2, 1e4f},
                                   {2, 6, 4, 1e7f}};
  const std::vector<int64_t> positions = {0, 1, 17, 4095, 65537, 131071, 200003};
  const int64_t tokens = static_cast<int64_t>(positions.size());
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Case& c : cases) {
        for (DType pos_dtype : {DType::kI32, DType::kI64}) {
          SCOPED_TRACE(std::string(DTypeName(dtype)) + " heads " + std::to_string(c.heads) + " D " +
                       std::to_string(c.d) + " rot " + std::to_string(c.rotary_dim) + " positions " +
                       DTypeName(pos_dtype));
          Tensor x = RandomTensor({tokens, c.heads, c.d}, dtype, device, rng);
          const std::vector<double> ref = Reference(x, positions, c.rotary_dim, c.theta);
          Tensor pos = Tensor::Empty({tokens}, pos_dtype, device);
          pos.CopyFrom(Tensor::FromVector(positions, {tokens}));
          RopeNeox({.x = x, .positions = pos, .rotary_dim = c.rotary_dim, .theta = c.theta});
          EXPECT_TRUE(AllClose(ref, x, DefaultTolerance(dtype)));
        }
      }
    }
  });
}

TEST(RopeNeoxTest, StridedHeadsAndPositions) {
  std::mt19937 rng(72);
  const std::vector<int64_t> positions = {3, 1000, 77, 150001, 9};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(dtype));
      Tensor x = testing::WithTransposedStorage(
          testing::WithPaddedRows(RandomTensor({5, 3, 96}, dtype, device, rng), 4), 0, 1);
      const std::vector<double> ref = Reference(x, positions, 32, 1e7f);
      RopeNeox({.x = x, .positions = StridedPositions(positions, DType::kI64, device), .rotary_dim = 32, .theta = 1e7f});
      EXPECT_TRUE(AllClose(ref, x, DefaultTolerance(dtype)));
    }
  });
}

TEST(RopeNeoxTest, ZeroWidthLeavesXUntouchedAndDispatchesNothing) {
  std::mt19937 rng(73);
  for (Device device : testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    Tensor x = RandomTensor({4, 2, 16}, DType::kBF16, device, rng);
    const std::vector<double> before = ToDoubles(x);
    Tensor pos = Tensor::FromVector(std::vector<int32_t>{5, 6, 7, 8}, {4}).To(device);
    Registry::Get().ResetDispatchCounts();
    RopeNeox({.x = x, .positions = pos, .rotary_dim = 0, .theta = 1e7f});
    EXPECT_EQ(Registry::Get().DispatchCount(OpId::kRopeNeox, device.type), 0u);
    EXPECT_TRUE(AllClose(before, x, 0.0));
    RopeNeox({.x = x, .positions = pos, .rotary_dim = 16, .theta = 1e7f});
    EXPECT_EQ(Registry::Get().DispatchCount(OpId::kRopeNeox, device.type), 1u);
  }
}

}  // namespace
}  // namespace vt
