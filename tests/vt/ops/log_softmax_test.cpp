// Contract tests of vt::LogSoftmax against a double-precision reference over the
// last dim, f32 output: f32/bf16/f16 inputs, a Qwen3.5-sized vocabulary, strided
// rows, in-place on f32, every device and CPU ISA level.
#include <algorithm>
#include <cmath>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

std::vector<double> Reference(const Tensor& x) {
  const std::vector<double> xs = ToDoubles(x);
  const size_t n = x.size(-1);
  std::vector<double> out(xs.size());
  for (size_t r = 0; r < xs.size() / n; ++r) {
    const double* row = &xs[r * n];
    const double max_value = *std::max_element(row, row + n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(row[i] - max_value);
    for (size_t i = 0; i < n; ++i) out[r * n + i] = row[i] - max_value - std::log(sum);
  }
  return out;
}

// Tolerance 2e-6 (relative to the largest |log p|, which is >= 1 here): f32 math,
// the normaliser summed in 16 partial sums.
TEST(LogSoftmaxTest, MatchesReference) {
  std::mt19937 rng(101);
  const std::vector<Shape> shapes = {{1, 1}, {3, 7}, {2, 3, 1000}, {2, 248320}};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : shapes) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
        Tensor x = RandomTensor(shape, dtype, device, rng, -20.0f, 20.0f);
        Tensor out = Tensor::Empty(shape, DType::kF32, device);
        Poison(out);
        LogSoftmax({.x = x, .out = out});
        EXPECT_TRUE(AllClose(Reference(x), out, 2e-6));
      }
    }
  });
}

TEST(LogSoftmaxTest, StridedRowsAndInPlace) {
  std::mt19937 rng(102);
  ForEachDeviceAndIsa([&](Device device) {
    Tensor x = testing::WithTransposedStorage(testing::WithPaddedRows(RandomTensor({4, 3, 77}, DType::kBF16, device, rng, -5.0f, 5.0f), 2), 0, 1);
    Tensor out = testing::WithPaddedRows(Tensor::Empty({4, 3, 77}, DType::kF32, device), 3);
    Poison(out);
    LogSoftmax({.x = x, .out = out});
    EXPECT_TRUE(AllClose(Reference(x), out, 2e-6)) << "bf16 strided";
    Tensor y = testing::WithPaddedRows(RandomTensor({5, 300}, DType::kF32, device, rng, -5.0f, 5.0f), 1);
    const std::vector<double> ref = Reference(y);
    LogSoftmax({.x = y, .out = y});
    EXPECT_TRUE(AllClose(ref, y, 2e-6)) << "f32 in place";
  });
}

}  // namespace
}  // namespace vt
