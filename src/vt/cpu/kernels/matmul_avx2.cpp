// MatMul, AVX2 + FMA + F16C variant: out[M, N] = x[M, K] . w[N, K]^T over a range of
// weight rows (see matmul.cpp for the contract and matmul_tiles.h for the loop).
//   f32 / f16 / bf16 weights: 8-lane f32 FMA tiles; f16 converts with vcvtph2ps and
//     bf16 by a 16-bit shift. GEMM converts each weight panel to f32 once.
//   block weights: integer tiles (matmul_int8_x86.h) with maddubs + madd against x
//     quantized to 8 bits.
#include <immintrin.h>

#include "matmul_float_x86.h"
#include "matmul_int8_x86.h"

namespace vt::cpu::matmul {
namespace {

struct Avx2Int8 {
  // maddubs saturates int16 pairs; callers keep |u| <= 128 and |s| <= 127 (Q8_0's
  // |w| . sign(x, w)) or u <= 63, so a pair stays within 2 * 128 * 127 < 32768.
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i MaddI16(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
};

struct Avx2Vec {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec LoadX(const float* x) { return _mm256_loadu_ps(x); }
  static Vec Fma(Vec a, Vec b, Vec acc) { return _mm256_fmadd_ps(a, b, acc); }
  static float Sum(Vec v) { return HorizontalSum(v); }
  static void Store(float* dst, Vec v) { _mm256_storeu_ps(dst, v); }
};

struct F32Weights : Avx2Vec {
  static Vec Load(const char* row, int64_t k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static float At(const char* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};

struct F16Weights : Avx2Vec {
  static Vec Load(const char* row, int64_t k) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static float At(const char* row, int64_t k) { return _cvtsh_ss(reinterpret_cast<const uint16_t*>(row)[k]); }
};

struct Bf16Weights : Avx2Vec {
  static Vec Load(const char* row, int64_t k) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
  static float At(const char* row, int64_t k) { return Bf16ToF32(reinterpret_cast<const uint16_t*>(row)[k]); }
};

// ---- x row converters (XRowOps) ----------------------------------------------------

__m256 AbsValues(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int HorizontalSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 32 values -> 32 int8 q = round(x * inv) (|x * inv| <= 127); returns sum(q) per
// group of 16 in sums[0..1].
void QuantizeLanes32(const float* x, float inv, int8_t* q, int* sums) {
  const __m256 scale = _mm256_set1_ps(inv);
  __m256i lanes[4];
  for (int i = 0; i < 4; ++i) lanes[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), scale));
  // packs interleave the 128-bit halves; the permute restores value order.
  const __m256i packed =
      _mm256_packs_epi16(_mm256_packs_epi32(lanes[0], lanes[1]), _mm256_packs_epi32(lanes[2], lanes[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  sums[0] = HorizontalSumI32(_mm256_add_epi32(lanes[0], lanes[1]));
  sums[1] = HorizontalSumI32(_mm256_add_epi32(lanes[2], lanes[3]));
}

float AbsMaxOf(const float* x, int n) {
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, AbsValues(_mm256_loadu_ps(x + i)));
  return HorizontalMax(m);
}

void QuantizeRowQ8x32(const float* x, int64_t k, int8_t* q, float* d, int32_t* sums) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32, q += 32) {
    const float amax = AbsMaxOf(x, 32);
    d[b] = amax / 127.0f;
    int half_sums[2];
    QuantizeLanes32(x, amax > 0 ? 127.0f / amax : 0.0f, q, half_sums);
    sums[b] = half_sums[0] + half_sums[1];
  }
}

void QuantizeRowQ8x256(const float* x, int64_t k, int8_t* q, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < k / 256; ++b, x += 256, q += 256) {
    const float amax = AbsMaxOf(x, 256);
    d[b] = amax / 127.0f;
    for (int c = 0; c < 8; ++c) {
      int half_sums[2];
      QuantizeLanes32(x + 32 * c, amax > 0 ? 127.0f / amax : 0.0f, q + 32 * c, half_sums);
      bsums[16 * b + 2 * c] = static_cast<int16_t>(half_sums[0]);
      bsums[16 * b + 2 * c + 1] = static_cast<int16_t>(half_sums[1]);
    }
  }
}

// Tile shapes fit the 16 ymm registers: RM x RN accumulators plus the operands.
constexpr int kFloatRows = 4, kFloatCols = 2;

template <class Kernel>
void RunFloatTiles(const Problem& p, int64_t n_begin, int64_t n_end) {
  RunGemvOrGemm<Kernel, kFloatRows, kFloatCols>(p, n_begin, n_end);
}

}  // namespace

// The AVX2 variant never reads x as bf16 (bf16 weights convert to f32 instead).
XRowOps Avx2XRowOps() { return {QuantizeRowQ8x32, QuantizeRowQ8x256, PortableXRowOps().bf16}; }

void MatMulRowsAvx2(const Problem& p, int64_t n_begin, int64_t n_end) {
  const bool gemv = p.m <= kGemvMaxRows;
  switch (p.w_dtype) {
    case DType::kF32: RunFloatTiles<FloatTiles<F32Weights>>(p, n_begin, n_end); return;
    case DType::kF16:
      if (gemv)
        RunFloatTiles<FloatTiles<F16Weights>>(p, n_begin, n_end);
      else
        RunConvertedPanels<F16Weights, F32Weights, kFloatRows, kFloatCols>(p, n_begin, n_end);
      return;
    case DType::kBF16:
      if (gemv)
        RunFloatTiles<FloatTiles<Bf16Weights>>(p, n_begin, n_end);
      else
        RunConvertedPanels<Bf16Weights, F32Weights, kFloatRows, kFloatCols>(p, n_begin, n_end);
      return;
    default: RunInt8Tiles<Avx2Int8, Ymm16Int8Shape>(p, n_begin, n_end); return;
  }
}

}  // namespace vt::cpu::matmul
