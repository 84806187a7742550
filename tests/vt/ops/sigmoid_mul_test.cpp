// Contract tests of vt::SigmoidMul against a double-precision reference:
// out = x * sigmoid(gate) with a per-element gate [rows..., D] or a per-row gate
// [rows..., 1], gates of x's dtype or another one, f32/bf16/f16, strided rows,
// in-place, every device and CPU ISA level.
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

std::vector<double> Reference(const Tensor& x, const Tensor& gate) {
  const std::vector<double> xs = ToDoubles(x), gs = ToDoubles(gate);
  const size_t d = x.size(-1), gate_d = gate.size(-1);
  std::vector<double> out(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double g = gate_d == d ? gs[i] : gs[i / d];
    out[i] = xs[i] / (1.0 + std::exp(-g));
  }
  return out;
}

Shape WithLastDim(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// Tolerance: one rounding to the output dtype after f32 math (DefaultTolerance).
TEST(SigmoidMulTest, MatchesReferenceForGateWidthsAndDtypes) {
  std::mt19937 rng(51);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (DType gate_dtype : {dtype, DType::kF32}) {
        for (const Shape& shape : std::vector<Shape>{{1, 1}, {3, 7}, {4, 2, 256}, {2, 1027}}) {
          for (int64_t gate_width : {shape.back(), int64_t{1}}) {
            SCOPED_TRACE(std::string(DTypeName(dtype)) + " gate " + DTypeName(gate_dtype) + " " +
                         ShapeToString(shape) + " gate width " + std::to_string(gate_width));
            Tensor x = RandomTensor(shape, dtype, device, rng, -2.0f, 2.0f);
            Tensor gate = RandomTensor(WithLastDim(shape, gate_width), gate_dtype, device, rng, -30.0f, 30.0f);
            Tensor out = Tensor::Empty(shape, dtype, device);
            Poison(out);
            SigmoidMul({.x = x, .gate = gate, .out = out});
            EXPECT_TRUE(AllClose(Reference(x, gate), out, DefaultTolerance(dtype)));
          }
        }
      }
    }
  });
}

TEST(SigmoidMulTest, StridedRowsAndInPlace) {
  std::mt19937 rng(52);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(dtype));
      const Shape shape = {6, 2, 37};
      Tensor x = testing::WithPaddedRows(RandomTensor(shape, dtype, device, rng), 3);
      Tensor gate = testing::WithTransposedStorage(RandomTensor(shape, dtype, device, rng, -6.0f, 6.0f), 0, 1);
      Tensor row_gate = testing::WithPaddedRows(RandomTensor({6, 2, 1}, DType::kBF16, device, rng), 2);
      const std::vector<double> ref = Reference(x, gate), ref_row = Reference(x, row_gate);
      Tensor out = testing::WithPaddedRows(Tensor::Empty(shape, dtype, device), 1);
      Poison(out);
      SigmoidMul({.x = x, .gate = row_gate, .out = out});
      EXPECT_TRUE(AllClose(ref_row, out, DefaultTolerance(dtype))) << "per-row gate";
      SigmoidMul({.x = x, .gate = gate, .out = gate});
      EXPECT_TRUE(AllClose(ref, gate, DefaultTolerance(dtype))) << "out = gate";
      SigmoidMul({.x = x, .gate = row_gate, .out = x});
      EXPECT_TRUE(AllClose(ref_row, x, DefaultTolerance(dtype))) << "out = x";
    }
  });
}

}  // namespace
}  // namespace vt
