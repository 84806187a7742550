// DRAM bandwidth ceiling and bandwidth counters for the vt benchmarks (bench_util.h).
#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "vt/ops.h"

namespace vt::bench {
namespace {

using Clock = std::chrono::steady_clock;

// How long a DRAM bandwidth measurement stands for the benchmarks that follow it.
constexpr std::chrono::seconds kDramRefreshPeriod{10};

// "32768K" / "2M" / "512" -> bytes; 0 when unreadable.
int64_t ParseCacheSize(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || value <= 0) return 0;
  if (*end == 'K') return value << 10;
  if (*end == 'M') return value << 20;
  return value;
}

int64_t ReadSysfsCacheBytes(int index) {
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
  std::ifstream level_file(dir + "level"), size_file(dir + "size");
  int level = 0;
  std::string size;
  if (!(level_file >> level) || !(size_file >> size)) return 0;
  return level >= 2 ? ParseCacheSize(size) : 0;
}

// Sums 64-bit words with independent accumulators (the compiler vectorises this);
// the result is returned so the reads cannot be optimised away.
uint64_t SumWords(const uint64_t* words, int64_t count) {
  uint64_t acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += words[i + j];
  }
  for (; i < count; ++i) acc[0] += words[i];
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

// One timed pass: `num_threads` threads each sum a disjoint 1/num_threads of the buffer.
double TimedReadPassSeconds(const uint64_t* words, int64_t count, int num_threads, uint64_t* sink) {
  std::vector<std::thread> threads;
  std::vector<uint64_t> sums(static_cast<size_t>(num_threads));
  const int64_t per_thread = count / num_threads;
  const auto start = Clock::now();
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      const int64_t begin = t * per_thread;
      const int64_t end = t + 1 == num_threads ? count : begin + per_thread;
      sums[static_cast<size_t>(t)] = SumWords(words + begin, end - begin);
    });
  }
  for (auto& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (uint64_t s : sums) *sink += s;
  return seconds;
}

// The buffer the DRAM measurement sums, 8x the last-level cache (at least 256 MiB),
// allocated and written once (written, not just allocated, so every page is backed
// by its own physical memory).
const std::vector<uint64_t>& DramTestBuffer() {
  static const std::vector<uint64_t> words = [] {
    const int64_t bytes = std::max<int64_t>(int64_t{256} << 20, 8 * LastLevelCacheBytes());
    std::vector<uint64_t> w(static_cast<size_t>(bytes / 8));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    return w;
  }();
  return words;
}

double MeasureDramReadBandwidthGBs(int num_threads) {
  const std::vector<uint64_t>& words = DramTestBuffer();
  const auto count = static_cast<int64_t>(words.size());
  uint64_t sink = 0;
  // The median pass, not the best: on a shared machine single passes sometimes run
  // far above what the memory system sustains, and kernels are timed over many.
  constexpr int kPasses = 9;
  std::vector<double> seconds;
  for (int pass = 0; pass < kPasses; ++pass) {
    seconds.push_back(TimedReadPassSeconds(words.data(), count, num_threads, &sink));
  }
  std::nth_element(seconds.begin(), seconds.begin() + kPasses / 2, seconds.end());
  const double gbs = static_cast<double>(count * 8) / seconds[kPasses / 2] / 1e9;
  std::fprintf(stderr, "DRAM read bandwidth: %.2f GB/s (%d threads, median of %d sums over %lld MiB; checksum %llx)\n",
               gbs, num_threads, kPasses, static_cast<long long>((count * 8) >> 20),
               static_cast<unsigned long long>(sink));
  return gbs;
}

}  // namespace

int64_t LastLevelCacheBytes() {
  static const int64_t bytes = [] {
    int64_t largest = 0;
    for (int index = 0; index < 8; ++index) largest = std::max(largest, ReadSysfsCacheBytes(index));
    return largest > 0 ? largest : int64_t{32} << 20;
  }();
  return bytes;
}

int64_t CopiesToExceedCache(int64_t bytes_per_copy) {
  const int64_t target = 4 * LastLevelCacheBytes();
  return std::max<int64_t>(1, (target + bytes_per_copy - 1) / std::max<int64_t>(1, bytes_per_copy));
}

double DramReadBandwidthGBs(int num_threads) {
  struct Measurement {
    double gbs;
    Clock::time_point when;
  };
  static std::mutex mutex;
  static std::map<int, Measurement> measured;
  std::lock_guard<std::mutex> lock(mutex);
  num_threads = std::max(1, num_threads);
  auto it = measured.find(num_threads);
  const auto now = Clock::now();
  if (it == measured.end() || now - it->second.when > kDramRefreshPeriod) {
    measured[num_threads] = {MeasureDramReadBandwidthGBs(num_threads), Clock::now()};
  }
  return measured[num_threads].gbs;
}

std::string FormatBandwidth(double achieved_gbs, double dram_gbs) {
  char text[128];
  std::snprintf(text, sizeof(text), "%.2f GB/s = %.2f of DRAM (%.2f GB/s)", achieved_gbs, achieved_gbs / dram_gbs,
                dram_gbs);
  return text;
}

void RunTimed(benchmark::State& state, double bytes_per_iteration, double flops_per_iteration,
              const std::function<void()>& body) {
  const double dram_gbs = DramReadBandwidthGBs(vt::GetNumThreads());
  double total_seconds = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    body();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  if (total_seconds <= 0) return;
  const double iterations = static_cast<double>(state.iterations());
  const double gbs = bytes_per_iteration * iterations / total_seconds / 1e9;
  state.counters["GB/s"] = gbs;
  state.counters["DRAM_frac"] = gbs / dram_gbs;
  if (flops_per_iteration > 0) state.counters["GFLOP/s"] = flops_per_iteration * iterations / total_seconds / 1e9;
  state.SetLabel(FormatBandwidth(gbs, dram_gbs));
}

}  // namespace vt::bench
