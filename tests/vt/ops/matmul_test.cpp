// MatMul contract: out[M, N] = x[M, K] . w[N, K]^T against a double-precision
// reference computed from the dequantized weights and x as stored, for every x dtype
// x every weight dtype, M from decode (1) to prefill (300) sizes, odd N, strided x /
// w / out rows, on every device and CPU ISA level.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/cpu/cpu_features.h"
#include "vt/quant.h"
#include "vt/reach.h"

namespace vt {
namespace {

constexpr DType kXDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
constexpr int64_t kRowCounts[] = {1, 2, 3, 7, 64, 129, 300};
// Block weights: both sides of each GPU kernel boundary (the int8 GEMV's row
// templates 1/2/4/8, its limit kQuantGemvMaxRows = 8, which is the skinny limit too;
// the pipelined int8 tiles from kQuantGemvBeforeTilesRows + 1 = 3 rows where K is a
// multiple of 256;
// the int8 tensor-core tiles up to kQuantMmaMaxRows = 16), the CPU's AMX GEMM from
// kAmxMinRows = 16 (15 below it), and rows well inside the dense route.
constexpr int64_t kBlockRowCounts[] = {1, 2, 3, 5, 8, 9, 15, 16, 17, 64, 300};

// Random weights [N, K] of `dtype` on the CPU, quantized row by row for block types.
// With `pad_blocks` > 0 the rows are strided: a view into [N, K + pad] storage.
Tensor RandomWeights(int64_t n, int64_t k, DType dtype, int64_t pad_blocks, std::mt19937& rng) {
  const int64_t pad = pad_blocks * Info(dtype).block_elems;
  if (!IsQuantized(dtype)) return testing::WithPaddedRows(testing::RandomTensor({n, k}, dtype, kCpu, rng), pad);
  Tensor values = testing::RandomTensor({n, k}, DType::kF32, kCpu, rng);
  Tensor storage = Tensor::Empty({n, k + pad}, dtype);
  Tensor w = storage.Slice(1, 0, k);
  for (int64_t r = 0; r < n; ++r) {
    QuantizeRow(values.data_ptr<float>() + r * k, k, static_cast<char*>(w.data()) + r * BytesFor(dtype, k + pad),
                dtype);
  }
  return w;
}

Tensor OnDevice(const Tensor& t, Device device) { return device == t.device() ? t : t.To(device); }

// Relative to the largest |out| (AllClose), on top of the rounding of out's dtype:
//  - block-type weights: the kernel may quantize each activation block to 8 bits
//    (Q8_0 / Q8_K-like). Each x_i then moves by at most amax / 254 (0.4% of the
//    block's largest |x|); the errors are independent, so the dot moves by well
//    under 1% of the row's magnitude: 1e-2.
//  - float weights of any dtype: products are exact in f32 (bf16 x bf16 in
//    vdpbf16ps, everything else in f32 FMAs), so only f32 accumulation and out's
//    rounding remain. (An earlier AVX-512 path kept 16 mantissa bits of f32 x for
//    bf16 weights, a 1e-5 error that put f32 models 1e-4 off HF; this bound catches it.)
double Tolerance(DType out_dtype, DType w_dtype) {
  const double out_rounding = testing::DefaultTolerance(out_dtype);
  if (IsQuantized(w_dtype)) return 1e-2 + out_rounding;
  return out_rounding;
}

void CheckMatMul(DType x_dtype, DType w_dtype, int64_t m, int64_t n, int64_t k, std::mt19937& rng,
                 DType out_dtype) {
  SCOPED_TRACE(std::string("x ") + DTypeName(x_dtype) + " w " + DTypeName(w_dtype) + " out " + DTypeName(out_dtype) +
               " M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
  const int64_t pad = m % 2;  // odd M: strided rows everywhere; even M: contiguous
  const Tensor w = RandomWeights(n, k, w_dtype, pad, rng);
  const Tensor x = testing::WithPaddedRows(testing::RandomTensor({m, k}, x_dtype, kCpu, rng), 3 * pad);
  const std::vector<double> ref = testing::MatMulReference(x, w);
  testing::ForEachDeviceAndIsa([&](Device device) {
    const Tensor out = testing::WithPaddedRows(Tensor::Zeros({m, n}, out_dtype, device), 5 * pad);
    testing::Poison(out);
    MatMul({.x = OnDevice(x, device), .w = OnDevice(w, device), .out = out});
    EXPECT_TRUE(testing::AllClose(ref, out, Tolerance(out_dtype, w_dtype)));
  });
}

void CheckMatMul(DType x_dtype, DType w_dtype, int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  CheckMatMul(x_dtype, w_dtype, m, n, k, rng, x_dtype);
}

TEST(MatMulTest, FloatWeightsOddK) {
  std::mt19937 rng(1);
  for (DType w_dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (DType x_dtype : kXDTypes) {
      for (int64_t m : kRowCounts) CheckMatMul(x_dtype, w_dtype, m, 37, m % 2 ? 67 : 160, rng);
    }
  }
}

TEST(MatMulTest, Q8_0AndQ4_0Weights) {
  std::mt19937 rng(2);
  for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0}) {
    for (DType x_dtype : kXDTypes) {
      for (int64_t m : kBlockRowCounts) CheckMatMul(x_dtype, w_dtype, m, 37, m % 2 ? 96 : 288, rng);
    }
  }
}

TEST(MatMulTest, KQuantWeights) {
  std::mt19937 rng(3);
  for (DType w_dtype : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (DType x_dtype : kXDTypes) {
      for (int64_t m : kBlockRowCounts) CheckMatMul(x_dtype, w_dtype, m, 37, m % 2 ? 256 : 512, rng);
    }
  }
}

// Rows of many blocks (several steps of a warp's walk, a partial last one) and more
// columns than an H200 holds warps at once (8448: the GEMV's column loop goes round).
TEST(MatMulTest, BlockWeightsLongRowsAndManyColumns) {
  std::mt19937 rng(7);
  for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int64_t long_k = Info(w_dtype).block_elems == 32 ? 33 * 32 : 5 * 256;
    for (int64_t m : {1, 4, 16}) CheckMatMul(DType::kBF16, w_dtype, m, 45, long_k, rng);
    CheckMatMul(DType::kF32, w_dtype, 3, 9001, 256, rng);
  }
}

// The AMX GEMM of block weights (CPU with AMX-BF16) around its boundaries: M just
// below kAmxMinRows (AVX-512 tiles) and then one, two and three 16-row blocks of x
// (pairs of blocks share the weight tiles, an odd last one runs alone); N in one or
// two 16-row tiles of a 32-row panel, whole panels and a partial last one; K of odd
// numbers of 32-value tile steps. Where the CPU lacks AMX this runs the other paths.
TEST(MatMulTest, AmxTilesAcrossRowBlocksAndPanels) {
  std::mt19937 rng(9);
  for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    const bool block32 = Info(w_dtype).block_elems == 32;
    for (int64_t m : {15, 16, 17, 31, 32, 33, 48, 49}) {
      for (int64_t n : {1, 16, 17, 32, 75}) {
        const int64_t k = block32 ? (m % 2 ? 3 * 32 : 7 * 32) : (m % 2 ? 256 : 3 * 256);
        CheckMatMul(m % 3 ? DType::kF32 : DType::kBF16, w_dtype, m, n, k, rng, DType::kF32);
      }
    }
  }
}

// Fewer weight rows than any register tile, and a single output column.
TEST(MatMulTest, TinyN) {
  std::mt19937 rng(4);
  for (DType w_dtype : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_K}) {
    for (int64_t n : {1, 2, 3}) {
      for (int64_t m : {1, 5, 64}) CheckMatMul(DType::kF32, w_dtype, m, n, 256, rng);
    }
  }
}

// Weight rows that are views into a fused [2N, K] tensor (e.g. gate_up), so the row
// stride is K but the view starts mid-tensor.
TEST(MatMulTest, WeightViewIntoFusedTensor) {
  std::mt19937 rng(5);
  for (DType w_dtype : {DType::kBF16, DType::kQ8_0, DType::kQ6_K}) {
    const Tensor fused = RandomWeights(2 * 19, 256, w_dtype, 0, rng);
    const Tensor w = fused.Slice(0, 19, 38);
    for (int64_t m : {1, 64}) {
      const Tensor x = testing::RandomTensor({m, 256}, DType::kF32, kCpu, rng);
      const std::vector<double> ref = testing::MatMulReference(x, w);
      testing::ForEachDeviceAndIsa([&](Device device) {
        const Tensor out = Tensor::Zeros({m, 19}, DType::kF32, device);
        testing::Poison(out);
        MatMul({.x = OnDevice(x, device), .w = device == kCpu ? w : fused.To(device).Slice(0, 19, 38), .out = out});
        EXPECT_TRUE(testing::AllClose(ref, out, Tolerance(DType::kF32, w_dtype))) << DTypeName(w_dtype);
      });
    }
  }
}

// f32 out from 16-bit x (the LM head's logits): the sums are stored unrounded, so
// float weights meet the f32 bound (bf16 rounding of out would be ~100x over it),
// across the decode kernels (x widened on the GPU) and the vendor routes.
TEST(MatMulTest, F32OutFrom16BitX) {
  std::mt19937 rng(8);
  for (DType x_dtype : {DType::kBF16, DType::kF16}) {
    for (DType w_dtype : {DType::kBF16, DType::kF16, DType::kF32, DType::kQ8_0, DType::kQ4_K}) {
      for (int64_t m : {1, 2, 8, 9, 16, 17, 64, 129}) CheckMatMul(x_dtype, w_dtype, m, 37, 512, rng, DType::kF32);
    }
  }
  // Past the size below which our tiled kernel keeps the shape: the vendor route.
  CheckMatMul(DType::kBF16, DType::kBF16, 300, 1000, 512, rng, DType::kF32);
  CheckMatMul(DType::kBF16, DType::kQ8_0, 300, 1000, 512, rng, DType::kF32);
}

TEST(MatMulTest, OutOfAnotherDTypeThanXIsRefusedUnlessF32) {
  testing::ForEachDeviceAndIsa([&](Device device) {
    const Tensor w = Tensor::Zeros({4, 32}, DType::kBF16, device);
    const Tensor x = Tensor::Zeros({1, 32}, DType::kF32, device);
    try {
      MatMul({.x = x, .w = w, .out = Tensor::Zeros({1, 4}, DType::kBF16, device)});
      ADD_FAILURE() << "MatMul accepted f32 x with bf16 out";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out"), std::string::npos) << e.what();
    }
  });
}

TEST(MatMulTest, Q8_KWeightsAreRejectedByName) {
  std::mt19937 rng(6);
  const Tensor w = RandomWeights(4, 256, DType::kQ8_K, 0, rng);
  testing::ForEachDeviceAndIsa([&](Device device) {
    const Tensor x = Tensor::Zeros({1, 256}, DType::kF32, device);
    const Tensor out = Tensor::Zeros({1, 4}, DType::kF32, device);
    try {
      MatMul({.x = x, .w = OnDevice(w, device), .out = out});
      ADD_FAILURE() << "MatMul accepted q8_k weights";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("q8_k"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("MatMul"), std::string::npos) << e.what();
    }
  });
}

// The ISA variant a CPU call should take: AVX-512 paths need VNNI (block types) or
// BF16 (bf16 weights), and block types take AMX tiles from kAmxMinRows (16) rows
// where the CPU has AMX-BF16; without them the AVX2 variant runs, for block types with
// AVX-VNNI where the CPU has it (and ForEachCpuIsa allows it), but not in the
// K-quant GEMV (M = 1 here); on aarch64 with the dot-product extension Q8_0 and Q4_0
// take the sdot kernel.
std::string ExpectedCpuVariant(DType w_dtype, int64_t m) {
  const cpu::Isa isa = cpu::ActiveIsa();
  const bool k_quant = w_dtype == DType::kQ4_K || w_dtype == DType::kQ5_K || w_dtype == DType::kQ6_K;
  const std::string avx2 = IsQuantized(w_dtype) && cpu::HasAvxVnni() && !(k_quant && m == 1) ? "avx2_vnni" : "avx2";
  if (isa == cpu::Isa::kAvx512) {
    const bool has = IsQuantized(w_dtype)      ? cpu::HasAvx512Vnni()
                     : w_dtype == DType::kBF16 ? cpu::HasAvx512Bf16()
                                               : true;
    if (has && IsQuantized(w_dtype) && m >= 16 && cpu::HasAmxBf16()) return "avx512_amx";
    return has ? "avx512" : avx2;
  }
  if (isa == cpu::Isa::kPortable && (w_dtype == DType::kQ8_0 || w_dtype == DType::kQ4_0) && cpu::HasNeonDotprod()) {
    return "neon_dotprod";  // aarch64 with sdot (ForEachCpuIsa runs it and the portable kernel)
  }
  return isa == cpu::Isa::kAvx2 ? avx2 : cpu::IsaName(isa);
}

TEST(MatMulTest, DecodeRunsGemvAndPrefillRunsGemmAtEachIsa) {
  std::mt19937 rng(7);
  for (DType w_dtype :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const Tensor w = RandomWeights(8, 256, w_dtype, 0, rng);
    testing::ForEachCpuIsa([&] {
      for (int64_t m : {1, 128}) {
        const std::string name = std::string("MatMulCpu.") + DTypeName(w_dtype) + (m == 1 ? ".gemv." : ".gemm.") +
                                 ExpectedCpuVariant(w_dtype, m);
        reach::Reset();
        MatMul({.x = Tensor::Zeros({m, 256}, DType::kF32), .w = w, .out = Tensor::Zeros({m, 8}, DType::kF32)});
        EXPECT_EQ(reach::Count(name), 1u) << name;
      }
    });
  }
}

}  // namespace
}  // namespace vt
