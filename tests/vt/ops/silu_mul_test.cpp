// Contract tests of vt::SiluMul against a double-precision reference:
// out = gate / (1 + e^-gate) * up, f32/bf16/f16, gates reaching both saturated ends,
// strided rows, out aliasing gate or up, every device and CPU ISA level.
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

std::vector<double> Reference(const Tensor& gate, const Tensor& up) {
  const std::vector<double> g = ToDoubles(gate), u = ToDoubles(up);
  std::vector<double> out(g.size());
  for (size_t i = 0; i < g.size(); ++i) out[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return out;
}

// Tolerance: one rounding to the output dtype after f32 math (DefaultTolerance); the
// vector exp is within a few f32 ulp.
TEST(SiluMulTest, MatchesReference) {
  std::mt19937 rng(41);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {3, 7}, {4, 2, 96}, {2, 1037}}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
        Tensor gate = RandomTensor(shape, dtype, device, rng, -30.0f, 30.0f);
        Tensor up = RandomTensor(shape, dtype, device, rng, -2.0f, 2.0f);
        Tensor out = Tensor::Empty(shape, dtype, device);
        Poison(out);
        SiluMul({.gate = gate, .up = up, .out = out});
        EXPECT_TRUE(AllClose(Reference(gate, up), out, DefaultTolerance(dtype)));
      }
    }
  });
}

TEST(SiluMulTest, StridedRowsAndInPlace) {
  std::mt19937 rng(42);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(dtype));
      const Shape shape = {5, 3, 41};
      Tensor gate = testing::WithPaddedRows(RandomTensor(shape, dtype, device, rng, -8.0f, 8.0f), 3);
      Tensor up = testing::WithTransposedStorage(RandomTensor(shape, dtype, device, rng), 0, 1);
      const std::vector<double> ref = Reference(gate, up);
      Tensor out = testing::WithPaddedRows(Tensor::Empty(shape, dtype, device), 5);
      Poison(out);
      SiluMul({.gate = gate, .up = up, .out = out});
      EXPECT_TRUE(AllClose(ref, out, DefaultTolerance(dtype)));
      SiluMul({.gate = gate, .up = up, .out = gate});
      EXPECT_TRUE(AllClose(ref, gate, DefaultTolerance(dtype))) << "out = gate";
      Tensor gate3 = testing::WithPaddedRows(RandomTensor(shape, dtype, device, rng, -8.0f, 8.0f), 1);
      const std::vector<double> ref3 = Reference(gate3, up);
      SiluMul({.gate = gate3, .up = up, .out = up});
      EXPECT_TRUE(AllClose(ref3, up, DefaultTolerance(dtype))) << "out = up";
    }
  });
}

}  // namespace
}  // namespace vt
