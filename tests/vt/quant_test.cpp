// GGUF block formats: hand-built blocks decode to the values the format description
// gives (so our byte layout is ggml's), quantize -> dequantize round trips stay
// within what each format can represent, and vt::Copy dequantizes every block type.
#include "vt/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "testing/op_testing.h"

namespace vt {
namespace {

constexpr DType kBlockTypes[] = {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};

std::vector<float> Decode(const void* blocks, DType dtype, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  DequantizeRow(blocks, dtype, n, out.data());
  return out;
}

template <typename Block>
std::vector<float> DecodeBlock(const Block& block, DType dtype) {
  return Decode(&block, dtype, Info(dtype).block_elems);
}

void ExpectDecodes(const std::vector<float>& got, const std::vector<float>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "value " << i;
}

// ---- hand-built blocks: bytes written from the layout description ----------------

// f16 bit patterns of a few exact values.
constexpr uint16_t kF16One = 0x3C00, kF16Half = 0x3800, kF16Quarter = 0x3400, kF16Two = 0x4000;

TEST(QuantTest, HandBuiltQ8_0Decodes) {
  BlockQ8_0 block;
  block.d = kF16Half;
  std::vector<float> expected;
  for (int i = 0; i < 32; ++i) {
    block.qs[i] = static_cast<int8_t>(i * 8 - 127);
    expected.push_back(0.5f * (i * 8 - 127));
  }
  ExpectDecodes(DecodeBlock(block, DType::kQ8_0), expected);
}

TEST(QuantTest, HandBuiltQ4_0Decodes) {
  BlockQ4_0 block;
  block.d = kF16Two;
  std::vector<float> expected(32);
  for (int j = 0; j < 16; ++j) {
    const int lo = j, hi = 15 - j;  // value j in the low nibble, value j + 16 in the high one
    block.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    expected[j] = 2.0f * (lo - 8);
    expected[j + 16] = 2.0f * (hi - 8);
  }
  ExpectDecodes(DecodeBlock(block, DType::kQ4_0), expected);
}

// The 12 scale bytes of Q4_K/Q5_K, packed from the description: bytes 0-3 hold the
// scales of sub-blocks 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7
// the mins of 0-3 and the top 2 bits of mins 4-7; bytes 8-11 the low nibbles of
// scale (low) and min (high) of sub-blocks 4-7.
void PackScalesAndMins(const int sc[8], const int m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

const int kSc[8] = {1, 2, 3, 63, 17, 33, 50, 63};
const int kMin[8] = {0, 1, 62, 3, 20, 40, 63, 5};

TEST(QuantTest, HandBuiltQ4_KDecodes) {
  BlockQ4_K block;
  block.d = kF16One;
  block.dmin = kF16Half;
  PackScalesAndMins(kSc, kMin, block.scales);
  std::vector<float> expected(256);
  for (int g = 0; g < 4; ++g) {  // group g: sub-block 2g in low nibbles, 2g + 1 in high
    for (int l = 0; l < 32; ++l) {
      const int lo = (l + g) % 16, hi = (3 * l + g) % 16;
      block.qs[32 * g + l] = static_cast<uint8_t>(lo | (hi << 4));
      expected[64 * g + l] = 1.0f * kSc[2 * g] * lo - 0.5f * kMin[2 * g];
      expected[64 * g + 32 + l] = 1.0f * kSc[2 * g + 1] * hi - 0.5f * kMin[2 * g + 1];
    }
  }
  ExpectDecodes(DecodeBlock(block, DType::kQ4_K), expected);
}

TEST(QuantTest, HandBuiltQ5_KDecodes) {
  BlockQ5_K block;
  block.d = kF16Quarter;
  block.dmin = kF16One;
  PackScalesAndMins(kSc, kMin, block.scales);
  std::memset(block.qh, 0, sizeof(block.qh));
  std::vector<float> expected(256);
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int lo = (5 * l + g) % 32, hi = (7 * l + 3 * g) % 32;  // 5-bit values
      block.qs[32 * g + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
      // The fifth bit of value 64g + l is bit 2g of qh[l]; of 64g + 32 + l, bit 2g + 1.
      block.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      expected[64 * g + l] = 0.25f * kSc[2 * g] * lo - 1.0f * kMin[2 * g];
      expected[64 * g + 32 + l] = 0.25f * kSc[2 * g + 1] * hi - 1.0f * kMin[2 * g + 1];
    }
  }
  ExpectDecodes(DecodeBlock(block, DType::kQ5_K), expected);
}

TEST(QuantTest, HandBuiltQ6_KDecodes) {
  BlockQ6_K block;
  block.d = kF16Quarter;
  for (int j = 0; j < 16; ++j) block.scales[j] = static_cast<int8_t>(j % 2 ? -9 * j : 8 * j + 1);
  std::memset(block.ql, 0, sizeof(block.ql));
  std::memset(block.qh, 0, sizeof(block.qh));
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) q[i] = (i * 37 + 11) % 64;
  // Half h covers values 128h..128h+127; for l < 32 the four values l, l+32, l+64,
  // l+96 of the half share ql bytes l / l+32 (low, high nibbles) and 2-bit fields of qh[l].
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int* v = &q[128 * h];
      block.ql[64 * h + l] = static_cast<uint8_t>((v[l] & 15) | ((v[l + 64] & 15) << 4));
      block.ql[64 * h + 32 + l] = static_cast<uint8_t>((v[l + 32] & 15) | ((v[l + 96] & 15) << 4));
      block.qh[32 * h + l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                                  ((v[l + 96] >> 4) << 6));
    }
  }
  std::vector<float> expected(256);
  for (int i = 0; i < 256; ++i) expected[i] = 0.25f * block.scales[i / 16] * (q[i] - 32);
  ExpectDecodes(DecodeBlock(block, DType::kQ6_K), expected);
}

TEST(QuantTest, HandBuiltQ8_KDecodesAndQuantizerFillsBlockSums) {
  BlockQ8_K block;
  block.d = 0.125f;
  std::vector<float> expected(256);
  for (int i = 0; i < 256; ++i) {
    block.qs[i] = static_cast<int8_t>((i * 13) % 255 - 127);
    expected[i] = 0.125f * block.qs[i];
  }
  ExpectDecodes(DecodeBlock(block, DType::kQ8_K), expected);

  BlockQ8_K quantized;
  QuantizeRow(expected.data(), 256, &quantized, DType::kQ8_K);
  ExpectDecodes(DecodeBlock(quantized, DType::kQ8_K), expected);  // exactly representable
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i) sum += quantized.qs[i];
    EXPECT_EQ(quantized.bsums[j], sum) << "bsums[" << j << "]";
  }
}

// ---- round trips ------------------------------------------------------------------

// Largest error each format allows for one block of `x` (block_elems values), from
// its definition:
//   Q8_0: q = round(x / d), d = f16(amax / 127): half a step, amax / 254, widened by
//         f16's relative rounding of d (2^-11 on up to 127 steps).
//   Q8_K: the same with an f32 d.
//   Q4_0: d = max / -8 maps the extreme to -8; the opposite extreme clips at +7, one
//         full step d = amax / 8 (values inside: half a step).
//   Q4_K / Q5_K: one step of the widest sub-block, R / nmax with R = max(x) -
//         min(min(x), 0) over a 32-value sub-block and nmax 15 / 31: half a step of
//         rounding plus the 6-bit rounding of the sub-block scale and min (each off
//         by at most 1/126 of the block's largest, moving the grid's ends by up to
//         about R / 63) and least-squares grids that may give up the extremes.
//   Q6_K: one step of the widest sub-block, amax16 / 32 (half a step of rounding,
//         the rest from the 8-bit scales and the least-squares fit).
double BlockErrorBound(DType dtype, const float* x) {
  const int n = static_cast<int>(Info(dtype).block_elems);
  double amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  switch (dtype) {
    case DType::kQ8_0: return amax / 254 * (1 + 1.0 / 1024) + 1e-30;
    case DType::kQ8_K: return amax / 254 * (1 + 1e-6) + 1e-30;
    case DType::kQ4_0: return amax / 8 * (1 + 1.0 / 128) + 1e-30;
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const double nmax = dtype == DType::kQ4_K ? 15 : 31;
      double widest = 0;
      for (int j = 0; j < 8; ++j) {
        const float* sub = x + 32 * j;
        const double hi = *std::max_element(sub, sub + 32), lo = std::min<double>(0, *std::min_element(sub, sub + 32));
        widest = std::max(widest, hi - lo);
      }
      return widest / nmax + 1e-30;
    }
    case DType::kQ6_K: return amax / 32 + 1e-30;
    default: return 0;
  }
}

// Rows of length n drawn from distributions that stress different parts of a format:
// symmetric, all positive (min = 0), all negative, heavy-tailed, and a zero row.
std::vector<float> TestRow(int kind, int64_t n, std::mt19937& rng) {
  std::vector<float> row(static_cast<size_t>(n));
  std::uniform_real_distribution<float> uniform(-1, 1), positive(0.5f, 2), negative(-3, -1);
  std::normal_distribution<float> normal(0, 1);
  for (float& v : row) {
    switch (kind) {
      case 0: v = uniform(rng); break;
      case 1: v = positive(rng); break;
      case 2: v = negative(rng); break;
      case 3: v = normal(rng) * (uniform(rng) > 0.95f ? 20.0f : 1.0f); break;
      default: v = 0; break;
    }
  }
  return row;
}

TEST(QuantTest, RoundTripErrorWithinFormatBound) {
  std::mt19937 rng(7);
  for (DType dtype : kBlockTypes) {
    const int64_t block = Info(dtype).block_elems;
    for (int64_t n : {block, 3 * block, 1024 + block}) {
      for (int kind = 0; kind < 5; ++kind) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " n=" + std::to_string(n) + " kind=" + std::to_string(kind));
        const std::vector<float> x = TestRow(kind, n, rng);
        std::vector<uint8_t> blocks(static_cast<size_t>(BytesFor(dtype, n)));
        QuantizeRow(x.data(), n, blocks.data(), dtype);
        const std::vector<float> y = Decode(blocks.data(), dtype, n);
        for (int64_t b = 0; b < n / block; ++b) {
          const double bound = BlockErrorBound(dtype, x.data() + b * block);
          for (int64_t i = b * block; i < (b + 1) * block; ++i) {
            ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << "value " << i << " was " << x[i];
          }
        }
      }
    }
  }
}

// The scale search is worth it: on Gaussian data the RMS error of the K-quants is
// below that of rounding on the plain range grid (step R / nmax gives R / nmax /
// sqrt(12) for uniform rounding error).
TEST(QuantTest, KQuantRmsErrorBeatsRangeGrid) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  for (DType dtype : {DType::kQ4_K, DType::kQ5_K}) {
    const int nmax = dtype == DType::kQ4_K ? 15 : 31;
    std::vector<float> x(4096);
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> blocks(static_cast<size_t>(BytesFor(dtype, 4096)));
    QuantizeRow(x.data(), 4096, blocks.data(), dtype);
    const std::vector<float> y = Decode(blocks.data(), dtype, 4096);
    double err2 = 0, plain2 = 0;
    for (int j = 0; j < 4096 / 32; ++j) {
      const float* sub = &x[32 * j];
      const double range = *std::max_element(sub, sub + 32) - std::min(0.0f, *std::min_element(sub, sub + 32));
      plain2 += 32 * std::pow(range / nmax, 2) / 12;
      for (int i = 32 * j; i < 32 * j + 32; ++i) err2 += std::pow(static_cast<double>(y[i]) - x[i], 2);
    }
    EXPECT_LT(err2, plain2) << DTypeName(dtype) << ": RMS " << std::sqrt(err2 / 4096) << " vs range grid "
                            << std::sqrt(plain2 / 4096);
  }
}

TEST(QuantTest, NonBlockDtypeIsRejected) {
  float x[32] = {};
  uint8_t out[128];
  EXPECT_THROW(QuantizeRow(x, 32, out, DType::kF32), Error);
  EXPECT_THROW(DequantizeRow(out, DType::kBF16, 32, x), Error);
}

// ---- the Copy op dequantizes every block type ------------------------------------

TEST(QuantTest, CopyDequantizesEveryBlockType) {
  std::mt19937 rng(3);
  for (DType dtype : kBlockTypes) {
    const int64_t rows = 3, n = 2 * Info(dtype).block_elems;
    Tensor quantized = Tensor::Empty({rows, n}, dtype);
    std::vector<double> expected;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> x = TestRow(static_cast<int>(r), n, rng);
      char* row = static_cast<char*>(quantized.data()) + r * BytesFor(dtype, n);
      QuantizeRow(x.data(), n, row, dtype);
      for (float v : Decode(row, dtype, n)) expected.push_back(v);
    }
    testing::ForEachDeviceAndIsa([&](Device device) {
      for (DType out_dtype : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " -> " + DTypeName(out_dtype));
        Tensor dst = testing::WithPaddedRows(Tensor::Zeros({rows, n}, out_dtype, device), 5);
        testing::Poison(dst);
        Copy({.src = device == kCpu ? quantized : quantized.To(device), .dst = dst});
        // f32: the same decode, exactly; bf16: one rounding of each decoded value.
        EXPECT_TRUE(testing::AllClose(expected, dst, out_dtype == DType::kF32 ? 0.0 : 1.0 / 256));
      }
    });
  }
}

}  // namespace
}  // namespace vt
