#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "vt/cpu_threads.h"
#include "vt/error.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

thread_local bool t_inside_pool_task = false;

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int size() const { return num_threads_; }

  void Run(int64_t num_chunks, const std::function<void(int64_t)>& chunk_fn) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &chunk_fn;
      num_chunks_ = num_chunks;
      next_chunk_.store(0);
      pending_ = num_chunks;
      ++generation_;
      published_generation_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    DrainChunks();
    // Also wait for workers to leave DrainChunks, so none can claim a chunk of the
    // next job with this job's function.
    auto finished = [this] { return pending_ == 0 && active_workers_ == 0; };
    SpinWhile([&] {
      std::lock_guard<std::mutex> lock(mutex_);
      return !finished();
    });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
    job_ = nullptr;
  }

 private:
  void DrainChunks() {
    const std::function<void(int64_t)>* job = job_;
    int64_t finished = 0;
    for (int64_t c; (c = next_chunk_.fetch_add(1)) < num_chunks_;) {
      t_inside_pool_task = true;
      (*job)(c);
      t_inside_pool_task = false;
      ++finished;
    }
    if (finished > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_ -= finished;
      if (pending_ == 0) done_.notify_all();
    }
  }

  // Kernels of a decode step follow each other tens of microseconds apart, about as
  // long as a thread blocked on a condition variable takes to wake up. So a waiting
  // thread first polls (yielding the core) for up to kSpinTime before it blocks.
  static constexpr std::chrono::microseconds kSpinTime{100};
  template <typename Condition>
  static void SpinWhile(const Condition& condition) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    while (condition() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    while (true) {
      SpinWhile([&] { return published_generation_.load(std::memory_order_acquire) == seen; });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (job_ == nullptr) continue;
        ++active_workers_;
      }
      DrainChunks();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_workers_ == 0) done_.notify_all();
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  int64_t pending_ = 0;
  int active_workers_ = 0;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_generation_{0};  // generation_, readable without the mutex
  bool stopping_ = false;
};

std::mutex g_pool_mutex;
int g_requested_threads = 0;
ThreadPool* g_pool = nullptr;

// A thread's own pool (SetNumThreadsForThisThread), used instead of the process's.
thread_local std::unique_ptr<ThreadPool> t_own_pool;

ThreadPool& Pool() {
  if (t_own_pool) return *t_own_pool;
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (g_pool == nullptr) {
    int n = g_requested_threads > 0 ? g_requested_threads : static_cast<int>(std::thread::hardware_concurrency());
    g_pool = new ThreadPool(n);  // lives for the process
  }
  return *g_pool;
}

}  // namespace

int NumThreads() { return Pool().size(); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  ThreadPool& pool = Pool();
  if (t_inside_pool_task || pool.size() == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balances uneven rows without much scheduling overhead.
  int64_t num_chunks = std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(pool.size()) * 4);
  int64_t chunk = (n + num_chunks - 1) / num_chunks;
  num_chunks = (n + chunk - 1) / chunk;
  pool.Run(num_chunks, [&](int64_t c) { fn(c * chunk, std::min(n, (c + 1) * chunk)); });
}

}  // namespace vt::cpu

namespace vt {

void SetNumThreads(int num_threads) {
  if (num_threads < 0) throw Error("vt::SetNumThreads: thread count must be >= 0, got " + std::to_string(num_threads));
  std::lock_guard<std::mutex> lock(cpu::g_pool_mutex);
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::thread::hardware_concurrency());
  if (cpu::g_pool != nullptr && cpu::g_pool->size() == n) return;
  delete cpu::g_pool;
  cpu::g_pool = nullptr;
  cpu::g_requested_threads = num_threads;
}

void SetNumThreadsForThisThread(int num_threads) {
  if (num_threads < 0) {
    throw Error("vt::SetNumThreadsForThisThread: thread count must be >= 0, got " + std::to_string(num_threads));
  }
  cpu::t_own_pool.reset();
  if (num_threads > 0) cpu::t_own_pool = std::make_unique<cpu::ThreadPool>(num_threads);
}

int GetNumThreads() { return cpu::NumThreads(); }

}  // namespace vt
