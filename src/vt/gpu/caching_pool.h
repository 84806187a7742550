// A caching pool in front of a device's raw allocator (cudaMalloc / hipMalloc).
//
// Raw device allocation is slow and synchronises the device, and an engine step
// allocates the same activation shapes every time. The pool rounds each request up
// to a size class, and a freed block goes to a free list of its class instead of
// back to the runtime; the next request of that class takes it. All work of a
// device runs on its one stream, so a block freed while a kernel that uses it is
// still queued can be handed out at once: whatever the new owner enqueues runs
// after that kernel.
//
// Size classes: below 1 MiB, 512 bytes or the next of 1, 1.25, 1.5, 1.75 x 2^k
// (at most 25% slack on small, short-lived tensors); from 1 MiB, the next multiple
// of 2 MiB (large, long-lived tensors such as weights and the KV cache waste
// little). When the raw allocator fails, the pool returns its cached blocks to the
// runtime and tries once more.
//
// Host-only code with the raw allocator injected, so its logic is unit-tested
// without a GPU (tests/vt/gpu/caching_pool_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vt::gpu {

class CachingPool {
 public:
  using RawAllocate = std::function<void*(size_t bytes)>;  // nullptr when out of memory
  using RawFree = std::function<void(void* ptr)>;

  CachingPool(RawAllocate raw_allocate, RawFree raw_free)
      : raw_allocate_(std::move(raw_allocate)), raw_free_(std::move(raw_free)) {}
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;
  ~CachingPool() { ReleaseCached(); }

  static constexpr size_t kMinClass = 512;
  static constexpr size_t kLargeThreshold = size_t{1} << 20;
  static constexpr size_t kLargeGranule = size_t{2} << 20;

  static size_t SizeClass(size_t bytes) {
    if (bytes <= kMinClass) return kMinClass;
    if (bytes >= kLargeThreshold) return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
    size_t power = kMinClass;
    while (power * 2 <= bytes) power *= 2;  // power <= bytes < 2 * power
    const size_t step = power / 4;
    return (bytes + step - 1) / step * step;
  }

  // A block of at least `bytes`, or nullptr when the device is out of memory even
  // after the cached blocks were released.
  void* Allocate(size_t bytes) {
    const size_t size = SizeClass(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto cached = free_blocks_.find(size);
    if (cached != free_blocks_.end() && !cached->second.empty()) {
      void* ptr = cached->second.back();
      cached->second.pop_back();
      cached_bytes_ -= size;
      return Track(ptr, size);
    }
    void* ptr = raw_allocate_(size);
    if (ptr == nullptr && cached_bytes_ > 0) {
      ReleaseCachedLocked();
      ptr = raw_allocate_(size);
    }
    return ptr == nullptr ? nullptr : Track(ptr, size);
  }

  // Returns the block to its free list. Returns false for a pointer the pool did
  // not hand out (the caller reports it).
  bool Free(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto live = live_blocks_.find(ptr);
    if (live == live_blocks_.end()) return false;
    const size_t size = live->second;
    live_blocks_.erase(live);
    live_bytes_ -= size;
    free_blocks_[size].push_back(ptr);
    cached_bytes_ += size;
    return true;
  }

  // Hands every live block over to the caller (for another pool to Adopt): used
  // when a pool goes away while tensors still hold blocks it gave out.
  std::vector<std::pair<void*, size_t>> TakeLiveBlocks() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<void*, size_t>> blocks(live_blocks_.begin(), live_blocks_.end());
    live_blocks_.clear();
    live_bytes_ = 0;
    return blocks;
  }

  // Takes a live block of size class `size` from another pool: its Free comes here.
  void Adopt(void* ptr, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    Track(ptr, size);
  }

  // Gives every cached (free) block back to the raw allocator.
  void ReleaseCached() {
    std::lock_guard<std::mutex> lock(mutex_);
    ReleaseCachedLocked();
  }

  size_t live_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_bytes_;
  }
  size_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }
  // The highest live_bytes since the last ResetPeak (the engine's memory profiling).
  size_t peak_live_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_live_bytes_;
  }
  void ResetPeak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_live_bytes_ = live_bytes_;
  }

 private:
  void* Track(void* ptr, size_t size) {
    live_blocks_[ptr] = size;
    live_bytes_ += size;
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    return ptr;
  }

  void ReleaseCachedLocked() {
    for (auto& [size, blocks] : free_blocks_) {
      for (void* ptr : blocks) raw_free_(ptr);
      blocks.clear();
    }
    cached_bytes_ = 0;
  }

  RawAllocate raw_allocate_;
  RawFree raw_free_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // size class -> free blocks
  std::unordered_map<void*, size_t> live_blocks_;     // handed-out block -> size class
  size_t live_bytes_ = 0;
  size_t peak_live_bytes_ = 0;
  size_t cached_bytes_ = 0;
};

}  // namespace vt::gpu
