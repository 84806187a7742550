// Contract tests of vt::Copy, vt::Fill and vt::Add: every plain dtype pair for Copy
// (float rounding to nearest even, integers exact, float -> int truncating), Q8_0
// rows dequantizing, strided and transposed views on both sides, 0-d tensors; Fill
// writes exactly the view's elements; Add on strided views and in place. Every
// device and CPU ISA level.
#include <cmath>
#include <cstring>

#include "testing/op_testing.h"
#include "vt/quant.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::DefaultTolerance;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::ToInts;

// `value` (an f32) stored in `dtype` and read back, by vt/dtype.h's scalar rules.
double RoundTo(float value, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return Bf16ToF32(F32ToBf16(value));
    case DType::kF16: return F16ToF32(F32ToF16(value));
    case DType::kI32: return static_cast<int32_t>(value);
    case DType::kI64: return static_cast<double>(static_cast<int64_t>(value));
    default: return value;
  }
}

// Tolerance 0 throughout Copy: a cast is one rounding by a fixed rule.
TEST(CopyTest, FloatPairsOnStridedViews) {
  std::mt19937 rng(121);
  const Shape shape = {5, 3, 37};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType from : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (DType to : {DType::kF32, DType::kBF16, DType::kF16}) {
        SCOPED_TRACE(std::string(DTypeName(from)) + " -> " + DTypeName(to));
        // Magnitudes up to 6e4 exercise the exponent range while staying finite in f16.
        Tensor src = testing::WithTransposedStorage(RandomTensor(shape, from, device, rng, -60000.0f, 60000.0f), 0, 2);
        Tensor dst = testing::WithPaddedRows(Tensor::Empty(shape, to, device), 3);
        Poison(dst);
        Copy({.src = src, .dst = dst});
        std::vector<double> ref;
        for (double v : ToDoubles(src)) ref.push_back(RoundTo(static_cast<float>(v), to));
        EXPECT_TRUE(AllClose(ref, dst, 0.0));
      }
    }
  });
}

TEST(CopyTest, IntegerAndMixedPairs) {
  ForEachDeviceAndIsa([&](Device device) {
    const std::vector<int64_t> big = {0, -1, 2147483647, -2147483648LL, int64_t{1} << 40, -(int64_t{1} << 41) - 3};
    Tensor i64 = Tensor::FromVector(big, {2, 3}).To(device);
    Tensor i64_copy = testing::WithTransposedStorage(Tensor::Empty({2, 3}, DType::kI64, device), 0, 1);
    Copy({.src = i64, .dst = i64_copy});
    EXPECT_EQ(ToInts(i64_copy), big) << "i64 -> i64 exact";

    const std::vector<int64_t> small = {0, -1, 7, -123456, 2147483647, -2147483648LL};
    Tensor i32 = Tensor::Empty({6}, DType::kI32, device);
    i32.CopyFrom(Tensor::FromVector(small, {6}));
    EXPECT_EQ(ToInts(i32), small) << "i64 -> i32";
    Tensor back = Tensor::Empty({6}, DType::kI64, device);
    Copy({.src = i32, .dst = back});
    EXPECT_EQ(ToInts(back), small) << "i32 -> i64";

    Tensor f32 = Tensor::Empty({6}, DType::kF32, device);
    Copy({.src = i32.Slice(0, 0, 6), .dst = f32});
    EXPECT_TRUE(AllClose({0, -1, 7, -123456, 2147483648.0, -2147483648.0}, f32, 0.0)) << "i32 -> f32";

    Tensor fractions = Tensor::FromVector(std::vector<float>{3.7f, -3.7f, 0.5f, -0.5f, 100.0f, -2.0f}, {6}).To(device);
    Tensor truncated = Tensor::Empty({6}, DType::kI32, device);
    Copy({.src = fractions, .dst = truncated});
    EXPECT_EQ(ToInts(truncated), (std::vector<int64_t>{3, -3, 0, 0, 100, -2})) << "f32 -> i32 truncates";
  });
}

TEST(CopyTest, ZeroDimTensors) {
  ForEachDeviceAndIsa([&](Device device) {
    Tensor src = Tensor::FromVector(std::vector<float>{1.0f / 3.0f}, {1}).To(device).View({});
    Tensor dst = Tensor::Empty({}, DType::kBF16, device);
    Copy({.src = src, .dst = dst});
    EXPECT_TRUE(AllClose({RoundTo(1.0f / 3.0f, DType::kBF16)}, dst, 0.0));
  });
}

// Two rows of two Q8_0 blocks: x = d * q.
TEST(CopyTest, Q8_0RowsDequantize) {
  std::vector<BlockQ8_0> blocks(4);
  std::vector<double> ref;
  for (int b = 0; b < 4; ++b) {
    const float d = 0.03125f * static_cast<float>(b + 1);
    blocks[b].d = F32ToF16(d);
    for (int i = 0; i < 32; ++i) {
      blocks[b].qs[i] = static_cast<int8_t>((i * 7 + b * 13) % 255 - 127);
      ref.push_back(static_cast<double>(d) * blocks[b].qs[i]);
    }
  }
  Tensor host = Tensor::Empty({2, 64}, DType::kQ8_0);
  std::memcpy(host.data(), blocks.data(), sizeof(BlockQ8_0) * blocks.size());
  ForEachDeviceAndIsa([&](Device device) {
    Tensor q = host.To(device);
    Tensor f32 = testing::WithPaddedRows(Tensor::Empty({2, 64}, DType::kF32, device), 5);
    Poison(f32);
    Copy({.src = q, .dst = f32});
    EXPECT_TRUE(AllClose(ref, f32, 0.0)) << "q8_0 -> f32";
    Tensor bf16 = Tensor::Empty({2, 64}, DType::kBF16, device);
    Copy({.src = q, .dst = bf16});
    std::vector<double> ref_bf16;
    for (double v : ref) ref_bf16.push_back(RoundTo(static_cast<float>(v), DType::kBF16));
    EXPECT_TRUE(AllClose(ref_bf16, bf16, 0.0)) << "q8_0 -> bf16";
  });
}

TEST(FillTest, WritesExactlyTheViewsElements) {
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
      SCOPED_TRACE(DTypeName(dtype));
      const double value = IsInteger(dtype) ? (dtype == DType::kI64 ? 1099511627781.0 : -7.0) : 1.0 / 3.0;
      Tensor buffer = Tensor::Empty({6, 10}, dtype, device);
      Poison(buffer);
      Tensor view = buffer.Slice(0, 1, 5).Slice(1, 2, 9).Transpose(0, 1);  // [7, 4], rows 1-4, cols 2-8
      Fill({.dst = view, .value = value});
      const double poison = IsInteger(dtype) ? -1.0 : std::nan("");
      const double stored = IsInteger(dtype) ? value : RoundTo(static_cast<float>(value), dtype);
      const std::vector<int64_t> ints = IsInteger(dtype) ? ToInts(buffer) : std::vector<int64_t>{};
      const std::vector<double> floats = IsInteger(dtype) ? std::vector<double>{} : ToDoubles(buffer);
      for (int64_t r = 0; r < 6; ++r) {
        for (int64_t c = 0; c < 10; ++c) {
          const bool inside = r >= 1 && r < 5 && c >= 2 && c < 9;
          const double expected = inside ? stored : poison;
          const double got = IsInteger(dtype) ? static_cast<double>(ints[r * 10 + c]) : floats[r * 10 + c];
          const bool same = std::isnan(expected) ? std::isnan(got) : got == expected;
          EXPECT_TRUE(same) << "element [" << r << ", " << c << "]: expected " << expected << ", got " << got;
        }
      }
    }
    Tensor scalar = Tensor::Empty({}, DType::kF32, device);
    Fill({.dst = scalar, .value = -2.5});
    EXPECT_TRUE(AllClose({-2.5}, scalar, 0.0)) << "0-d";
  });
}

std::vector<double> AddReference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = ToDoubles(a), y = ToDoubles(b);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] + y[i];
  return out;
}

// Tolerance: one rounding of the sum to the output dtype (DefaultTolerance).
TEST(AddTest, StridedViewsAndInPlace) {
  std::mt19937 rng(131);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : std::vector<Shape>{{1}, {7, 33}, {3, 4, 129}}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
        Tensor a = RandomTensor(shape, dtype, device, rng), b = RandomTensor(shape, dtype, device, rng);
        Tensor out = Tensor::Empty(shape, dtype, device);
        Poison(out);
        Add({.a = a, .b = b, .out = out});
        EXPECT_TRUE(AllClose(AddReference(a, b), out, DefaultTolerance(dtype))) << "contiguous";
        if (shape.size() < 2) continue;
        Tensor sa = testing::WithTransposedStorage(a, 0, 1), sb = testing::WithPaddedRows(b, 3);
        Tensor sout = testing::WithPaddedRows(Tensor::Empty(shape, dtype, device), 2);
        Poison(sout);
        Add({.a = sa, .b = sb, .out = sout});
        EXPECT_TRUE(AllClose(AddReference(a, b), sout, DefaultTolerance(dtype))) << "strided";
        Add({.a = sa, .b = sb, .out = sa});
        EXPECT_TRUE(AllClose(AddReference(a, b), sa, DefaultTolerance(dtype))) << "out = a";
        Add({.a = sout, .b = sb, .out = sb});
        EXPECT_TRUE(AllClose(AddReference(sout, b), sb, DefaultTolerance(dtype))) << "out = b";
      }
    }
    Tensor x = Tensor::FromVector(std::vector<float>{1.5f}, {1}).To(device).View({});
    Tensor y = Tensor::Empty({}, DType::kF32, device);
    Add({.a = x, .b = x, .out = y});
    EXPECT_TRUE(AllClose({3.0}, y, 0.0)) << "0-d";
  });
}

}  // namespace
}  // namespace vt
