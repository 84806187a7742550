// The CPU thread pools (vt/cpu/thread_pool.h): a thread with a pool of its own
// (vt::SetNumThreadsForThisThread) runs its parallel regions at the same time as
// another such thread, where the process's pool would make them take turns; regions
// still cover every index once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "vt/cpu/thread_pool.h"
#include "vt/cpu_threads.h"
#include "vt/error.h"
#include "vt/ops.h"

namespace vt {
namespace {

// Inside its region, each thread waits (up to 5 s) for the other thread to be inside
// its own region too: true when both saw each other.
bool RegionsOverlap() {
  std::atomic<int> inside{0};
  std::atomic<int> saw_both{0};
  auto run = [&] {
    SetNumThreadsForThisThread(2);
    EXPECT_EQ(GetNumThreads(), 2);
    std::atomic<int64_t> covered{0};
    cpu::ParallelFor(64, 1, [&](int64_t begin, int64_t end) {
      covered += end - begin;
      if (begin != 0) return;
      ++inside;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (inside.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      if (inside.load() == 2) ++saw_both;
    });
    EXPECT_EQ(covered.load(), 64);
    SetNumThreadsForThisThread(0);
  };
  std::thread a(run), b(run);
  a.join();
  b.join();
  return saw_both.load() == 2;
}

TEST(ThreadPoolTest, ThreadsWithTheirOwnPoolsRunTheirRegionsAtTheSameTime) {
  EXPECT_TRUE(RegionsOverlap());
}

TEST(ThreadPoolTest, AThreadsOwnPoolLeavesTheProcessPoolAlone) {
  SetNumThreads(3);
  std::thread t([] {
    SetNumThreadsForThisThread(1);
    EXPECT_EQ(GetNumThreads(), 1);
    SetNumThreadsForThisThread(0);
    EXPECT_EQ(GetNumThreads(), 3);  // the process's again
  });
  t.join();
  EXPECT_EQ(GetNumThreads(), 3);
  EXPECT_THROW(SetNumThreadsForThisThread(-1), Error);
  SetNumThreads(0);
}

}  // namespace
}  // namespace vt
