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

// Tile shapes fit the 16 ymm registers: RM x RN accumulators plus the operands.
constexpr int kFloatRows = 4, kFloatCols = 2;
struct Int8Shape {
  static constexpr int kBlock32Rows = 2, kBlock32Cols = 2, kKQuantRows = 2, kKQuantCols = 2;
};

}  // namespace

void MatMulRowsAvx2(const Problem& p, int64_t n_begin, int64_t n_end) {
  const bool gemv = p.m <= kGemvMaxRows;
  switch (p.w_dtype) {
    case DType::kF32: RunTiles<FloatTiles<F32Weights>, kFloatRows, kFloatCols>(p, n_begin, n_end); return;
    case DType::kF16:
      if (gemv)
        RunTiles<FloatTiles<F16Weights>, kFloatRows, kFloatCols>(p, n_begin, n_end);
      else
        RunConvertedPanels<F16Weights, F32Weights, kFloatRows, kFloatCols>(p, n_begin, n_end);
      return;
    case DType::kBF16:
      if (gemv)
        RunTiles<FloatTiles<Bf16Weights>, kFloatRows, kFloatCols>(p, n_begin, n_end);
      else
        RunConvertedPanels<Bf16Weights, F32Weights, kFloatRows, kFloatCols>(p, n_begin, n_end);
      return;
    default: RunInt8Tiles<Avx2Int8, Int8Shape>(p, n_begin, n_end); return;
  }
}

}  // namespace vt::cpu::matmul
