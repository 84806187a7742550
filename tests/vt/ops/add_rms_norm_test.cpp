// Contract tests of vt::AddRmsNorm against a double-precision reference: the
// residual is updated in place to round(residual + x) in the activation dtype (as
// HF's add does), and out is the RmsNorm of that stored residual. f32/bf16/f16,
// plain and (1 + w) weights, strided rows, out aliasing x, every device and ISA.
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

// residual + x computed in f32 and rounded to `dtype`, the values the op must store.
std::vector<double> RoundedSum(const Tensor& x, const Tensor& residual) {
  const std::vector<double> xs = ToDoubles(x), rs = ToDoubles(residual);
  std::vector<float> sum(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) sum[i] = static_cast<float>(xs[i]) + static_cast<float>(rs[i]);
  Tensor rounded = Tensor::Empty(x.shape(), x.dtype());
  rounded.CopyFrom(Tensor::FromVector(sum, x.shape()));
  return ToDoubles(rounded);
}

std::vector<double> NormReference(const std::vector<double>& xs, const std::vector<double>& ws, double eps,
                                  double offset) {
  const size_t d = ws.size(), rows = xs.size() / d;
  std::vector<double> out(xs.size());
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t i = 0; i < d; ++i) sum += xs[r * d + i] * xs[r * d + i];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(d) + eps);
    for (size_t i = 0; i < d; ++i) out[r * d + i] = xs[r * d + i] * inv * (ws[i] + offset);
  }
  return out;
}

// The stored residual is exact up to one f32 rounding (f32) or bit-exact after the
// same f32-then-dtype rounding (bf16, f16): 1e-6. out: one rounding to its dtype
// after f32 math (DefaultTolerance).
void RunCase(Device device, DType dtype, const Shape& shape, float offset, bool strided, bool out_is_x,
             std::mt19937& rng) {
  SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + (strided ? " strided" : "") +
               (out_is_x ? " out=x" : ""));
  Tensor x = RandomTensor(shape, dtype, device, rng);
  Tensor residual = RandomTensor(shape, dtype, device, rng, -3.0f, 3.0f);
  if (strided) {
    x = testing::WithPaddedRows(x, 3);
    residual = testing::WithPaddedRows(residual, 7);
  }
  Tensor w = RandomTensor({shape.back()}, DType::kF32, device, rng);
  const std::vector<double> sum = RoundedSum(x, residual);
  const std::vector<double> ref = NormReference(sum, ToDoubles(w), 1e-6, offset);
  Tensor out = out_is_x ? x : Tensor::Empty(shape, dtype, device);
  if (!out_is_x) Poison(out);
  AddRmsNorm({.x = x, .residual = residual, .weight = w, .out = out, .eps = 1e-6f, .weight_offset = offset});
  EXPECT_TRUE(AllClose(sum, residual, 1e-6)) << "residual";
  EXPECT_TRUE(AllClose(ref, out, DefaultTolerance(dtype))) << "out";
}

TEST(AddRmsNormTest, MatchesReference) {
  std::mt19937 rng(11);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {5, 37}, {3, 1024}, {2, 2, 515}, {1, 4096}, {2, 8193}}) {
        for (float offset : {0.0f, 1.0f}) RunCase(device, dtype, shape, offset, false, false, rng);
      }
    }
  });
}

TEST(AddRmsNormTest, StridedRowsAndOutAliasingX) {
  std::mt19937 rng(12);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      RunCase(device, dtype, {6, 131}, 1.0f, true, false, rng);
      RunCase(device, dtype, {6, 131}, 1.0f, false, true, rng);
      RunCase(device, dtype, {6, 131}, 0.0f, true, true, rng);
    }
  });
}

}  // namespace
}  // namespace vt
