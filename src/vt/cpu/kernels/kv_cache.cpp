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

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

void CheckSlots(const WriteKvCacheArgs& a) {
  const Tensor& slots = a.slot_mapping;
  const int64_t capacity = a.k_cache.size(0) * a.k_cache.size(1);
  for (int64_t t = 0; t < slots.size(0); ++t) {
    const int64_t slot = LoadIndex(slots.data(), slots.dtype(), t * slots.stride(0));
    if (slot >= capacity) {
      throw Error("vt::WriteKvCache on cpu: slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                  " is outside the cache (" + std::to_string(a.k_cache.size(0)) + " blocks of " +
                  std::to_string(a.k_cache.size(1)) + " slots, k_cache " + a.k_cache.Describe() +
                  "); slots must be block * block_size + offset, or negative to skip a token");
    }
  }
}

// Copies one [D] row from `src` (k or v) at token t, head h into cache slot `slot`.
void CopyRow(const Tensor& src, const Tensor& cache, int64_t t, int64_t h, int64_t slot) {
  const int64_t d = src.size(2), block_size = cache.size(1);
  const char* from = ElementAddress(src.data(), src.dtype(), t * src.stride(0) + h * src.stride(1));
  char* to = ElementAddress(cache.data(), cache.dtype(),
                            (slot / block_size) * cache.stride(0) + (slot % block_size) * cache.stride(1) +
                                h * cache.stride(2));
  if (src.dtype() == cache.dtype()) {
    std::memcpy(to, from, static_cast<size_t>(BytesFor(src.dtype(), d)));
  } else {
    for (int64_t i = 0; i < d; ++i) StoreFloat(to, cache.dtype(), i, LoadFloat(from, src.dtype(), i));
  }
}

void WriteKvCacheCpu(const WriteKvCacheArgs& a) {
  CheckSlots(a);
  const int64_t tokens = a.k.size(0), heads = a.k.size(1), d = a.k.size(2);
  const Tensor& slots = a.slot_mapping;
  ParallelFor(tokens, std::max<int64_t>(1, 8192 / (heads * d)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot = LoadIndex(slots.data(), slots.dtype(), t * slots.stride(0));
      if (slot < 0) continue;
      for (int64_t h = 0; h < heads; ++h) {
        CopyRow(a.k, a.k_cache, t, h, slot);
        CopyRow(a.v, a.v_cache, t, h, slot);
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(WriteKvCache, kCPU, WriteKvCacheCpu);

}  // namespace vt::cpu
