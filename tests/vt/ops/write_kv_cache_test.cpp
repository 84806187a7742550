// Contract tests of vt::WriteKvCache: k/v rows land in the cache slots named by
// slot_mapping (block = slot / block_size, offset = slot % block_size), addressed
// only through the cache views' strides. Layouts: separate contiguous caches, K and
// V interleaved in one buffer [num_blocks, 2, block_size, Nkv, D], one layer's
// slice of [layers, ...] buffers, head-major storage with padded rows. The whole
// backing buffer is poisoned first and afterwards every element outside the
// addressed rows must still be NaN. Negative slots are skipped; on CPU a slot past
// the cache throws before anything is written.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

constexpr int64_t kBlocks = 7, kBlockSize = 4, kKvHeads = 3, kHeadDim = 37;

// The caches as views of the buffers they live in.
struct CacheViews {
  std::vector<Tensor> buffers;
  Tensor k_cache, v_cache;
};

struct Layout {
  const char* name;
  std::function<CacheViews(DType, Device)> make;
};

std::vector<Layout> Layouts() {
  const Shape cache_shape = {kBlocks, kBlockSize, kKvHeads, kHeadDim};
  return {
      {"separate contiguous",
       [=](DType dtype, Device device) {
         Tensor k = Tensor::Empty(cache_shape, dtype, device), v = Tensor::Empty(cache_shape, dtype, device);
         return CacheViews{{k, v}, k, v};
       }},
      {"interleaved K/V",
       [=](DType dtype, Device device) {
         Tensor buffer = Tensor::Empty({kBlocks, 2, kBlockSize, kKvHeads, kHeadDim}, dtype, device);
         return CacheViews{{buffer}, buffer.Select(1, 0), buffer.Select(1, 1)};
       }},
      {"layer slice",
       [=](DType dtype, Device device) {
         Tensor k = Tensor::Empty({3, kBlocks, kBlockSize, kKvHeads, kHeadDim}, dtype, device);
         Tensor v = Tensor::Empty({3, kBlocks, kBlockSize, kKvHeads, kHeadDim}, dtype, device);
         return CacheViews{{k, v}, k.Select(0, 1), v.Select(0, 2)};
       }},
      {"head-major padded rows",
       [=](DType dtype, Device device) {
         Tensor k = Tensor::Empty({kBlocks, kKvHeads, kBlockSize, kHeadDim + 5}, dtype, device);
         Tensor v = Tensor::Empty({kBlocks, kKvHeads, kBlockSize, kHeadDim + 3}, dtype, device);
         return CacheViews{{k, v}, k.Slice(3, 0, kHeadDim).Transpose(1, 2), v.Slice(3, 0, kHeadDim).Transpose(1, 2)};
       }},
  };
}

double RoundTo(double value, DType dtype) {
  const float f = static_cast<float>(value);
  if (dtype == DType::kBF16) return Bf16ToF32(F32ToBf16(f));
  if (dtype == DType::kF16) return F16ToF32(F32ToF16(f));
  return f;
}

// The expected contents of `buffer`: NaN everywhere but the rows addressed through
// `cache` (a view of `buffer`), which hold src's rows cast to the cache dtype.
std::vector<double> ExpectedBuffer(const Tensor& buffer, const Tensor& cache, const Tensor& src,
                                   const std::vector<int64_t>& slots) {
  std::vector<double> expected(buffer.numel(), std::nan(""));
  const std::vector<double> values = ToDoubles(src);
  const int64_t base = cache.offset() - buffer.offset();
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    const int64_t block = slots[t] / kBlockSize, offset = slots[t] % kBlockSize;
    for (int64_t h = 0; h < kKvHeads; ++h) {
      for (int64_t i = 0; i < kHeadDim; ++i) {
        const int64_t at = base + block * cache.stride(0) + offset * cache.stride(1) + h * cache.stride(2) + i;
        expected[at] = RoundTo(values[(t * kKvHeads + h) * kHeadDim + i], cache.dtype());
      }
    }
  }
  return expected;
}

// Element-exact: a copy or one cast; NaN where nothing may be written.
::testing::AssertionResult SameContents(const std::vector<double>& expected, const Tensor& buffer) {
  const std::vector<double> got = ToDoubles(buffer);
  for (size_t i = 0; i < expected.size(); ++i) {
    const bool same = std::isnan(expected[i]) ? std::isnan(got[i]) : got[i] == expected[i];
    if (!same) {
      return ::testing::AssertionFailure() << "buffer element " << i << ": expected " << expected[i] << ", got "
                                           << got[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// Distinct random slots, some tokens skipped (-1).
std::vector<int64_t> RandomSlots(int64_t tokens, std::mt19937& rng) {
  std::vector<int64_t> all(kBlocks * kBlockSize);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> slots(all.begin(), all.begin() + tokens);
  slots[1] = -1;
  slots[tokens - 2] = -1;
  return slots;
}

// slot_mapping [T] of `dtype` whose elements sit 2 apart in memory.
Tensor SlotTensor(const std::vector<int64_t>& slots, DType dtype, Device device) {
  const int64_t tokens = static_cast<int64_t>(slots.size());
  std::vector<int64_t> padded;
  for (int64_t s : slots) padded.insert(padded.end(), {s, 0});
  Tensor buffer = Tensor::Empty({tokens, 2}, dtype, device);
  buffer.CopyFrom(Tensor::FromVector(padded, {tokens, 2}));
  return buffer.Select(1, 0);
}

TEST(WriteKvCacheTest, WritesOnlyAddressedRowsThroughViewStrides) {
  std::mt19937 rng(81);
  const int64_t tokens = 13;
  ForEachDeviceAndIsa([&](Device device) {
    for (const Layout& layout : Layouts()) {
      for (auto [src_dtype, cache_dtype] : std::vector<std::pair<DType, DType>>{
               {DType::kF32, DType::kF32}, {DType::kBF16, DType::kBF16}, {DType::kF32, DType::kBF16},
               {DType::kBF16, DType::kF32}, {DType::kF16, DType::kF16}, {DType::kF32, DType::kF16}}) {
        for (DType slot_dtype : {DType::kI32, DType::kI64}) {
          SCOPED_TRACE(std::string(layout.name) + " " + DTypeName(src_dtype) + " -> " + DTypeName(cache_dtype) +
                       " slots " + DTypeName(slot_dtype));
          CacheViews views = layout.make(cache_dtype, device);
          for (const Tensor& b : views.buffers) Poison(b);
          Tensor k = testing::WithPaddedRows(RandomTensor({tokens, kKvHeads, kHeadDim}, src_dtype, device, rng), 2);
          Tensor v = testing::WithTransposedStorage(RandomTensor({tokens, kKvHeads, kHeadDim}, src_dtype, device, rng),
                                                    0, 1);
          const std::vector<int64_t> slots = RandomSlots(tokens, rng);
          WriteKvCache({.k = k, .v = v, .k_cache = views.k_cache, .v_cache = views.v_cache,
                        .slot_mapping = SlotTensor(slots, slot_dtype, device)});
          if (views.buffers.size() == 1) {
            std::vector<double> expected = ExpectedBuffer(views.buffers[0], views.k_cache, k, slots);
            const std::vector<double> expected_v = ExpectedBuffer(views.buffers[0], views.v_cache, v, slots);
            for (size_t i = 0; i < expected.size(); ++i) {
              if (!std::isnan(expected_v[i])) expected[i] = expected_v[i];
            }
            EXPECT_TRUE(SameContents(expected, views.buffers[0]));
          } else {
            EXPECT_TRUE(SameContents(ExpectedBuffer(views.buffers[0], views.k_cache, k, slots), views.buffers[0]));
            EXPECT_TRUE(SameContents(ExpectedBuffer(views.buffers[1], views.v_cache, v, slots), views.buffers[1]));
          }
        }
      }
    }
  });
}

TEST(WriteKvCacheTest, CpuSlotPastTheCacheThrowsBeforeWriting) {
  std::mt19937 rng(82);
  testing::ForEachCpuIsa([&] {
    Tensor buffer = Tensor::Empty({kBlocks, 2, kBlockSize, kKvHeads, kHeadDim}, DType::kBF16);
    Poison(buffer);
    Tensor k = RandomTensor({3, kKvHeads, kHeadDim}, DType::kBF16, kCpu, rng);
    Tensor slots = Tensor::FromVector(std::vector<int32_t>{0, 5, kBlocks * kBlockSize}, {3});
    try {
      WriteKvCache({.k = k, .v = k, .k_cache = buffer.Select(1, 0), .v_cache = buffer.Select(1, 1),
                    .slot_mapping = slots});
      ADD_FAILURE() << "no error for a slot past the cache";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("WriteKvCache"), std::string::npos) << what;
      EXPECT_NE(what.find("slot_mapping[2] = 28"), std::string::npos) << what;
    }
    EXPECT_TRUE(SameContents(std::vector<double>(buffer.numel(), std::nan("")), buffer));
  });
}

}  // namespace
}  // namespace vt
