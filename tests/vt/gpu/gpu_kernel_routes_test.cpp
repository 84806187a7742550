// Each GPU kernel variant that a kernel choice can pick, run on the device against
// a double-precision reference, with reach counters proving which variant ran:
// MatMul's two skinny, tiled and (CUDA) cuBLAS routes, PagedAttention's one-pass and
// split-KV routes, and GDN's state kept in shared memory (Dk <= 160) or in global
// memory (larger Dk, which the contract tests' model-sized heads never reach).
// Skips itself on machines without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "testing/op_testing.h"
#include "vt/quant.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::RandomTensor;
using testing::ToDoubles;

// Block weights [n, k] of `dtype` on `device`: random values quantized row by row on the host.
Tensor RandomBlockWeights(int64_t n, int64_t k, DType dtype, Device device, std::mt19937& rng) {
  const Tensor values = RandomTensor({n, k}, DType::kF32, kCpu, rng);
  Tensor w_cpu = Tensor::Empty({n, k}, dtype);
  for (int64_t r = 0; r < n; ++r) {
    QuantizeRow(values.data_ptr<float>() + r * k, k, static_cast<char*>(w_cpu.data()) + r * BytesFor(dtype, k), dtype);
  }
  return w_cpu.To(device);
}

// Tolerances: f32 results accumulate K products in f32 (relative error ~K * 6e-8,
// well under 1e-5 for K <= 1024); bf16 results are rounded once to bf16 (2^-8).
TEST(GpuKernelRoutesTest, MatMulRoutesMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct Case {
    int64_t m, n, k;
    const char* cuda_route;
    const char* rocm_route;
  };
  const Case cases[] = {
      {3, 70, 96, "skinny_vector_loads", "skinny_vector_loads"},        // rows of 96 values: 16-byte aligned
      {3, 70, 95, "skinny_warp_per_column", "skinny_warp_per_column"},  // odd K: element by element
      {40, 70, 96, "tiled_shared", "tiled_shared"},
      {130, 257, 520, "cublas", "tiled_shared"},  // 17.4M multiply-adds: past the vendor threshold
  };
  std::mt19937 rng(11);
  for (Device device : gpus) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(device.ToString() + " " + DTypeName(dtype) + " M=" + std::to_string(c.m));
        const Tensor x = RandomTensor({c.m, c.k}, dtype, device, rng);
        const Tensor w = RandomTensor({c.n, c.k}, dtype, device, rng);
        Tensor out = Tensor::Empty({c.m, c.n}, dtype, device);
        testing::Poison(out);
        reach::Reset();
        MatMul({.x = x, .w = w, .out = out});
        std::string route = device.type == DeviceType::kCUDA ? c.cuda_route : c.rocm_route;
        // 16-bit weights on aligned decode rows take the loads-in-flight walk (matmul_choice.h).
        if (route == "skinny_vector_loads" && dtype == DType::kBF16) route = "skinny_loads_in_flight";
        EXPECT_EQ(reach::Count(std::string("MatMulGpu.") + route), 1u) << route;
        EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, testing::DefaultTolerance(dtype)));
      }
    }
  }
}

// Float weights of another dtype than x above the decode rows: CUDA widens to f32
// for cuBLAS (x bf16 with the f32 weights of a GGUF router and shared-expert gate;
// x f32 with bf16 weights, widened chunk by chunk), ROCm runs the tiled kernel.
// Tolerance: f32 products, out rounded once to its dtype.
TEST(GpuKernelRoutesTest, MixedFloatDtypesMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct Case {
    int64_t m, n, k;
    DType x_dtype, w_dtype;
  };
  const Case cases[] = {{16, 256, 2048, DType::kBF16, DType::kF32},
                        {33, 1, 2048, DType::kBF16, DType::kF32},
                        {9, 70, 1024, DType::kF32, DType::kBF16},
                        {300, 130, 1536, DType::kF16, DType::kF32}};
  std::mt19937 rng(14);
  for (Device device : gpus) {
    for (const Case& c : cases) {
      SCOPED_TRACE(device.ToString() + " x " + DTypeName(c.x_dtype) + " w " + DTypeName(c.w_dtype) +
                   " M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
      const Tensor wide = RandomTensor({c.m, c.k + 8}, c.x_dtype, device, rng);
      const Tensor x = wide.Slice(1, 8, c.k + 8);  // strided rows
      const Tensor w = RandomTensor({c.n, c.k}, c.w_dtype, device, rng);
      Tensor out = Tensor::Empty({c.m, c.n}, c.x_dtype, device);
      testing::Poison(out);
      reach::Reset();
      MatMul({.x = x, .w = w, .out = out});
      const char* route = device.type == DeviceType::kCUDA ? "cast_cublas" : "tiled_shared";
      EXPECT_EQ(reach::Count(std::string("MatMulGpu.") + route), 1u) << route;
      EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, 1e-5 + testing::DefaultTolerance(c.x_dtype)));
    }
  }
}

// Block weights above the decode rows (matmul_choice.h): CUDA runs the int8
// tensor-core tiles up to kQuantMmaMaxRows (16) and decodes for cuBLAS above, and
// forced (gpu.matmul_block = quant_mma) the 64-row tiles at 17 and 257 rows; ROCm
// runs the tiled kernel. Tolerance: the int8 activations of the block-weight
// contract (1e-2 of the largest |out|).
TEST(GpuKernelRoutesTest, BlockWeightRoutesMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(12);
  for (Device device : gpus) {
    for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K}) {
      const int64_t n = 200, k = 512;
      const Tensor w = RandomBlockWeights(n, k, w_dtype, device, rng);
      for (int64_t m : {9, 16, 17, 257}) {
        for (const char* variant : {"", "quant_mma"}) {
          SCOPED_TRACE(device.ToString() + " " + DTypeName(w_dtype) + " M=" + std::to_string(m) + " " + variant);
          tuning::SetVariant("gpu.matmul_block", variant);
          const Tensor x = RandomTensor({m, k}, DType::kBF16, device, rng);
          Tensor out = Tensor::Empty({m, n}, DType::kBF16, device);
          testing::Poison(out);
          reach::Reset();
          MatMul({.x = x, .w = w, .out = out});
          tuning::SetVariant("gpu.matmul_block", "");
          const bool int8 = m <= 16 || *variant != '\0';
          const char* route = device.type != DeviceType::kCUDA ? "tiled_shared" : int8 ? "quant_mma" : "dequant_cublas";
          EXPECT_EQ(reach::Count(std::string("MatMulGpu.") + route), 1u) << route;
          EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, 1e-2 + testing::DefaultTolerance(DType::kBF16)));
        }
      }
    }
  }
}

// Block weights decoded for cuBLAS (CUDA, above the int8 tiles' 16 rows): the
// per-value kernel by default, and forced (gpu.dequantize = tiles) the shared-memory
// tiles of 2048 values where K is a multiple of 2048 and rows start on 16 bytes (not K
// 2304, nor rows of K + 32 values, whose Q8_0 bytes are not a multiple of 16); every
// format the route takes, into each float dtype of x; N 8200 with f32 x fills more
// than one 64 MB scratch chunk at K 2048, so a chunk starts past row 0.
TEST(GpuKernelRoutesTest, DequantizedBlockWeightsMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct Case {
    int64_t n, k, row_pad;
    DType x_dtype;
    const char* variant;
    const char* route;
  };
  const Case cases[] = {
      {70, 4096, 0, DType::kBF16, "", "elements"},      {70, 4096, 0, DType::kBF16, "tiles", "tiles"},
      {70, 2304, 0, DType::kF16, "tiles", "elements"},  {70, 2048, 256, DType::kBF16, "tiles", "tiles"},
      {70, 2048, 32, DType::kBF16, "tiles", "elements"}, {8200, 2048, 0, DType::kF32, "tiles", "tiles"},
      {70, 4096, 0, DType::kF32, "elements", "elements"}};
  std::mt19937 rng(15);
  for (Device device : gpus) {
    if (device.type != DeviceType::kCUDA) continue;
    for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
      for (const Case& c : cases) {
        if (c.n > 1000 && w_dtype != DType::kQ8_0) continue;  // one format past a chunk is enough
        if (c.row_pad % Info(w_dtype).block_elems != 0) continue;
        const bool q6k_unaligned = w_dtype == DType::kQ6_K && BytesFor(w_dtype, c.k + c.row_pad) % 16 != 0;
        const char* route = q6k_unaligned ? "elements" : c.route;
        SCOPED_TRACE(device.ToString() + " " + DTypeName(w_dtype) + " x " + DTypeName(c.x_dtype) + " N=" +
                     std::to_string(c.n) + " K=" + std::to_string(c.k) + " pad " + std::to_string(c.row_pad) + " '" +
                     c.variant + "'");
        const Tensor w = RandomBlockWeights(c.n, c.k + c.row_pad, w_dtype, device, rng).Slice(1, 0, c.k);
        const Tensor x = RandomTensor({40, c.k}, c.x_dtype, device, rng);
        Tensor out = Tensor::Empty({40, c.n}, c.x_dtype, device);
        testing::Poison(out);
        tuning::SetVariant("gpu.dequantize", c.variant);
        reach::Reset();
        MatMul({.x = x, .w = w, .out = out});
        tuning::SetVariant("gpu.dequantize", "");
        EXPECT_EQ(reach::Count("MatMulGpu.dequant_cublas"), 1u);
        EXPECT_GE(reach::Count(std::string("MatMulGpu.dequantize.") + route), 1u) << route;
        EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, 1e-5 + testing::DefaultTolerance(c.x_dtype)));
      }
    }
  }
}

// The int8 tensor-core route at 9..16 rows (CUDA): K a multiple of 256 runs the
// pipelined kernel (stages of 256 values copied ahead into shared memory; K of 9
// stages passes through every slot of its 4-stage ring twice), other K the tiles.
// Odd N leaves the last 32-column block partly empty; x rows are strided.
TEST(GpuKernelRoutesTest, QuantMmaPipelinesWholeStagesOfK) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct Case {
    int64_t m, k;
    const char* route;
  };
  const Case cases[] = {{9, 256, "pipelined"}, {16, 2304, "pipelined"}, {13, 768, "pipelined"},
                        {16, 480, "tiles"},    {11, 800, "tiles"}};
  std::mt19937 rng(14);
  for (Device device : gpus) {
    if (device.type != DeviceType::kCUDA) continue;
    for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K}) {
      for (DType x_dtype : {DType::kBF16, DType::kF32}) {
        for (const Case& c : cases) {
          if (c.k % Info(w_dtype).block_elems != 0) continue;
          SCOPED_TRACE(device.ToString() + " " + DTypeName(w_dtype) + " x " + DTypeName(x_dtype) +
                       " M=" + std::to_string(c.m) + " K=" + std::to_string(c.k));
          const int64_t n = 77;
          const Tensor w = RandomBlockWeights(n, c.k, w_dtype, device, rng);
          const Tensor wide = RandomTensor({c.m, c.k + 32}, x_dtype, device, rng);
          const Tensor x = wide.Slice(1, 32, c.k + 32);
          Tensor out = Tensor::Empty({c.m, n}, x_dtype, device);
          testing::Poison(out);
          reach::Reset();
          MatMul({.x = x, .w = w, .out = out});
          EXPECT_EQ(reach::Count(std::string("MatMulGpu.quant_mma.") + c.route), 1u) << c.route;
          EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, 1e-2 + testing::DefaultTolerance(x_dtype)));
        }
      }
    }
  }
}

// The int8 GEMV of block weights (M <= 8) quantizes x inside each block when x's
// 32-value blocks fit in its shared memory (24 KB: one row up to K = 19,660, eight up
// to 2,457) and in a launch before the GEMV otherwise; both read strided x rows.
TEST(GpuKernelRoutesTest, QuantGemvQuantizesXInSharedMemoryOrBefore) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct Case {
    int64_t m, k;
    const char* route;
  };
  const Case cases[] = {{1, 512, "x_shared"},    {3, 768, "x_shared"},      {8, 2304, "x_shared"},
                        {8, 2560, "x_separate"}, {1, 20480, "x_separate"}, {5, 4608, "x_separate"}};
  std::mt19937 rng(13);
  for (Device device : gpus) {
    for (DType w_dtype : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
      for (DType x_dtype : {DType::kBF16, DType::kF32}) {
        for (const Case& c : cases) {
          SCOPED_TRACE(device.ToString() + " " + DTypeName(w_dtype) + " x " + DTypeName(x_dtype) +
                       " M=" + std::to_string(c.m) + " K=" + std::to_string(c.k));
          const int64_t n = 67;
          const Tensor w = RandomBlockWeights(n, c.k, w_dtype, device, rng);
          // x rows 32 values apart more than K: a strided view of a wider matrix.
          const Tensor wide = RandomTensor({c.m, c.k + 32}, x_dtype, device, rng);
          const Tensor x = wide.AsStrided({c.m, c.k}, {c.k + 32, 1}, wide.offset() + 32);
          Tensor out = Tensor::Empty({c.m, n}, x_dtype, device);
          testing::Poison(out);
          reach::Reset();
          tuning::SetVariant("gpu.matmul_skinny", "quant_gemv");  // 3..8 rows take the pipelined tiles by default
          MatMul({.x = x, .w = w, .out = out});
          tuning::SetVariant("gpu.matmul_skinny", "");
          EXPECT_EQ(reach::Count(std::string("MatMulGpu.quant_gemv.") + c.route), 1u) << c.route;
          EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, 1e-2 + testing::DefaultTolerance(x_dtype)));
        }
      }
    }
  }
}

// The staged GEMV of block weights (CUDA; Q8_0, Q4_0, Q4_K, Q5_K): chosen at 1..2
// rows from 4096 columns, forced at narrower N and up to 8 rows. Cases cover a stage
// count below the warp count (K = 256: warps 1..7 idle), stages not dividing evenly
// among the 8 warps (K = 2816: 11), several column groups per block (N 9000 > the
// resident blocks x 16 on an H200), a partial last group (N % 16 != 0), each format's
// slot ring wrapping (K = 2816 gives a warp 2 stages a group, 8 groups a block at N
// 4103); x rows are strided, f32 and bf16. Cases 7 and 8 force the two-block
// slot budget (gpu.quant_gemv_staged), the others take the default one block an SM;
// the last is the wide-weight route of 3..4 rows (N >= kQuantGemvStagedWideColumns).
TEST(GpuKernelRoutesTest, StagedBlockGemvMatchesTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct Case {
    int64_t m, n, k;
    bool forced, two_blocks;
  };
  const Case cases[] = {{1, 4096, 256, false, false}, {2, 4103, 2816, false, false}, {1, 9000, 512, false, false},
                        {1, 77, 2048, true, false},   {3, 300, 768, true, false},     {8, 4096, 1024, true, false},
                        {1, 4103, 2816, false, true}, {5, 300, 768, true, true},      {4, 9000, 512, false, false}};
  std::mt19937 rng(15);
  for (Device device : gpus) {
    if (device.type != DeviceType::kCUDA) continue;
    for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K}) {
      for (DType x_dtype : {DType::kBF16, DType::kF32}) {
        for (const Case& c : cases) {
          // Both slot budgets (gpu.quant_gemv_staged): one block an SM by default, two forced.
          const char* blocks = c.two_blocks ? "two_blocks" : "";
          SCOPED_TRACE(device.ToString() + " " + DTypeName(w_dtype) + " x " + DTypeName(x_dtype) +
                       " M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + " " + blocks);
          const Tensor w = RandomBlockWeights(c.n, c.k, w_dtype, device, rng);
          const Tensor wide = RandomTensor({c.m, c.k + 32}, x_dtype, device, rng);
          const Tensor x = wide.Slice(1, 32, c.k + 32);
          Tensor out = Tensor::Empty({c.m, c.n}, x_dtype, device);
          testing::Poison(out);
          reach::Reset();
          tuning::SetVariant("gpu.matmul_skinny", c.forced ? "quant_gemv_staged" : "");
          tuning::SetVariant("gpu.quant_gemv_staged", blocks);
          MatMul({.x = x, .w = w, .out = out});
          tuning::SetVariant("gpu.matmul_skinny", "");
          tuning::SetVariant("gpu.quant_gemv_staged", "");
          EXPECT_EQ(reach::Count("MatMulGpu.quant_gemv_staged"), 1u);
          EXPECT_TRUE(AllClose(testing::MatMulReference(x, w), out, 1e-2 + testing::DefaultTolerance(x_dtype)));
        }
      }
    }
  }
}

// One sequence of `context` tokens whose last `q_len` are queries, caches
// contiguous with block size 16 and blocks in order.
struct AttentionCase {
  int64_t context, q_len, heads, kv_heads, head_dim;
};

std::vector<double> AttentionReference(const AttentionCase& c, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v, double scale) {
  const int64_t d = c.head_dim, group = c.heads / c.kv_heads;
  std::vector<double> out(c.q_len * c.heads * d, 0.0);
  for (int64_t i = 0; i < c.q_len; ++i) {
    const int64_t position = c.context - c.q_len + i;
    for (int64_t h = 0; h < c.heads; ++h) {
      std::vector<double> s(position + 1, 0.0);
      double max_s = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= position; ++j) {
        for (int64_t e = 0; e < d; ++e) s[j] += q[(i * c.heads + h) * d + e] * k[(j * c.kv_heads + h / group) * d + e];
        s[j] *= scale;
        max_s = std::max(max_s, s[j]);
      }
      for (double& x : s) sum += x = std::exp(x - max_s);
      for (int64_t j = 0; j <= position; ++j) {
        for (int64_t e = 0; e < d; ++e) {
          out[(i * c.heads + h) * d + e] += s[j] / sum * v[(j * c.kv_heads + h / group) * d + e];
        }
      }
    }
  }
  return out;
}

TEST(GpuKernelRoutesTest, PagedAttentionOnePassAndSplitKvMatchTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  struct RouteCase {
    AttentionCase shape;
    const char* route;
  };
  const RouteCase cases[] = {
      {{300, 300, 8, 2, 64}, "rows_one_pass"},  // prefill: 2400 (row, head) blocks fill the GPU
      {{3000, 1, 4, 1, 256}, "rows_split_kv"},  // decode of one long sequence
      {{1500, 2, 16, 4, 128}, "rows_split_kv"},
  };
  std::mt19937 rng(12);
  constexpr int64_t kBlockSize = 16;
  for (Device device : gpus) {
    for (const RouteCase& rc : cases) {
      const AttentionCase& c = rc.shape;
      SCOPED_TRACE(device.ToString() + " " + rc.route + " D=" + std::to_string(c.head_dim));
      const int64_t blocks = (c.context + kBlockSize - 1) / kBlockSize;
      const Tensor q = RandomTensor({c.q_len, c.heads, c.head_dim}, DType::kF32, device, rng, -2.0f, 2.0f);
      const Tensor k = RandomTensor({c.context, c.kv_heads, c.head_dim}, DType::kF32, device, rng);
      const Tensor v = RandomTensor({c.context, c.kv_heads, c.head_dim}, DType::kF32, device, rng);
      Tensor k_cache = Tensor::Empty({blocks, kBlockSize, c.kv_heads, c.head_dim}, DType::kF32, device);
      Tensor v_cache = Tensor::Empty({blocks, kBlockSize, c.kv_heads, c.head_dim}, DType::kF32, device);
      std::vector<int32_t> slots(c.context), table(blocks);
      for (int64_t i = 0; i < c.context; ++i) slots[i] = static_cast<int32_t>(i);
      for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(b);
      WriteKvCache({.k = k, .v = v, .k_cache = k_cache, .v_cache = v_cache,
                    .slot_mapping = Tensor::FromVector(slots, {c.context}).To(device)});
      Tensor out = Tensor::Empty({c.q_len, c.heads, c.head_dim}, DType::kF32, device);
      testing::Poison(out);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      const std::vector<int32_t> seq_lens = {static_cast<int32_t>(c.context)};
      const std::vector<int32_t> query_start_loc = {0, static_cast<int32_t>(c.q_len)};
      reach::Reset();
      tuning::SetVariant("gpu.paged_attention", "rows");  // the default picks the tiles / group kernels here
      PagedAttention({.q = q, .k_cache = k_cache, .v_cache = v_cache,
                      .block_tables = Tensor::FromVector(table, {1, blocks}).To(device),
                      .seq_lens = Tensor::FromVector(seq_lens, {1}).To(device),
                      .query_start_loc = Tensor::FromVector(query_start_loc, {2}).To(device),
                      .out = out, .scale = scale, .max_query_len = c.q_len, .max_seq_len = c.context});
      tuning::SetVariant("gpu.paged_attention", "");
      EXPECT_EQ(reach::Count(std::string("PagedAttentionGpu.") + rc.route), 1u);
      // f32 dot products and an f32 online softmax over <= 3000 keys: errors ~1e-6.
      EXPECT_TRUE(AllClose(AttentionReference(c, ToDoubles(q), ToDoubles(k), ToDoubles(v), scale), out, 1e-5));
    }
  }
}

// Per token: S = e^g S; S += k (beta (v - S^T k))^T; o = S^T q, one sequence from
// a random state, in double. Layouts: q, k [T, Hk, Dk]; v [T, Hv, Dv]; S [Hv, Dk, Dv].
std::vector<double> DeltaRuleReference(int64_t tokens, int64_t hk, int64_t hv, int64_t dk, int64_t dv,
                                       const std::vector<double>& q, const std::vector<double>& k,
                                       const std::vector<double>& v, const std::vector<double>& g,
                                       const std::vector<double>& beta, std::vector<double>& state) {
  std::vector<double> out(tokens * hv * dv);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < hv; ++h) {
      const int64_t kh = h / (hv / hk);
      double* s = &state[h * dk * dv];
      const double decay = std::exp(g[t * hv + h]);
      for (int64_t j = 0; j < dv; ++j) {
        double read = 0;
        for (int64_t i = 0; i < dk; ++i) read += decay * s[i * dv + j] * k[(t * hk + kh) * dk + i];
        const double delta = beta[t * hv + h] * (v[(t * hv + h) * dv + j] - read);
        double o = 0;
        for (int64_t i = 0; i < dk; ++i) {
          s[i * dv + j] = decay * s[i * dv + j] + k[(t * hk + kh) * dk + i] * delta;
          o += s[i * dv + j] * q[(t * hk + kh) * dk + i];
        }
        out[(t * hv + h) * dv + j] = o;
      }
    }
  }
  return out;
}

TEST(GpuKernelRoutesTest, GdnStateInSharedOrGlobalMemoryMatchesTheReference) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(13);
  for (Device device : gpus) {
    for (int64_t dk : {128, 192, 256}) {  // 128: shared-memory state; 192, 256: global-memory state
      SCOPED_TRACE(device.ToString() + " Dk=" + std::to_string(dk));
      const int64_t tokens = 37, hk = 2, hv = 4, dv = 70;
      // Keys of norm 1 and queries of norm 1/sqrt(Dk), as the model feeds them, keep
      // the state bounded; g < 0 and beta in (0, 1).
      const float key_scale = 1.0f / std::sqrt(static_cast<float>(dk));
      const Tensor q = RandomTensor({tokens, hk, dk}, DType::kF32, device, rng, -key_scale, key_scale);
      const Tensor k = RandomTensor({tokens, hk, dk}, DType::kF32, device, rng, -key_scale, key_scale);
      const Tensor v = RandomTensor({tokens, hv, dv}, DType::kF32, device, rng);
      const Tensor g = RandomTensor({tokens, hv}, DType::kF32, device, rng, -0.5f, -0.01f);
      const Tensor beta = RandomTensor({tokens, hv}, DType::kF32, device, rng, 0.1f, 0.9f);
      const Tensor initial = RandomTensor({2, hv, dk, dv}, DType::kF32, device, rng);  // slot 1 is used
      std::vector<double> state = ToDoubles(initial.Select(0, 1));
      const std::vector<double> ref =
          DeltaRuleReference(tokens, hk, hv, dk, dv, ToDoubles(q), ToDoubles(k), ToDoubles(v), ToDoubles(g),
                             ToDoubles(beta), state);
      const std::vector<int32_t> query_start_loc = {0, static_cast<int32_t>(tokens)};
      for (auto op : {&GdnRecurrent, &GdnChunkedPrefill}) {
        Tensor states = initial.To(device);
        Tensor out = Tensor::Empty({tokens, hv, dv}, DType::kF32, device);
        testing::Poison(out);
        op({.q = q, .k = k, .v = v, .g = g, .beta = beta, .states = states,
            .query_start_loc = Tensor::FromVector(query_start_loc, {2}).To(device),
            .state_slot_ids = Tensor::FromVector(std::vector<int32_t>{1}, {1}).To(device), .out = out,
            .tiled_value_heads = false});
        // f32 state updates over 37 tokens with |S| ~ 1: errors ~1e-6.
        EXPECT_TRUE(AllClose(ref, out, 1e-5));
        EXPECT_TRUE(AllClose(state, ToDoubles(states.Select(0, 1)), 1e-5));
        EXPECT_TRUE(AllClose(ToDoubles(initial.Select(0, 0)), states.Select(0, 0), 0.0)) << "slot 0 untouched";
      }
    }
  }
}

}  // namespace
}  // namespace vt
