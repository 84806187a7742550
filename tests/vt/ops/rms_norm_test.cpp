// Contract tests of vt::RmsNorm against a double-precision reference: plain and
// zero-centred (1 + w) weights, f32/bf16/f16 activations, weights of another dtype
// and stride, strided rows, in-place use, every device and CPU ISA level.
#include <cmath>

#include "testing/op_testing.h"
#include "vt/cpu/cpu_features.h"
#include "vt/reach.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::DefaultTolerance;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

// out[r, i] = x[r, i] / sqrt(mean_i(x[r]^2) + eps) * (w[i] + offset), in double.
std::vector<double> Reference(const Tensor& x, const Tensor& w, double eps, double offset) {
  const std::vector<double> xs = ToDoubles(x), ws = ToDoubles(w);
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

// A [D] weight whose elements sit 3 apart in memory.
Tensor StridedWeight(const Tensor& w) {
  Tensor buffer = Tensor::Empty({w.size(0), 3}, w.dtype(), w.device());
  Poison(buffer);
  Tensor view = buffer.Select(1, 1);
  view.CopyFrom(w);
  return view;
}

// Tolerance: the output is rounded once to its dtype after f32 math (DefaultTolerance);
// f32 sums of squares over a few thousand elements stay well inside 1e-5.
TEST(RmsNormTest, MatchesReferenceForDtypesShapesAndOffsets) {
  std::mt19937 rng(1);
  // GPUs: rows of up to 8 x the warp width (256 on NVIDIA) take one warp each, 8 rows
  // a block (15 rows of 37: a partial block); {3, 257} is one past that; {1, 4096} a
  // decode row held in registers by a block; {2, 9000} past them, the streaming kernel.
  const std::vector<Shape> shapes = {{1, 1},    {3, 5, 37}, {7, 256},   {3, 257},
                                     {2, 1027}, {16},       {1, 4096},  {2, 9000}};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : shapes) {
        for (float offset : {0.0f, 1.0f}) {
          for (float eps : {1e-6f, 0.25f}) {
            SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + " offset " +
                         std::to_string(offset) + " eps " + std::to_string(eps));
            Tensor x = RandomTensor(shape, dtype, device, rng, -2.0f, 2.0f);
            Tensor w = RandomTensor({shape.back()}, DType::kF32, device, rng);
            Tensor out = Tensor::Empty(shape, dtype, device);
            Poison(out);
            RmsNorm({.x = x, .weight = w, .out = out, .eps = eps, .weight_offset = offset});
            EXPECT_TRUE(AllClose(Reference(x, w, eps, offset), out, DefaultTolerance(dtype)));
          }
        }
      }
    }
  });
}

TEST(RmsNormTest, StridedRowsStridedWeightOfAnotherDtype) {
  std::mt19937 rng(2);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(dtype));
      Tensor x = RandomTensor({4, 3, 129}, dtype, device, rng);
      Tensor w = StridedWeight(RandomTensor({129}, DType::kBF16, device, rng));
      const std::vector<double> ref = Reference(x, w, 1e-5, 1.0);
      for (const Tensor& xv : {testing::WithPaddedRows(x, 5), testing::WithTransposedStorage(x, 0, 1)}) {
        Tensor out = testing::WithTransposedStorage(Tensor::Empty({4, 3, 129}, dtype, device), 0, 1);
        Poison(out);
        RmsNorm({.x = xv, .weight = w, .out = out, .eps = 1e-5f, .weight_offset = 1.0f});
        EXPECT_TRUE(AllClose(ref, out, DefaultTolerance(dtype)));
      }
    }
  });
}

TEST(RmsNormTest, InPlace) {
  std::mt19937 rng(3);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor x = testing::WithPaddedRows(RandomTensor({9, 70}, dtype, device, rng), 3);
      Tensor w = RandomTensor({70}, DType::kF32, device, rng);
      const std::vector<double> ref = Reference(x, w, 1e-6, 0.0);
      RmsNorm({.x = x, .weight = w, .out = x, .eps = 1e-6f, .weight_offset = 0.0f});
      EXPECT_TRUE(AllClose(ref, x, DefaultTolerance(dtype)));
    }
  });
}

TEST(RmsNormTest, CpuRunsTheActiveIsaPath) {
  std::mt19937 rng(4);
  Tensor x = RandomTensor({2, 40}, DType::kF32, kCpu, rng);
  Tensor w = RandomTensor({40}, DType::kF32, kCpu, rng);
  testing::ForEachCpuIsa([&] {
    reach::Reset();
    RmsNorm({.x = x, .weight = w, .out = Tensor::Empty({2, 40}, DType::kF32), .eps = 1e-6f, .weight_offset = 0});
    EXPECT_EQ(reach::Count(std::string("RmsNormCpu.") + cpu::IsaName(cpu::ActiveIsa())), 1u);
  });
}

}  // namespace
}  // namespace vt
