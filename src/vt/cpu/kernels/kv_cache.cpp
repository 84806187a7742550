// CPU kernel for WriteKvCache: scatter the new tokens' keys and values into the
// paged caches.
//
// k, v [T, Nkv, D] (strided rows); k_cache, v_cache [num_blocks, block_size, Nkv, D]
// views with any strides (K and V may interleave in one allocation, or be one
// layer's slice of a larger buffer); slot_mapping [T] i32/i64 (any stride).
// Token t goes to block slot / block_size, offset slot % block_size; a negative
// slot skips the token. Every cache address comes from the view's strides, so only
// the addressed rows are written. All slots are checked before anything is written:
// one outside the cache throws and leaves the cache untouched. The cache dtype may
// differ from k/v's (a cast per element); equal dtypes copy rows with memcpy.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

// One side (k or v) of the write, as raw addresses and strides in elements.
struct RowCopy {
  RowCopy(const Tensor& src, const Tensor& cache)
      : from(static_cast<const char*>(src.data())), to(static_cast<char*>(cache.data())), from_dtype(src.dtype()),
        to_dtype(cache.dtype()), from_bytes(BytesFor(src.dtype(), 1)), to_bytes(BytesFor(cache.dtype(), 1)),
        src_strides{src.stride(0), src.stride(1)}, cache_strides{cache.stride(0), cache.stride(1), cache.stride(2)},
        block_size(cache.size(1)), d(src.size(2)) {}

  // Copies the [D] row of token t, head h into cache slot `slot`.
  void Run(int64_t t, int64_t h, int64_t slot) const {
    const char* row = from + from_bytes * (t * src_strides[0] + h * src_strides[1]);
    char* dst = to + to_bytes * ((slot / block_size) * cache_strides[0] + (slot % block_size) * cache_strides[1] +
                                 h * cache_strides[2]);
    if (from_dtype == to_dtype) {
      std::memcpy(dst, row, static_cast<size_t>(from_bytes * d));
    } else {
      for (int64_t i = 0; i < d; ++i) StoreFloat(dst, to_dtype, i, LoadFloat(row, from_dtype, i));
    }
  }

  const char* from;
  char* to;
  DType from_dtype, to_dtype;
  int64_t from_bytes, to_bytes;
  int64_t src_strides[2], cache_strides[3];
  int64_t block_size, d;
};

// slot_mapping as int64, after checking every slot against the cache size.
std::vector<int64_t> ReadSlots(const WriteKvCacheArgs& a) {
  const Tensor& slots = a.slot_mapping;
  const int64_t capacity = a.k_cache.size(0) * a.k_cache.size(1), stride = slots.stride(0);
  std::vector<int64_t> values(static_cast<size_t>(slots.size(0)));
  for (int64_t t = 0; t < slots.size(0); ++t) {
    values[t] = LoadIndex(slots.data(), slots.dtype(), t * stride);
    if (values[t] >= capacity) {
      throw Error("vt::WriteKvCache on cpu: slot_mapping[" + std::to_string(t) + "] = " + std::to_string(values[t]) +
                  " is outside the cache (" + std::to_string(a.k_cache.size(0)) + " blocks of " +
                  std::to_string(a.k_cache.size(1)) + " slots, k_cache " + a.k_cache.Describe() +
                  "); slots must be block * block_size + offset, or negative to skip a token");
    }
  }
  return values;
}

void WriteKvCacheCpu(const WriteKvCacheArgs& a) {
  const std::vector<int64_t> slots = ReadSlots(a);
  const int64_t tokens = a.k.size(0), heads = a.k.size(1), d = a.k.size(2);
  const RowCopy k(a.k, a.k_cache), v(a.v, a.v_cache);
  ParallelFor(tokens, std::max<int64_t>(1, 8192 / (heads * d)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (slots[t] < 0) continue;
      for (int64_t h = 0; h < heads; ++h) {
        k.Run(t, h, slots[t]);
        v.Run(t, h, slots[t]);
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(WriteKvCache, kCPU, WriteKvCacheCpu);

}  // namespace vt::cpu
