// Shared helpers of the vt benchmarks: the machine's DRAM read bandwidth measured in
// the same run, and counters that put a kernel's bandwidth next to it.
//
// A memory-bound kernel (decode GEMV, attention over a long KV cache, GDN state
// updates) is judged by the fraction of DRAM bandwidth it reaches, so every such
// benchmark reports "achieved GB/s" and "fraction of the DRAM read bandwidth that
// this machine showed in this run, with the same thread count". The ceiling is
// measured, not taken from a datasheet, because the machine is a shared VM.
//
// Use:
//   static void BM_Gemv(benchmark::State& state) {
//     vt::SetNumThreads(2);
//     ... set up, rotating over vt::bench::CopiesToExceedCache(bytes) weight copies ...
//     vt::bench::RunTimed(state, bytes_per_iteration, flops_per_iteration, [&] { ... });
//   }
//   BENCHMARK(BM_Gemv)->UseManualTime();   // RunTimed sets the iteration times
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>

namespace vt::bench {

// Size in bytes of the last-level cache (L3 if present, else L2), read from sysfs;
// 32 MiB if it cannot be read.
int64_t LastLevelCacheBytes();

// How many distinct copies of a `bytes_per_copy` working set a benchmark must rotate
// over so that the total is at least 4x the last-level cache (each pass then reads
// from DRAM, not from cache). At least 1.
int64_t CopiesToExceedCache(int64_t bytes_per_copy);

// DRAM read bandwidth in GB/s (1e9 bytes/s) with `num_threads` threads: the median
// of several passes of a multi-threaded sum over a buffer of 8x the last-level cache
// (at least 256 MiB). Measured again when the last measurement for this thread
// count is more than 10 s old (a shared machine's bandwidth drifts over a run), so a
// benchmark is compared with the bandwidth of its own moment; each measurement
// prints one line to stderr.
double DramReadBandwidthGBs(int num_threads);

// "12.34 GB/s = 0.71 of DRAM (17.38 GB/s)".
std::string FormatBandwidth(double achieved_gbs, double dram_gbs);

// Runs `body` once per benchmark iteration, timing each by wall clock (register the
// benchmark with ->UseManualTime()), then sets the counters:
//   GB/s       bytes_per_iteration / time
//   DRAM_frac  GB/s / DramReadBandwidthGBs(vt::GetNumThreads())
//   GFLOP/s    flops_per_iteration / time (only when flops_per_iteration > 0)
// and a label with FormatBandwidth.
void RunTimed(benchmark::State& state, double bytes_per_iteration, double flops_per_iteration,
              const std::function<void()>& body);

}  // namespace vt::bench
