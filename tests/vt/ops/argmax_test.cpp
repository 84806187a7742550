// Contract tests of vt::Argmax: the index of each row's largest value, the first
// one on ties (also between far-apart parts of a long row), as i32; f32/bf16/f16, a Qwen3.5-sized vocabulary, strided rows,
// every device and CPU ISA level.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::ToInts;

std::vector<int64_t> Reference(const Tensor& x) {
  const std::vector<double> xs = ToDoubles(x);
  const size_t n = x.size(1);
  std::vector<int64_t> out;
  for (size_t r = 0; r < xs.size() / n; ++r) {
    out.push_back(std::max_element(xs.begin() + r * n, xs.begin() + (r + 1) * n) - (xs.begin() + r * n));
  }
  return out;
}

TEST(ArgmaxTest, MatchesReference) {
  std::mt19937 rng(111);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {4, 9}, {3, 1000}, {2, 248320}}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
        Tensor x = testing::WithPaddedRows(RandomTensor(shape, dtype, device, rng, -3.0f, 3.0f), 2);
        Tensor out = Tensor::Empty({shape[0]}, DType::kI32, device);
        Poison(out);
        Argmax({.x = x, .out = out});
        EXPECT_EQ(ToInts(out), Reference(x));
      }
    }
  });
}

TEST(ArgmaxTest, FirstIndexOnTies) {
  ForEachDeviceAndIsa([&](Device device) {
    // Row 0: max 5 at 1 and 3. Row 1: all equal. Row 2: -inf and a tie at the end.
    const float inf = std::numeric_limits<float>::infinity();
    Tensor x = Tensor::FromVector(std::vector<float>{1, 5, 2, 5, 0, 7, 7, 7, 7, 7, -inf, -1, -3, -1, -1}, {3, 5});
    Tensor out = Tensor::Empty({3}, DType::kI32, device);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Tensor xd = Tensor::Empty({3, 5}, dtype, device);
      xd.CopyFrom(x);
      Argmax({.x = xd, .out = out});
      EXPECT_EQ(ToInts(out), (std::vector<int64_t>{1, 0, 1})) << DTypeName(dtype);
    }
    // Ties between parts of a long row that kernels may split (the GPU in chunks of
    // 8192): row 0 all equal, row 1 its maximum at 15000 and 19000 and 3 (smaller) at 9.
    std::vector<float> wide(2 * 20000, 0.0f);
    wide[20000 + 9] = 0.5f;
    wide[20000 + 15000] = wide[20000 + 19000] = 1.0f;
    Tensor xw = Tensor::FromVector(wide, {2, 20000}).To(device);
    Tensor out_w = Tensor::Empty({2}, DType::kI32, device);
    Argmax({.x = xw, .out = out_w});
    EXPECT_EQ(ToInts(out_w), (std::vector<int64_t>{0, 15000}));
  });
}

// Reference with a mask: the first largest among the allowed indices, 0 when none.
std::vector<int64_t> MaskedReference(const Tensor& x, const std::vector<int32_t>& allowed, int64_t words) {
  const std::vector<double> xs = ToDoubles(x);
  const int64_t n = x.size(1);
  std::vector<int64_t> out;
  for (int64_t r = 0; r < x.size(0); ++r) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (!((static_cast<uint32_t>(allowed[r * words + i / 32]) >> (i % 32)) & 1u)) continue;
      if (best < 0 || xs[r * n + i] > xs[r * n + best]) best = i;
    }
    out.push_back(std::max<int64_t>(best, 0));
  }
  return out;
}

// Masks as a grammar makes them: whole words allowed and rejected, sparse bits, a
// row with nothing allowed, one with everything, bits past the row's end set.
TEST(ArgmaxTest, OnlyAllowedIndicesCompete) {
  std::mt19937 rng(112);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {6, 33}, {6, 1000}, {6, 20001}, {3, 248320}}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
        Tensor x = testing::WithPaddedRows(RandomTensor(shape, dtype, device, rng, -3.0f, 3.0f), 2);
        const int64_t words = (shape[1] + 31) / 32 + 1;  // one spare word
        std::vector<int32_t> allowed(shape[0] * words);
        for (int64_t r = 0; r < shape[0]; ++r) {
          for (int64_t w = 0; w < words; ++w) {
            uint32_t word = 0;
            switch ((r + w / 7) % 6) {
              case 0: word = rng(); break;                             // dense random
              case 1: word = rng() & rng() & rng() & rng(); break;     // sparse
              case 2: word = ~0u; break;                               // all
              case 3: word = rng() % 3 == 0 ? ~0u : 0u; break;         // whole words
              case 4: word = 0u; break;                                // none
              default: word = rng() % 5 == 0 ? 1u << (rng() % 32) : 0u;  // a bit here and there
            }
            allowed[r * words + w] = static_cast<int32_t>(word);
          }
        }
        if (shape[0] > 4) {  // row 4 allows nothing, row 5 everything
          std::fill_n(allowed.begin() + 4 * words, words, 0);
          std::fill_n(allowed.begin() + 5 * words, words, -1);
        }
        const Tensor mask = Tensor::FromVector(allowed, {shape[0], words}).To(device);
        Tensor out = Tensor::Empty({shape[0]}, DType::kI32, device);
        Poison(out);
        Argmax({.x = x, .out = out, .allowed = mask});
        EXPECT_EQ(ToInts(out), MaskedReference(x, allowed, words));
      }
    }
  });
}

TEST(ArgmaxTest, AMaskOfTheWrongShapeIsRejectedByName) {
  Tensor x = Tensor::Zeros({2, 100}, DType::kF32);
  Tensor out = Tensor::Empty({2}, DType::kI32);
  for (const Shape& shape : std::vector<Shape>{{2, 3}, {1, 4}}) {
    try {
      Argmax({.x = x, .out = out, .allowed = Tensor::Zeros(shape, DType::kI32)});
      ADD_FAILURE() << "no error for allowed " << ShapeToString(shape);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("allowed"), std::string::npos) << e.what();
    }
  }
}

// A row that ends where readable memory ends (a PROT_NONE page after it): no kernel
// may load past the row's last element, however its tail is masked afterwards.
TEST(ArgmaxTest, ReadsNothingPastTheRow) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(pages) + page, page, PROT_NONE), 0);
  constexpr int64_t kWidth = 17;  // one full 16-lane vector and a 1-element tail
  float* row = reinterpret_cast<float*>(static_cast<char*>(pages) + page) - kWidth;
  for (int64_t i = 0; i < kWidth; ++i) row[i] = static_cast<float>(i % 5);
  row[kWidth - 1] = 9;  // the search for the maximum reaches the tail
  const Tensor x = Tensor::FromExternal(row, {1, kWidth}, DType::kF32, kCpu, nullptr);
  testing::ForEachCpuIsa([&] {
    Tensor out = Tensor::Empty({1}, DType::kI32);
    Argmax({.x = x, .out = out});
    EXPECT_EQ(ToInts(out), (std::vector<int64_t>{kWidth - 1}));
    Tensor logprobs = Tensor::Empty({1, kWidth}, DType::kF32);
    LogSoftmax({.x = x, .out = logprobs});
  });
  munmap(pages, 2 * page);
}

}  // namespace
}  // namespace vt
