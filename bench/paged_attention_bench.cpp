// PagedAttention CPU benchmarks, 2 threads, block size 16, shuffled block tables.
//
//   BM_PagedAttentionDecode   one query token per sequence over `context` cached
//                             positions: Qwen3.5 shapes (head_dim 256, 8 query / 2 kv
//                             heads) and Qwen3 shapes (head_dim 128, 16 / 8), f32 and
//                             bf16 caches. Decode reads every cached K and V once, so
//                             it is reported as KV GB/s and as a fraction of the DRAM
//                             read bandwidth measured in this run. Iterations rotate
//                             over enough cache copies (disjoint blocks of one cache
//                             tensor) that K and V come from DRAM, as in a real step.
//   BM_PagedAttentionPrefill  one new 512-token prompt (causal, no cached context),
//                             reported as GFLOP/s of q.k and p.v (4 * D flops per
//                             visible (query head, position) pair) and tokens/s.
//
// Besides the wall-clock counters of bench::RunTimed, each benchmark reports
// cpu_GB/s (and cpu_GFLOP/s): the same work per second of process CPU time per
// thread, i.e. what kThreads dedicated cores reach. On a shared machine, where other processes take
// turns on the cores, wall-clock GB/s understates the kernel and cpu_GB/s does not
// (it cannot tell DRAM bandwidth lost to other processes, though).
//
// Run: build-*/bin/vt_bench --benchmark_filter=PagedAttention (each benchmark
// repeats 5 times and reports the median).
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "bench_util.h"
#include "vt/ops.h"

namespace vt {
namespace {

constexpr int kThreads = 2;
constexpr int64_t kBlockSize = 16;

struct HeadShape {
  int64_t num_heads, num_kv_heads, head_dim;
};

// head_dim 256: Qwen3.5 (8 / 2 heads); 128: Qwen3 (16 / 8 heads).
HeadShape ShapeFor(int64_t head_dim) { return head_dim == 256 ? HeadShape{8, 2, 256} : HeadShape{16, 8, 128}; }

DType CacheDType(int64_t code) { return code == 0 ? DType::kF32 : DType::kBF16; }

Tensor Random(const Shape& shape, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& v : values) v = dist(rng);
  Tensor out = Tensor::Empty(shape, dtype);
  out.CopyFrom(Tensor::FromVector(values, shape));
  return out;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// bench::RunTimed plus the cpu_GB/s counter (see the top of the file).
void RunTimedWithCpu(benchmark::State& state, double bytes, double flops, const std::function<void()>& body) {
  bench::DramReadBandwidthGBs(kThreads);  // measured once, outside the CPU-time window
  const double cpu_start = ProcessCpuSeconds();
  bench::RunTimed(state, bytes, flops, body);
  const double cpu_per_thread = (ProcessCpuSeconds() - cpu_start) / kThreads;
  if (cpu_per_thread <= 0) return;
  const double iterations = static_cast<double>(state.iterations());
  state.counters["cpu_GB/s"] = bytes * iterations / cpu_per_thread / 1e9;
  if (flops > 0) state.counters["cpu_GFLOP/s"] = flops * iterations / cpu_per_thread / 1e9;
}

// `copies` independent batches of `batch` sequences of `context` positions each, in
// one cache; each copy's block tables use its own shuffled blocks.
struct PagedBatch {
  Tensor k_cache, v_cache, seq_lens, query_start_loc;
  std::vector<Tensor> block_tables;  // one per copy
};

PagedBatch MakeBatch(const HeadShape& s, DType dtype, int64_t batch, int64_t context, int64_t query_len,
                     int64_t copies, std::mt19937& rng) {
  const int64_t blocks_per_seq = (context + kBlockSize - 1) / kBlockSize, blocks_per_copy = batch * blocks_per_seq;
  PagedBatch b;
  // The values do not change the work; a small constant keeps set-up fast.
  b.k_cache = Tensor::Empty({copies * blocks_per_copy, kBlockSize, s.num_kv_heads, s.head_dim}, dtype);
  b.v_cache = Tensor::Empty({copies * blocks_per_copy, kBlockSize, s.num_kv_heads, s.head_dim}, dtype);
  Fill({.dst = b.k_cache, .value = 0.01});
  Fill({.dst = b.v_cache, .value = 0.02});
  for (int64_t c = 0; c < copies; ++c) {
    std::vector<int32_t> ids(blocks_per_copy);
    std::iota(ids.begin(), ids.end(), static_cast<int32_t>(c * blocks_per_copy));
    std::shuffle(ids.begin(), ids.end(), rng);
    b.block_tables.push_back(Tensor::FromVector(ids, {batch, blocks_per_seq}));
  }
  std::vector<int32_t> lens(batch, static_cast<int32_t>(context)), starts;
  for (int64_t i = 0; i <= batch; ++i) starts.push_back(static_cast<int32_t>(i * query_len));
  b.seq_lens = Tensor::FromVector(lens, {batch});
  b.query_start_loc = Tensor::FromVector(starts, {batch + 1});
  return b;
}

// args: batch, context, head_dim, cache dtype (0 f32, 1 bf16).
void BM_PagedAttentionDecode(benchmark::State& state) {
  SetNumThreads(kThreads);
  const int64_t batch = state.range(0), context = state.range(1);
  const HeadShape s = ShapeFor(state.range(2));
  const DType dtype = CacheDType(state.range(3));
  const double kv_bytes = 2.0 * static_cast<double>(batch * context * s.num_kv_heads * s.head_dim) *
                          static_cast<double>(BytesFor(dtype, 1));
  const int64_t copies = bench::CopiesToExceedCache(static_cast<int64_t>(kv_bytes));
  std::mt19937 rng(1);
  PagedBatch b = MakeBatch(s, dtype, batch, context, 1, copies, rng);
  Tensor q = Random({batch, s.num_heads, s.head_dim}, DType::kBF16, rng);
  Tensor out = Tensor::Empty({batch, s.num_heads, s.head_dim}, DType::kBF16);
  int64_t next = 0;
  RunTimedWithCpu(state, kv_bytes, 0, [&] {
    PagedAttention({.q = q, .k_cache = b.k_cache, .v_cache = b.v_cache, .block_tables = b.block_tables[next++ % copies],
                    .seq_lens = b.seq_lens, .query_start_loc = b.query_start_loc, .out = out,
                    .scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim)), .max_query_len = 1,
                    .max_seq_len = context});
  });
  state.counters["copies"] = static_cast<double>(copies);
}

// args: new tokens, head_dim, cache dtype; one sequence, no cached context.
void BM_PagedAttentionPrefill(benchmark::State& state) {
  SetNumThreads(kThreads);
  const int64_t tokens = state.range(0);
  const HeadShape s = ShapeFor(state.range(1));
  const DType dtype = CacheDType(state.range(2));
  std::mt19937 rng(2);
  PagedBatch b = MakeBatch(s, dtype, 1, tokens, tokens, 1, rng);
  Tensor q = Random({tokens, s.num_heads, s.head_dim}, DType::kBF16, rng);
  Tensor out = Tensor::Empty({tokens, s.num_heads, s.head_dim}, DType::kBF16);
  const double pairs = static_cast<double>(tokens * (tokens + 1) / 2 * s.num_heads);
  const double kv_bytes = 2.0 * static_cast<double>(b.k_cache.nbytes());
  RunTimedWithCpu(state, kv_bytes, 4.0 * static_cast<double>(s.head_dim) * pairs, [&] {
    PagedAttention({.q = q, .k_cache = b.k_cache, .v_cache = b.v_cache, .block_tables = b.block_tables[0],
                    .seq_lens = b.seq_lens, .query_start_loc = b.query_start_loc, .out = out,
                    .scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim)), .max_query_len = tokens,
                    .max_seq_len = tokens});
  });
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void Repeated(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond);
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "ctx", "D", "bf16"});
  for (int64_t head_dim : {256, 128}) {
    for (int64_t dtype : {1, 0}) {
      for (int64_t batch : {1, 16}) {
        for (int64_t context : {512, 1024, 4096}) b->Args({batch, context, head_dim, dtype});
      }
    }
  }
}

BENCHMARK(BM_PagedAttentionDecode)->Apply(DecodeArgs)->Apply(Repeated);
BENCHMARK(BM_PagedAttentionPrefill)->ArgNames({"tokens", "D", "bf16"})->Args({512, 256, 1})->Args({512, 256, 0})
    ->Args({512, 128, 1})->Args({512, 128, 0})->Apply(Repeated);

}  // namespace
}  // namespace vt
