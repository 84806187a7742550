// Gated DeltaNet CPU benchmarks with Qwen3.5 shapes (Dk = Dv = 128; 0.8B: Hk = Hv =
// 16; 9B: Hk = 16, Hv = 32), bf16 activations, f32 state, 2 threads.
//
//   BM_GdnDecode          GdnRecurrent, one token per sequence (the decode step). It
//                         streams each sequence's state [Hv, Dk, Dv] f32 in and out
//                         once: reported as state GB/s (bytes read + written) and as a
//                         fraction of the DRAM read bandwidth measured in this run.
//                         Slots rotate over enough copies that the state comes from
//                         DRAM, as it does when a step walks all layers.
//   BM_GdnChunkedPrefill  GdnChunkedPrefill of one sequence (GFLOP/s of the chunked
//                         form, see ChunkedFlops).
//   BM_GdnRecurrentPrefill  the same prefill token by token, for comparison (GFLOP/s
//                         counted as the chunked form's, so the two rates compare
//                         times directly).
//   BM_CausalConv1dPrefill  the conv in front of it (GB/s of activations in and out).
//
// Prefill benchmarks also report GFLOP/cpu-s: FLOPs per second of process CPU time,
// which on a shared machine says what the kernel does with the cycles it gets
// (wall-clock rates there also measure the neighbours).
//
// Run: build-*/bin/vt_bench --benchmark_filter='Gdn|CausalConv' (each benchmark
// repeats 5 times and reports the median).
#include <benchmark/benchmark.h>

#include <time.h>

#include <random>
#include <vector>

#include "bench_util.h"
#include "vt/ops.h"

namespace vt {
namespace {

constexpr int kThreads = 2;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kKeyHeads = 16;

// Uniform values in [lo, hi) rounded to `dtype`.
Tensor Random(const Shape& shape, DType dtype, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& v : values) v = dist(rng);
  Tensor out = Tensor::Empty(shape, dtype);
  out.CopyFrom(Tensor::FromVector(values, shape));
  return out;
}

// Inputs of `tokens` tokens in `num_seqs` equal sequences: L2-normalised-scale q and
// k (bf16), v (bf16), realistic gates (f32).
struct GdnInputs {
  Tensor q, k, v, g, beta, out;
};

GdnInputs MakeInputs(int64_t tokens, int64_t value_heads, std::mt19937& rng) {
  const float qk_range = 0.15f;  // |row| ~ 1 for 128 uniform entries in [-0.15, 0.15)
  GdnInputs in;
  in.q = Random({tokens, kKeyHeads, kHeadDim}, DType::kBF16, rng, -qk_range, qk_range);
  in.k = Random({tokens, kKeyHeads, kHeadDim}, DType::kBF16, rng, -qk_range, qk_range);
  in.v = Random({tokens, value_heads, kHeadDim}, DType::kBF16, rng);
  in.g = Random({tokens, value_heads}, DType::kF32, rng, -3.0f, -0.01f);
  in.beta = Random({tokens, value_heads}, DType::kF32, rng, 0.05f, 0.95f);
  in.out = Tensor::Empty({tokens, value_heads, kHeadDim}, DType::kBF16);
  return in;
}

std::vector<int32_t> EqualStarts(int64_t num_seqs, int64_t tokens_per_seq) {
  std::vector<int32_t> starts;
  for (int64_t b = 0; b <= num_seqs; ++b) starts.push_back(static_cast<int32_t>(b * tokens_per_seq));
  return starts;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// args: batch, value heads.
void BM_GdnDecode(benchmark::State& state) {
  SetNumThreads(kThreads);
  const int64_t batch = state.range(0), value_heads = state.range(1);
  const int64_t state_bytes = batch * value_heads * kHeadDim * kHeadDim * 4;
  const int64_t copies = bench::CopiesToExceedCache(state_bytes);
  std::mt19937 rng(1);
  GdnInputs in = MakeInputs(batch, value_heads, rng);
  Tensor states = Random({copies * batch, value_heads, kHeadDim, kHeadDim}, DType::kF32, rng,
                                        -0.5f, 0.5f);
  Tensor starts = Tensor::FromVector(EqualStarts(batch, 1), {batch + 1});
  std::vector<Tensor> slot_sets;
  for (int64_t c = 0; c < copies; ++c) {
    std::vector<int32_t> slots;
    for (int64_t b = 0; b < batch; ++b) slots.push_back(static_cast<int32_t>(c * batch + b));
    slot_sets.push_back(Tensor::FromVector(slots, {batch}));
  }
  int64_t next = 0;
  bench::RunTimed(state, 2.0 * static_cast<double>(state_bytes), 0, [&] {
    GdnRecurrent({.q = in.q, .k = in.k, .v = in.v, .g = in.g, .beta = in.beta, .states = states,
                  .query_start_loc = starts, .state_slot_ids = slot_sets[next++ % copies], .out = in.out});
  });
  state.counters["copies"] = static_cast<double>(copies);
}

// Multiply-adds x 2 of the chunked form per chunk of n tokens and head, with the
// triangular products at half size: K K^T, Q K^T, M V, M K and P Vnew (n^2/2 x D
// each), the unit-lower inverse (n^3/6) and W S, Q S, K^T Vnew (n Dk Dv each).
double ChunkedFlops(int64_t tokens, int64_t value_heads) {
  double flops = 0;
  for (int64_t t0 = 0; t0 < tokens; t0 += 64) {
    const double n = static_cast<double>(std::min<int64_t>(64, tokens - t0)), d = kHeadDim;
    flops += 2 * (5 * n * n / 2 * d + n * n * n / 6 + 3 * n * d * d);
  }
  return flops * static_cast<double>(value_heads);
}

// args: tokens, value heads; one sequence.
void RunPrefill(benchmark::State& state, void (*op)(const GdnArgs&)) {
  SetNumThreads(kThreads);
  const int64_t tokens = state.range(0), value_heads = state.range(1);
  std::mt19937 rng(2);
  GdnInputs in = MakeInputs(tokens, value_heads, rng);
  Tensor states = Tensor::Zeros({1, value_heads, kHeadDim, kHeadDim}, DType::kF32);
  Tensor starts = Tensor::FromVector(EqualStarts(1, tokens), {2});
  Tensor slots = Tensor::FromVector(std::vector<int32_t>{0}, {1});
  // Bytes: q, k, v in and out once, and the state in and out.
  const double bytes = static_cast<double>(in.q.nbytes() + in.k.nbytes() + in.v.nbytes() + in.out.nbytes()) +
                       2.0 * static_cast<double>(states.nbytes());
  const double flops = ChunkedFlops(tokens, value_heads);
  bench::DramReadBandwidthGBs(GetNumThreads());  // measured once, outside the CPU-time window
  const double cpu_start = ProcessCpuSeconds();
  bench::RunTimed(state, bytes, flops, [&] {
    op({.q = in.q, .k = in.k, .v = in.v, .g = in.g, .beta = in.beta, .states = states, .query_start_loc = starts,
        .state_slot_ids = slots, .out = in.out});
  });
  state.counters["GFLOP/cpu-s"] =
      flops * static_cast<double>(state.iterations()) / (ProcessCpuSeconds() - cpu_start) / 1e9;
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GdnChunkedPrefill(benchmark::State& state) { RunPrefill(state, &GdnChunkedPrefill); }
void BM_GdnRecurrentPrefill(benchmark::State& state) { RunPrefill(state, &GdnRecurrent); }

// args: tokens, channels (conv_dim); bf16 activations, K = 4, one sequence.
void BM_CausalConv1dPrefill(benchmark::State& state) {
  SetNumThreads(kThreads);
  const int64_t tokens = state.range(0), channels = state.range(1);
  std::mt19937 rng(3);
  Tensor x = Random({tokens, channels}, DType::kBF16, rng);
  Tensor weight = Random({channels, 4}, DType::kBF16, rng);
  Tensor conv_states = Tensor::Zeros({1, channels, 3}, DType::kF32);
  Tensor out = Tensor::Empty({tokens, channels}, DType::kBF16);
  Tensor starts = Tensor::FromVector(EqualStarts(1, tokens), {2});
  Tensor slots = Tensor::FromVector(std::vector<int32_t>{0}, {1});
  bench::RunTimed(state, 2.0 * static_cast<double>(x.nbytes()), 0, [&] {
    CausalConv1d({.x = x, .weight = weight, .conv_states = conv_states, .query_start_loc = starts,
                  .state_slot_ids = slots, .out = out, .apply_silu = true});
  });
}

void Repeated(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond);
}

// {batch, Hv}: 0.8B (Hv 16) and 9B (Hv 32) at batch 1 and 16.
BENCHMARK(BM_GdnDecode)->ArgNames({"batch", "Hv"})->Args({1, 16})->Args({16, 16})->Args({1, 32})->Args({16, 32})
    ->Apply(Repeated);
BENCHMARK(BM_GdnChunkedPrefill)->ArgNames({"tokens", "Hv"})->Args({512, 16})->Args({2048, 16})->Args({512, 32})
    ->Args({2048, 32})->Apply(Repeated);
BENCHMARK(BM_GdnRecurrentPrefill)->ArgNames({"tokens", "Hv"})->Args({512, 16})->Args({2048, 16})->Apply(Repeated);
BENCHMARK(BM_CausalConv1dPrefill)->ArgNames({"tokens", "C"})->Args({2048, 6144})->Apply(Repeated);

}  // namespace
}  // namespace vt
