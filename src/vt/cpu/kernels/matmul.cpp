// MatMul on the CPU: out[M, N] = x[M, K] . w[N, K]^T, accumulating in f32.
//
// Contract (vt/op_args.h, checked by vt::MatMul): x [M, K] f32/bf16/f16, out [M, N]
// of x's dtype, both with unit stride in K and any row stride; w [N, K] with
// contiguous rows (any row stride) in f32, f16, bf16 or a GGUF block type whose
// block divides K. Q8_K is an activation format: as a weight it is refused here.
//
// Variants (chosen at run time, counted as reach "MatMulCpu.<w dtype>.<path>.<isa>"):
//   portable  every dtype: weight panels converted to f32, f32 dots.
//   avx2      f32 FMA tiles (16-bit weights converted on load); block weights as
//             integer tiles against x quantized to 8 bits (maddubs).
//   avx2_vnni block weights on a CPU with AVX-VNNI: the avx2 integer tiles with
//             vpdpbusd / vpdpwssd (one instruction where maddubs + madd + add are three),
//             except the K-quant GEMV (see ChooseVariant).
//   avx512    the same at 16 lanes, vdpbf16ps for bf16 weights, VNNI for blocks.
//   avx512_amx block weights' GEMM path (M >= kAmxMinRows) on a CPU with AMX-BF16:
//             bf16 tiles over panels dequantized to bf16 (matmul_amx.cpp).
// Paths: gemv when M <= kGemvMaxRows (decode: memory-bound, each weight row is
// streamed once, in address order, against every row of x in registers), gemm
// above (prefill: each cached panel of weight rows is reused by all tiles of x).
//
// Why it is fast: work is split over weight rows, so each thread streams disjoint
// weights once; quantized weights are never dequantized (integer dots with one f32
// scale per block), so decode reads 1.06 (Q8_0) or 0.56 (Q4_K) bytes per weight.
#include <string>

#include "../cpu_features.h"
#include "../thread_pool.h"
#include "matmul_kernels.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::cpu::matmul {
namespace {

enum class Variant { kPortable, kAvx2, kAvx2Vnni, kAvx512, kAvx512Amx, kNeonDotprod };

const char* VariantName(Variant v) {
  switch (v) {
    case Variant::kPortable: return "portable";
    case Variant::kAvx2: return "avx2";
    case Variant::kAvx2Vnni: return "avx2_vnni";
    case Variant::kAvx512: return "avx512";
    case Variant::kAvx512Amx: return "avx512_amx";
    case Variant::kNeonDotprod: return "neon_dotprod";
  }
  return "unknown";
}

bool IsKQuant(DType dtype) { return dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ6_K; }

// The widest variant allowed by ActiveIsa(); AVX-512 needs VNNI for block weights
// and AVX512_BF16 for bf16 weights, else AVX2 runs them, with AVX-VNNI for block
// weights where the CPU has it. Not for the K-quant GEMV: there the maddubs tiles
// were faster (Q4_K 3584 x 1024, one token, 2 threads, Xeon with AVX-512 and
// AVX-VNNI: 148-168 us against 273-292 with vpdpwssd; in the GEMM at 128 tokens
// vpdpwssd gave 166 GFLOP/s against 129: bench/matmul_bench.cpp, BM_MatMulIsa).
Variant ChooseVariant(DType w_dtype, int64_t m) {
  const bool vnni = IsQuantized(w_dtype) && HasAvxVnni() && !(IsKQuant(w_dtype) && m <= kGemvMaxRows);
  const Variant avx2 = vnni ? Variant::kAvx2Vnni : Variant::kAvx2;
  switch (ActiveIsa()) {
    case Isa::kAvx512:
      if (IsQuantized(w_dtype) && !HasAvx512Vnni()) return avx2;
      if (w_dtype == DType::kBF16 && !HasAvx512Bf16()) return avx2;
      if (IsQuantized(w_dtype) && m >= kAmxMinRows && HasAmxBf16()) return Variant::kAvx512Amx;
      return Variant::kAvx512;
    case Isa::kAvx2: return avx2;
    case Isa::kPortable: break;
  }
  // aarch64 (ActiveIsa() is kPortable there): sdot for the 32-value block formats.
  if ((w_dtype == DType::kQ8_0 || w_dtype == DType::kQ4_0) && HasNeonDotprod()) return Variant::kNeonDotprod;
  return Variant::kPortable;
}

XFormat InputFormat(Variant variant, DType w_dtype, DType x_dtype, int64_t m) {
  if (variant == Variant::kPortable) return XFormat::kF32;
  if (variant == Variant::kNeonDotprod) return XFormat::kQ8x32;
  if (variant == Variant::kAvx512Amx) return XFormat::kBf16Tiles;
  if (IsQuantized(w_dtype) && variant == Variant::kAvx512 && HasAvx512Bf16() && m >= kBf16PanelMinRows) {
    return XFormat::kBf16;
  }
  if (w_dtype == DType::kQ4_0 || w_dtype == DType::kQ8_0) return XFormat::kQ8x32;
  if (IsQuantized(w_dtype)) return XFormat::kQ8x256;
  // bf16 x against bf16 weights: vdpbf16ps is exact. Wider x stays f32 (see matmul_avx512.cpp).
  if (w_dtype == DType::kBF16 && variant == Variant::kAvx512 && x_dtype == DType::kBF16) return XFormat::kBf16;
  return XFormat::kF32;
}

}  // namespace

PreparedMatMul PrepareMatMul(const MatMulArgs& a) {
  const DType w_dtype = a.w.dtype();
  const int64_t m = a.x.size(0), k = a.x.size(1);
  const Variant variant = ChooseVariant(w_dtype, m);
  PreparedMatMul prepared{.problem = {.m = m,
                                      .n = a.w.size(0),
                                      .k = k,
                                      .w_dtype = w_dtype,
                                      .w = static_cast<const char*>(a.w.data()),
                                      .w_row_bytes = BytesFor(w_dtype, a.w.stride(0)),
                                      .x = {},
                                      .out = a.out.data(),
                                      .out_stride = a.out.stride(0),
                                      .out_dtype = a.out.dtype()},
                          .rows = variant == Variant::kAvx512Amx  ? &MatMulRowsAvx512Amx
                                  : variant == Variant::kAvx512   ? &MatMulRowsAvx512
                                  : variant == Variant::kAvx2Vnni ? &MatMulRowsAvx2Vnni
                                  : variant == Variant::kAvx2     ? &MatMulRowsAvx2
                                                                  : &MatMulRowsPortable,
                          .rows_per_item = variant == Variant::kAvx512Amx ? kAmxPanelRows : kRowsPerWorkItem};
#if defined(__aarch64__)
  if (variant == Variant::kNeonDotprod) prepared.rows = &MatMulRowsNeonDotprod;
#endif
  const XRowOps x_ops = variant == Variant::kAvx512 || variant == Variant::kAvx512Amx ? Avx512XRowOps()
                        : variant == Variant::kAvx2 || variant == Variant::kAvx2Vnni ? Avx2XRowOps()
                                                                                     : PortableXRowOps();
  PrepareX(a.x.data(), a.x.dtype(), a.x.stride(0), m, k, InputFormat(variant, w_dtype, a.x.dtype(), m), x_ops, &prepared.problem.x);
  reach::Hit(std::string("MatMulCpu.") + DTypeName(w_dtype) + (m <= kGemvMaxRows ? ".gemv." : ".gemm.") +
             VariantName(variant));
  return prepared;
}

void RunPreparedMatMuls(const std::vector<PreparedMatMul>& matmuls) {
  std::vector<int64_t> first_item = {0};  // items of matmuls[i]: first_item[i] .. first_item[i + 1]
  int64_t work_bytes = 0;
  for (const PreparedMatMul& mm : matmuls) {
    first_item.push_back(first_item.back() + mm.num_items());
    const Problem& p = mm.problem;
    work_bytes += p.n * BytesFor(p.w_dtype, p.k) * std::max<int64_t>(1, p.m / 8);
  }
  // A chunk holds at least ~64 KiB of weights (or a whole item when x has many
  // rows), so scheduling stays cheap next to the streaming. Below 2 MiB of work each
  // thread takes one contiguous share instead: a call that short is bound by the
  // DRAM latency of starting each stream (measured: Q8_0 [512, 1024], 2 threads,
  // 31 -> 25 us).
  const int64_t total = first_item.back();
  int64_t grain = std::max<int64_t>(1, (int64_t{64} << 10) * total / std::max<int64_t>(work_bytes, 1));
  if (work_bytes < (int64_t{2} << 20)) grain = std::max<int64_t>(grain, (total + NumThreads() - 1) / NumThreads());
  ParallelFor(total, grain, [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < matmuls.size(); ++i) {
      const int64_t lo = std::max(begin, first_item[i]), hi = std::min(end, first_item[i + 1]);
      if (lo < hi) matmuls[i].RunItems(lo - first_item[i], hi - first_item[i]);
    }
  });
}

void MatMulCpu(const MatMulArgs& a) {
  std::vector<PreparedMatMul> matmuls;
  matmuls.push_back(PrepareMatMul(a));
  RunPreparedMatMuls(matmuls);
}

VT_REGISTER_KERNEL(MatMul, kCPU, MatMulCpu);

}  // namespace vt::cpu::matmul
