// MatMul, AVX-512 variant (F/BW/VL/DQ + VNNI + BF16): out[M, N] = x[M, K] . w[N, K]^T
// over a range of weight rows (see matmul.cpp for the contract and matmul_tiles.h
// for the loop). matmul.cpp only routes here when the CPU has VNNI (block weights)
// or AVX512_BF16 (bf16 weights); otherwise the AVX2 variant runs.
//   f32 / f16 weights: 16-lane f32 FMA tiles (f16 via vcvtph2ps; GEMM converts each
//     weight panel to f32 once).
//   bf16 weights, bf16 x: vdpbf16ps on both as stored (exact products).
//   bf16 weights, f32/f16 x: f32 FMA tiles on weights widened by a 16-bit shift, so x
//     keeps all 24 mantissa bits (a bf16 hi + lo split of x kept only 16, which put
//     f32 models 1e-4 away from their f32 reference).
//   block weights: the integer tiles of matmul_int8_x86.h with vpdpbusd/vpdpwssd.
#include <immintrin.h>

#include "matmul_float_x86.h"
#include "matmul_int8_x86.h"
#include "matmul_kquant_avx512.h"
#include "matmul_q8_0_gemv_avx512.h"

namespace vt::cpu::matmul {
namespace {

struct VnniInt8 {
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i MaddI16(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
};

struct Avx512Vec {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec LoadX(const float* x) { return _mm512_loadu_ps(x); }
  static Vec Fma(Vec a, Vec b, Vec acc) { return _mm512_fmadd_ps(a, b, acc); }
  static float Sum(Vec v) { return _mm512_reduce_add_ps(v); }
  static void Store(float* dst, Vec v) { _mm512_storeu_ps(dst, v); }
};

struct F32Weights : Avx512Vec {
  static Vec Load(const char* row, int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float At(const char* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};

struct Bf16Weights : Avx512Vec {
  static Vec Load(const char* row, int64_t k) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  static float At(const char* row, int64_t k) { return Bf16ToF32(reinterpret_cast<const uint16_t*>(row)[k]); }
};

struct F16Weights : Avx512Vec {
  static Vec Load(const char* row, int64_t k) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static float At(const char* row, int64_t k) { return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[k]); }
};

// bf16 weights . bf16 x: each f32 lane accumulates two adjacent exact products.
struct Bf16DotTiles {
  template <int RM, int RN>
  static void Step(const uint16_t* const* x, const uint16_t* const* w, int64_t k, __m512 (&acc)[RM][RN]) {
    __m512bh wv[RN];
    for (int j = 0; j < RN; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w[j] + k);
    for (int i = 0; i < RM; ++i) {
      const auto xv = (__m512bh)_mm512_loadu_si512(x[i] + k);
      for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }

  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel) {
    constexpr int kC = kFloatChains<RM, RN>;
    const int64_t k_vec = p.k / 32 * 32;
    const uint16_t* x[RM];
    for (int i = 0; i < RM; ++i) x[i] = p.x.bf16 + (m0 + i) * p.k;
    const uint16_t* w[RN];
    for (int j = 0; j < RN; ++j) w[j] = reinterpret_cast<const uint16_t*>(panel.Row(j));
    __m512 acc[kC][RM][RN];
    for (auto& chain : acc) {
      for (auto& row : chain) {
        for (auto& a : row) a = _mm512_setzero_ps();
      }
    }
    int64_t k = 0;
    for (; k + 32 * kC <= k_vec; k += 32 * kC) {
      for (int c = 0; c < kC; ++c) Step<RM, RN>(x, w, k + 32 * c, acc[c]);
    }
    for (; k < k_vec; k += 32) Step<RM, RN>(x, w, k, acc[0]);
    for (int i = 0; i < RM; ++i) {
      for (int j = 0; j < RN; ++j) {
        float sum = 0;
        for (int c = 0; c < kC; ++c) sum += _mm512_reduce_add_ps(acc[c][i][j]);
        for (k = k_vec; k < p.k; ++k) sum += Bf16ToF32(x[i][k]) * Bf16ToF32(w[j][k]);
        p.Store(m0 + i, n0 + j, sum);
      }
    }
  }
};

// ---- x row converters (XRowOps) ----------------------------------------------------

// q = round(x * 127 / amax) for 16 values; returns them as int32 lanes.
__m512i QuantizeLanes(__m512 v, float inv) { return _mm512_cvtps_epi32(_mm512_mul_ps(v, _mm512_set1_ps(inv))); }

__m512 AbsMax(__m512 a, __m512 b) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  return _mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b));
}

void QuantizeRowQ8x32(const float* x, int64_t k, int8_t* q, float* d, int32_t* sums) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32, q += 32) {
    const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(AbsMax(lo, hi));
    d[b] = amax / 127.0f;
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    const __m512i q_lo = QuantizeLanes(lo, inv), q_hi = QuantizeLanes(hi, inv);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q_lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q_hi));
    sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q_lo, q_hi));
  }
}

void QuantizeRowQ8x256(const float* x, int64_t k, int8_t* q, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < k / 256; ++b, x += 256, q += 256) {
    __m512 amax_lanes = _mm512_setzero_ps();
    for (int g = 0; g < 16; g += 2)
      amax_lanes = _mm512_max_ps(amax_lanes, AbsMax(_mm512_loadu_ps(x + 16 * g), _mm512_loadu_ps(x + 16 * g + 16)));
    const float amax = _mm512_reduce_max_ps(amax_lanes);
    d[b] = amax / 127.0f;
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int g = 0; g < 16; ++g) {
      const __m512i lanes = QuantizeLanes(_mm512_loadu_ps(x + 16 * g), inv);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * g), _mm512_cvtsepi32_epi8(lanes));
      bsums[16 * b + g] = static_cast<int16_t>(_mm512_reduce_add_epi32(lanes));
    }
  }
}

// bf16(x), rounded to nearest even by vcvtneps2bf16.
void RoundRowToBf16(const float* x, int64_t k, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
  }
  for (; i < k; ++i) out[i] = F32ToBf16(x[i]);
}

// Tile shapes fit the 32 vector registers: RM x RN accumulators plus the operands
// (K-quant tiles keep an integer and an f32 accumulator per pair).
constexpr int kFloatRows = 4, kFloatCols = 4;
// Its 32-value block GEMM path keeps the scales multiplied per pair (the scale
// products of the 256-bit variants are not measured on AVX-512).
struct Int8Shape {
  static constexpr int kQ8_0Rows = 4, kQ4_0Rows = 4, kBlock32Cols = 4, kKQuantRows = 4, kKQuantCols = 2;
  static constexpr bool kBlock32ScaleProducts = false;
};

template <class Kernel>
void RunFloatTiles(const Problem& p, int64_t n_begin, int64_t n_end) {
  RunGemvOrGemm<Kernel, kFloatRows, kFloatCols>(p, n_begin, n_end);
}

// GEMM over block weights: each panel of RN weight rows is dequantized once
// (vt::DequantizeRow, then rounded to bf16), then swept by vdpbf16ps tiles against
// x rounded to bf16.
void RunBf16DequantizedPanels(const Problem& p, int64_t n_begin, int64_t n_end) {
  std::vector<float> row(static_cast<size_t>(p.k));
  std::vector<uint16_t> buffer(static_cast<size_t>(kFloatCols * p.k));  // [kFloatCols, K] bf16
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kFloatCols) {
    const int64_t cols = std::min<int64_t>(kFloatCols, n_end - n0);
    for (int64_t c = 0; c < cols; ++c) {
      DequantizeRow(p.WeightRow(n0 + c), p.w_dtype, p.k, row.data());
      RoundRowToBf16(row.data(), p.k, buffer.data() + c * p.k);
    }
    const WeightPanel panel{reinterpret_cast<const char*>(buffer.data()), p.k * 2};
    RunPanel<Bf16DotTiles, kFloatRows, kFloatCols>(p, n0, cols, panel);
  }
}

template <class Pairs>
void RunKQuantTiles512(const Problem& p, int64_t n_begin, int64_t n_end) {
  if (p.m <= kGemvMaxRows) return RunGemvInTwoStreams<KQuantTiles512<Pairs>>(p, n_begin, n_end);
  RunTiles<KQuantTiles512<Pairs>, Int8Shape::kKQuantRows, Int8Shape::kKQuantCols>(p, n_begin, n_end);
}

}  // namespace

XRowOps Avx512XRowOps() { return {QuantizeRowQ8x32, QuantizeRowQ8x256, RoundRowToBf16}; }

void MatMulRowsAvx512(const Problem& p, int64_t n_begin, int64_t n_end) {
  switch (p.w_dtype) {
    case DType::kF32: RunFloatTiles<FloatTiles<F32Weights>>(p, n_begin, n_end); return;
    case DType::kF16:
      if (p.m <= kGemvMaxRows)
        RunFloatTiles<FloatTiles<F16Weights>>(p, n_begin, n_end);
      else
        RunConvertedPanels<F16Weights, F32Weights, kFloatRows, kFloatCols>(p, n_begin, n_end);
      return;
    case DType::kBF16:
      if (p.x.format == XFormat::kBf16)
        RunFloatTiles<Bf16DotTiles>(p, n_begin, n_end);
      else if (p.m <= kGemvMaxRows)
        RunFloatTiles<FloatTiles<Bf16Weights>>(p, n_begin, n_end);
      else
        RunConvertedPanels<Bf16Weights, F32Weights, kFloatRows, kFloatCols>(p, n_begin, n_end);
      return;
    default: break;
  }
  if (p.x.format == XFormat::kBf16) return RunBf16DequantizedPanels(p, n_begin, n_end);
  switch (p.w_dtype) {
    case DType::kQ4_K: RunKQuantTiles512<Q4KPairs>(p, n_begin, n_end); return;
    case DType::kQ5_K: RunKQuantTiles512<Q5KPairs>(p, n_begin, n_end); return;
    case DType::kQ6_K: RunKQuantTiles512<Q6KPairs>(p, n_begin, n_end); return;
    case DType::kQ8_0:
      if (p.m <= kGemvMaxRows) return RunQ8_0Gemv512(p, n_begin, n_end);
      break;
    default: break;
  }
  RunInt8Tiles<VnniInt8, Int8Shape>(p, n_begin, n_end);
}

}  // namespace vt::cpu::matmul
