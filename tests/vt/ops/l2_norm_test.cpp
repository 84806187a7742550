// Contract tests of vt::L2Norm against a double-precision reference:
// out = x * rsqrt(sum(x^2) + eps) * scale (a sum, not a mean; eps inside the root),
// f32/bf16/f16, strided rows, in-place, every device and CPU ISA level.
#include <cmath>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::DefaultTolerance;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

std::vector<double> Reference(const Tensor& x, int64_t d, double eps, double scale) {
  const std::vector<double> xs = ToDoubles(x);
  std::vector<double> out(xs.size());
  for (size_t r = 0; r < xs.size() / d; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += xs[r * d + i] * xs[r * d + i];
    const double inv = 1.0 / std::sqrt(sum + eps);
    for (int64_t i = 0; i < d; ++i) out[r * d + i] = xs[r * d + i] * inv * scale;
  }
  return out;
}

// Tolerance: one rounding to the output dtype after f32 math (DefaultTolerance).
// eps 0.5 is large enough that putting it anywhere but inside the root, or taking a
// mean instead of a sum, fails.
TEST(L2NormTest, MatchesReference) {
  std::mt19937 rng(31);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {6, 2, 128}, {5, 33}, {3, 1001}, {2, 8192}, {1, 8193}}) {
        for (float eps : {1e-6f, 0.5f}) {
          for (float scale : {1.0f, 0.08838834764f}) {
            SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + " eps " +
                         std::to_string(eps) + " scale " + std::to_string(scale));
            Tensor x = RandomTensor(shape, dtype, device, rng);
            Tensor out = Tensor::Empty(shape, dtype, device);
            Poison(out);
            L2Norm({.x = x, .out = out, .eps = eps, .scale = scale});
            EXPECT_TRUE(AllClose(Reference(x, shape.back(), eps, scale), out, DefaultTolerance(dtype)));
          }
        }
      }
    }
  });
}

TEST(L2NormTest, StridedRowsAndInPlace) {
  std::mt19937 rng(32);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(dtype));
      Tensor x = testing::WithTransposedStorage(testing::WithPaddedRows(RandomTensor({3, 4, 128}, dtype, device, rng), 4), 0, 1);
      const std::vector<double> ref = Reference(x, 128, 1e-6, 0.5);
      Tensor out = testing::WithPaddedRows(Tensor::Empty({3, 4, 128}, dtype, device), 9);
      Poison(out);
      L2Norm({.x = x, .out = out, .eps = 1e-6f, .scale = 0.5f});
      EXPECT_TRUE(AllClose(ref, out, DefaultTolerance(dtype)));
      L2Norm({.x = x, .out = x, .eps = 1e-6f, .scale = 0.5f});
      EXPECT_TRUE(AllClose(ref, x, DefaultTolerance(dtype)));
    }
  });
}

}  // namespace
}  // namespace vt
