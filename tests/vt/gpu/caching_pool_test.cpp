// The GPU backends' caching pool (src/vt/gpu/caching_pool.h), with a fake raw
// allocator so its logic is checked on any machine: size classes, reuse of freed
// blocks, release of the cache when the device runs out, and foreign pointers.
#include "vt/gpu/caching_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

namespace vt::gpu {
namespace {

// A raw allocator with a byte budget that records what it handed out.
struct FakeDevice {
  size_t budget = size_t{64} << 20;
  size_t in_use = 0;
  int raw_allocations = 0, raw_frees = 0;
  std::set<void*> live;

  CachingPool MakePool() {
    return CachingPool(
        [this](size_t bytes) -> void* {
          if (in_use + bytes > budget) return nullptr;
          void* p = std::malloc(bytes);
          in_use += bytes;
          ++raw_allocations;
          live.insert(p);
          sizes[p] = bytes;
          return p;
        },
        [this](void* p) {
          in_use -= sizes.at(p);
          ++raw_frees;
          live.erase(p);
          std::free(p);
        });
  }
  std::map<void*, size_t> sizes;
};

TEST(CachingPoolTest, SizeClasses) {
  EXPECT_EQ(CachingPool::SizeClass(0), 512u);
  EXPECT_EQ(CachingPool::SizeClass(1), 512u);
  EXPECT_EQ(CachingPool::SizeClass(512), 512u);
  EXPECT_EQ(CachingPool::SizeClass(513), 640u);      // 512 + 512/4
  EXPECT_EQ(CachingPool::SizeClass(1000), 1024u);
  EXPECT_EQ(CachingPool::SizeClass(1025), 1280u);
  EXPECT_EQ(CachingPool::SizeClass(3000), 3072u);    // 2048 * 1.5
  EXPECT_EQ(CachingPool::SizeClass((1 << 20) - 1), size_t{1} << 20);
  EXPECT_EQ(CachingPool::SizeClass(size_t{1} << 20), size_t{2} << 20);  // large: 2 MiB granules
  EXPECT_EQ(CachingPool::SizeClass((size_t{2} << 20) + 1), size_t{4} << 20);
  for (size_t bytes = 1; bytes < (size_t{8} << 20); bytes = bytes * 3 / 2 + 1) {
    const size_t size = CachingPool::SizeClass(bytes);
    EXPECT_GE(size, bytes);
    if (bytes > 512 && bytes < (size_t{1} << 20)) {
      EXPECT_LE(size, bytes + bytes / 4 + 1) << bytes;
    }
  }
}

TEST(CachingPoolTest, FreedBlocksAreReusedByTheirClass) {
  FakeDevice device;
  CachingPool pool = device.MakePool();
  void* a = pool.Allocate(1000);
  void* b = pool.Allocate(5000);
  EXPECT_EQ(device.raw_allocations, 2);
  EXPECT_TRUE(pool.Free(a));
  EXPECT_EQ(pool.cached_bytes(), 1024u);
  EXPECT_EQ(pool.Allocate(900), a);  // same class (1024): the cached block, no raw call
  EXPECT_EQ(device.raw_allocations, 2);
  void* c = pool.Allocate(100);      // another class: a new raw block
  EXPECT_NE(c, a);
  EXPECT_EQ(device.raw_allocations, 3);
  EXPECT_EQ(pool.live_bytes(), 1024u + 5120u + 512u);
  for (void* p : {a, b, c}) EXPECT_TRUE(pool.Free(p));
  EXPECT_EQ(pool.live_bytes(), 0u);
  EXPECT_EQ(device.raw_frees, 0);
  pool.ReleaseCached();
  EXPECT_EQ(device.raw_frees, 3);
  EXPECT_TRUE(device.live.empty());
}

TEST(CachingPoolTest, OutOfMemoryReleasesTheCacheAndRetries) {
  FakeDevice device;
  device.budget = size_t{8} << 20;
  CachingPool pool = device.MakePool();
  void* small = pool.Allocate(size_t{3} << 20);  // class 4 MiB
  ASSERT_NE(small, nullptr);
  EXPECT_TRUE(pool.Free(small));                 // cached, still held from the device
  void* big = pool.Allocate(size_t{6} << 20);    // does not fit next to the cached 4 MiB
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_EQ(device.raw_frees, 1);
  EXPECT_EQ(pool.Allocate(size_t{4} << 20), nullptr);  // really out of memory
  EXPECT_TRUE(pool.Free(big));
}

TEST(CachingPoolTest, ForeignPointersAreRefused) {
  FakeDevice device;
  CachingPool pool = device.MakePool();
  int on_stack = 0;
  EXPECT_FALSE(pool.Free(&on_stack));
  void* p = pool.Allocate(10);
  EXPECT_TRUE(pool.Free(p));
  EXPECT_FALSE(pool.Free(p));  // a double free is reported, not cached twice
}

TEST(CachingPoolTest, DestructorGivesCachedBlocksBack) {
  FakeDevice device;
  {
    CachingPool pool = device.MakePool();
    for (size_t bytes : {size_t{100}, size_t{20000}, size_t{3} << 20}) EXPECT_TRUE(pool.Free(pool.Allocate(bytes)));
  }
  EXPECT_TRUE(device.live.empty());
}

// A graph's pool going away while a tensor still holds one of its blocks hands the
// block to the device's main pool, whose Free then takes it (src/vt/gpu/gpu_device.cu).
TEST(CachingPoolTest, LiveBlocksMoveToAnotherPool) {
  FakeDevice device;
  CachingPool main_pool = device.MakePool();
  void* kept = nullptr;
  {
    CachingPool graph_pool = device.MakePool();
    kept = graph_pool.Allocate(3000);
    EXPECT_TRUE(graph_pool.Free(graph_pool.Allocate(100)));  // cached: given back with the pool
    for (const auto& [ptr, size] : graph_pool.TakeLiveBlocks()) main_pool.Adopt(ptr, size);
    EXPECT_EQ(graph_pool.live_bytes(), 0u);
    EXPECT_FALSE(graph_pool.Free(kept));
  }
  EXPECT_EQ(device.live.size(), 1u);
  EXPECT_EQ(main_pool.live_bytes(), CachingPool::SizeClass(3000));
  EXPECT_TRUE(main_pool.Free(kept));
  void* again = main_pool.Allocate(3000);
  EXPECT_EQ(again, kept);  // now cached by the main pool
  EXPECT_TRUE(main_pool.Free(again));  // a pool gives back only its cached blocks, never live ones
}

// The peak of live bytes (what the engine's memory profiling reads): the highest
// live total since the last reset, in size classes, cached blocks not counted.
TEST(CachingPoolTest, PeakLiveBytesSinceTheLastReset) {
  FakeDevice device;
  CachingPool pool = device.MakePool();
  const size_t big = CachingPool::SizeClass(size_t{3} << 20), small = CachingPool::SizeClass(1000);
  void* weights = pool.Allocate(1000);
  pool.ResetPeak();
  EXPECT_EQ(pool.peak_live_bytes(), small);
  void* a = pool.Allocate(size_t{3} << 20);
  void* b = pool.Allocate(size_t{3} << 20);
  EXPECT_TRUE(pool.Free(a));
  EXPECT_TRUE(pool.Free(b));
  void* c = pool.Allocate(size_t{3} << 20);  // a cached block: the peak stays
  EXPECT_EQ(pool.peak_live_bytes(), small + 2 * big);
  EXPECT_EQ(pool.live_bytes(), small + big);
  pool.ResetPeak();
  EXPECT_EQ(pool.peak_live_bytes(), small + big);
  EXPECT_TRUE(pool.Free(c));
  EXPECT_TRUE(pool.Free(weights));
  EXPECT_EQ(pool.peak_live_bytes(), small + big);
}

}  // namespace
}  // namespace vt::gpu
