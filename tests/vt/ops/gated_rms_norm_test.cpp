// Contract tests of vt::GatedRmsNorm against a double-precision reference:
// out = x * rsqrt(mean(x^2) + eps) * w * silu(z) (plain weight), f32/bf16/f16, gates
// far into both saturated ends of silu, strided rows, out aliasing x or z, every
// device and CPU ISA level.
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

std::vector<double> Reference(const Tensor& x, const Tensor& z, const Tensor& w, double eps) {
  const std::vector<double> xs = ToDoubles(x), zs = ToDoubles(z), ws = ToDoubles(w);
  const size_t d = ws.size(), rows = xs.size() / d;
  std::vector<double> out(xs.size());
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t i = 0; i < d; ++i) sum += xs[r * d + i] * xs[r * d + i];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(d) + eps);
    for (size_t i = 0; i < d; ++i) {
      const double zi = zs[r * d + i];
      out[r * d + i] = xs[r * d + i] * inv * ws[i] * zi / (1.0 + std::exp(-zi));
    }
  }
  return out;
}

enum class Alias { kNone, kOutIsX, kOutIsZ };

// Tolerance: one rounding to the output dtype after f32 math (DefaultTolerance); the
// vector exp is within a few f32 ulp.
void RunCase(Device device, DType dtype, const Shape& shape, bool strided, Alias alias, std::mt19937& rng) {
  SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + (strided ? " strided" : "") +
               " alias " + std::to_string(static_cast<int>(alias)));
  Tensor x = RandomTensor(shape, dtype, device, rng, -2.0f, 2.0f);
  // Gates from -12 to 12 reach both flat ends of silu while keeping outputs small
  // enough that the relative tolerance stays sharp.
  Tensor z = RandomTensor(shape, dtype, device, rng, -12.0f, 12.0f);
  if (strided) {
    x = testing::WithPaddedRows(x, 2);
    z = testing::WithTransposedStorage(testing::WithPaddedRows(z, 1), 0, static_cast<int>(shape.size()) - 2);
  }
  Tensor w = RandomTensor({shape.back()}, DType::kBF16, device, rng);
  const std::vector<double> ref = Reference(x, z, w, 1e-6);
  Tensor out = alias == Alias::kOutIsX ? x : alias == Alias::kOutIsZ ? z : Tensor::Empty(shape, dtype, device);
  if (alias == Alias::kNone) Poison(out);
  GatedRmsNorm({.x = x, .z = z, .weight = w, .out = out, .eps = 1e-6f});
  EXPECT_TRUE(AllClose(ref, out, DefaultTolerance(dtype)));
}

TEST(GatedRmsNormTest, MatchesReference) {
  std::mt19937 rng(21);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {4, 3, 128}, {7, 45}, {2, 1031}, {1, 8200}}) {
        RunCase(device, dtype, shape, false, Alias::kNone, rng);
      }
    }
  });
}

TEST(GatedRmsNormTest, StridedRowsAndInPlace) {
  std::mt19937 rng(22);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      RunCase(device, dtype, {5, 4, 67}, true, Alias::kNone, rng);
      RunCase(device, dtype, {5, 67}, false, Alias::kOutIsX, rng);
      RunCase(device, dtype, {5, 67}, false, Alias::kOutIsZ, rng);
    }
  });
}

}  // namespace
}  // namespace vt
