// MatMul CPU benchmarks at the shapes of one Qwen3.5-0.8B layer (hidden 1024), 2
// threads, f32 activations.
//
//   BM_MatMulGemv  decode: one token (M = 1). Memory-bound: reported as weight GB/s
//                  and as a fraction of the DRAM read bandwidth measured in this run.
//                  Calls rotate over enough copies of the weights that the working
//                  set is at least 4x the last-level cache, so every call streams
//                  its weights from DRAM as a real decode step does.
//   BM_PlainRead   a plain 2-thread sum over the same bytes with the same rotation:
//                  the ceiling for a call of that size (short calls cannot reach
//                  the 256 MiB reference read's bandwidth).
//   BM_MatMulGemm  prefill: M = 128, 256, 512 tokens (Q4_0 as well); reported as GFLOP/s
//                  (2 M N K).
//   BM_MatMulIsa   Q8_0 / Q4_K mlp_gate_up at 1, 8, 32 and 128 tokens under each x86 variant.
//
// Run: build-*/bin/vt_bench --benchmark_filter=MatMul (each benchmark repeats 5 times
// and reports the median; the machine is shared, so compare medians, not single runs).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "vt/cpu/cpu_features.h"
#include "vt/cpu/thread_pool.h"
#include "vt/ops.h"
#include "vt/quant.h"

namespace vt {
namespace {

constexpr int kThreads = 2;

struct LayerShape {
  const char* name;
  int64_t n, k;  // weight [N, K]
};

// Qwen3.5-0.8B: Nq 8, Nkv 2, D 256, GDN key_dim 2048 / value_dim 2048, FFN 3584.
constexpr LayerShape kDecodeShapes[] = {
    {"attn_q_proj", 4096, 1024},   // query + gate, 2 Nq D
    {"attn_kv_proj", 512, 1024},   // k_proj and v_proj, Nkv D
    {"attn_o_proj", 1024, 2048},   // Nq D -> hidden
    {"gdn_in_qkv", 6144, 1024},    // 2 key_dim + value_dim
    {"gdn_in_z", 2048, 1024},      // value_dim
    {"gdn_out_proj", 1024, 2048},  // value_dim -> hidden
    {"mlp_gate_up", 3584, 1024},   // gate and up, each
    {"mlp_down", 1024, 3584},
};
constexpr DType kWeightDTypes[] = {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_K};
constexpr DType kGemmDTypes[] = {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K};

// Weights [N, K] of `dtype` from uniform values; block types quantize row by row.
Tensor RandomWeights(int64_t n, int64_t k, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n * k));
  for (float& v : values) v = dist(rng);
  Tensor w = Tensor::Empty({n, k}, dtype);
  if (IsQuantized(dtype)) {
    for (int64_t r = 0; r < n; ++r) {
      QuantizeRow(values.data() + r * k, k, static_cast<char*>(w.data()) + r * BytesFor(dtype, k), dtype);
    }
  } else {
    w.CopyFrom(Tensor::FromVector(values, {n, k}));
  }
  return w;
}

// `copies` distinct buffers holding the same weights (byte copies of one quantized
// matrix: quantizing each would only slow the setup).
std::vector<Tensor> WeightCopies(int64_t n, int64_t k, DType dtype, int64_t copies) {
  std::mt19937 rng(1);
  std::vector<Tensor> out = {RandomWeights(n, k, dtype, rng)};
  for (int64_t c = 1; c < copies; ++c) {
    Tensor copy = Tensor::Empty({n, k}, dtype);
    std::memcpy(copy.data(), out[0].data(), static_cast<size_t>(out[0].nbytes()));
    out.push_back(copy);
  }
  return out;
}

Tensor RandomActivations(int64_t m, int64_t k) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(m * k));
  for (float& v : values) v = dist(rng);
  return Tensor::FromVector(values, {m, k});
}

void BM_MatMulGemv(benchmark::State& state, LayerShape shape, DType dtype) {
  SetNumThreads(kThreads);
  const int64_t bytes = BytesFor(dtype, shape.n * shape.k);
  const std::vector<Tensor> weights = WeightCopies(shape.n, shape.k, dtype, bench::CopiesToExceedCache(bytes));
  const Tensor x = RandomActivations(1, shape.k);
  const Tensor out = Tensor::Empty({1, shape.n}, DType::kF32);
  size_t next = 0;
  bench::RunTimed(state, static_cast<double>(bytes), 2.0 * shape.n * shape.k, [&] {
    MatMul({.x = x, .w = weights[next], .out = out});
    next = (next + 1) % weights.size();
  });
}

// The ceiling for a call of this size: a plain 2-thread sum over the same bytes,
// rotating over the same number of copies. A short call pays the DRAM latency of
// starting its streams, which the 256 MiB reference read amortises.
void BM_PlainRead(benchmark::State& state, LayerShape shape, DType dtype) {
  SetNumThreads(kThreads);
  const int64_t bytes = BytesFor(dtype, shape.n * shape.k);
  const std::vector<Tensor> weights = WeightCopies(shape.n, shape.k, dtype, bench::CopiesToExceedCache(bytes));
  constexpr int64_t kChunkBytes = 64 << 10;
  std::atomic<uint64_t> sink{0};
  size_t next = 0;
  bench::RunTimed(state, static_cast<double>(bytes), 0, [&] {
    const auto* words = static_cast<const uint64_t*>(weights[next].data());
    const int64_t num_words = bytes / 8, per_chunk = kChunkBytes / 8;
    cpu::ParallelFor((num_words + per_chunk - 1) / per_chunk, 1, [&](int64_t begin, int64_t end) {
      uint64_t sum = 0;
      for (int64_t i = begin * per_chunk; i < std::min(num_words, end * per_chunk); ++i) sum += words[i];
      sink += sum;
    });
    next = (next + 1) % weights.size();
  });
  benchmark::DoNotOptimize(sink.load());
}

void BM_MatMulGemm(benchmark::State& state, LayerShape shape, DType dtype) {
  SetNumThreads(kThreads);
  const int64_t m = state.range(0);
  std::mt19937 rng(1);
  const Tensor w = RandomWeights(shape.n, shape.k, dtype, rng);
  const Tensor x = RandomActivations(m, shape.k);
  const Tensor out = Tensor::Empty({m, shape.n}, DType::kF32);
  bench::RunTimed(state, static_cast<double>(BytesFor(dtype, shape.n * shape.k)), 2.0 * m * shape.n * shape.k,
                  [&] { MatMul({.x = x, .w = w, .out = out}); });
}

// The block-weight kernels under each x86 variant this CPU has, alternating in one
// process (BM_MatMulIsa/<dtype>/<shape>/<variant>/tokens:M): AVX2 with maddubs,
// AVX2 with AVX-VNNI allowed (which the K-quant GEMV declines: matmul.cpp's
// ChooseVariant), AVX-512 with VNNI, AVX-512 with AMX allowed (the GEMM path from
// kAmxMinRows). A variant the CPU lacks is skipped.
struct IsaCase {
  const char* name;
  cpu::Isa limit;
  bool avx_vnni;
  bool amx;
};
constexpr IsaCase kIsaCases[] = {{"avx2", cpu::Isa::kAvx2, false, false},
                                 {"avx2_vnni", cpu::Isa::kAvx2, true, false},
                                 {"avx512", cpu::Isa::kAvx512, true, false},
                                 {"avx512_amx", cpu::Isa::kAvx512, true, true}};

void BM_MatMulIsa(benchmark::State& state, LayerShape shape, DType dtype, IsaCase isa) {
  cpu::SetAvxVnniAllowed(true);
  cpu::SetAmxAllowed(true);
  const bool available = static_cast<int>(cpu::DetectedIsa()) >= static_cast<int>(isa.limit) &&
                         (!isa.avx_vnni || isa.limit != cpu::Isa::kAvx2 || cpu::HasAvxVnni()) &&
                         (isa.limit != cpu::Isa::kAvx512 || cpu::HasAvx512Vnni()) && (!isa.amx || cpu::HasAmxBf16());
  if (!available) {
    state.SkipWithError((std::string(isa.name) + " is not available on this CPU").c_str());
    return;
  }
  cpu::SetIsaLimit(isa.limit);
  cpu::SetAvxVnniAllowed(isa.avx_vnni);
  cpu::SetAmxAllowed(isa.amx);
  const int64_t m = state.range(0);
  if (m == 1) {
    BM_MatMulGemv(state, shape, dtype);
  } else {
    BM_MatMulGemm(state, shape, dtype);
  }
  cpu::SetAvxVnniAllowed(true);
  cpu::SetAmxAllowed(true);
  cpu::SetIsaLimit(cpu::Isa::kAvx512);
}

// 5 repetitions, reported as their mean / median / stddev / cv.
void Repeated(benchmark::internal::Benchmark* b) { b->UseManualTime()->Repetitions(5)->ReportAggregatesOnly(true); }

[[maybe_unused]] const bool kRegistered = [] {
  for (DType dtype : kWeightDTypes) {
    for (const LayerShape& shape : kDecodeShapes) {
      const std::string name = std::string("BM_MatMulGemv/") + DTypeName(dtype) + "/" + shape.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulGemv, shape, dtype)->Apply(Repeated);
    }
  }
  for (DType dtype : {DType::kQ8_0, DType::kQ4_K}) {
    for (const LayerShape& shape : kDecodeShapes) {
      const std::string name = std::string("BM_PlainRead/") + DTypeName(dtype) + "/" + shape.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_PlainRead, shape, dtype)->Apply(Repeated);
    }
  }
  for (DType dtype : kGemmDTypes) {
    for (const LayerShape& shape : {kDecodeShapes[6], kDecodeShapes[7]}) {
      const std::string name = std::string("BM_MatMulGemm/") + DTypeName(dtype) + "/" + shape.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulGemm, shape, dtype)
          ->ArgName("tokens")
          ->Arg(128)
          ->Arg(256)
          ->Arg(512)
          ->Apply(Repeated);
    }
  }
  for (DType dtype : {DType::kQ8_0, DType::kQ4_K}) {
    for (const IsaCase& isa : kIsaCases) {
      const std::string name = std::string("BM_MatMulIsa/") + DTypeName(dtype) + "/" + kDecodeShapes[6].name + "/" + isa.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulIsa, kDecodeShapes[6], dtype, isa)
          ->ArgName("tokens")
          ->Arg(1)
          ->Arg(8)
          ->Arg(32)
          ->Arg(128)
          ->Apply(Repeated);
    }
  }
  return true;
}();

}  // namespace
}  // namespace vt
