// Inline AVX-512 helpers for the *_avx512.cpp kernels: 16-lane f32 loads and stores
// of f32 / bf16 / f16 rows (masked variants for row tails), a horizontal sum, and
// exp / sigmoid / silu accurate to a few ulp. Include only from *_avx512.cpp files
// (the only translation units compiled with AVX-512 enabled).
//
// Conversions match the scalar ones in vt/dtype.h bit for bit: bf16 stores round to
// nearest even and keep NaN quiet; f16 stores round to nearest even.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "vt/dtype.h"

namespace vt::cpu::avx512 {

inline constexpr int kLanes = 16;

// Lanes [0, remaining) of a 16-lane vector (all lanes when remaining >= 16).
inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1u);
}

inline __m512 Bf16BitsToF32(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// f32 -> bf16 bits, round to nearest even, NaN stays a quiet NaN (as vt::F32ToBf16).
inline __m256i F32ToBf16Bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

inline __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 Load(const BFloat16* p) { return Bf16BitsToF32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 Load(const Float16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

inline __m512 LoadMasked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 LoadMasked(const BFloat16* p, __mmask16 m) { return Bf16BitsToF32(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 LoadMasked(const Float16* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

inline void StoreMasked(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
inline void StoreMasked(BFloat16* p, __m512 v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, F32ToBf16Bits(v)); }
inline void StoreMasked(Float16* p, __m512 v, __mmask16 m) {
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline float ReduceAdd(__m512 v) { return _mm512_reduce_add_ps(v); }

// e^x. Range reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n*ln2_hi
// is exact), e^r by its Taylor series to degree 7 (truncation < 1e-8 relative), then
// scaled by 2^n with vscalefps, which also gives 0 for large negative x and inf for
// large positive x. NaN propagates (the clamps keep a NaN second operand).
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606820309417e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// 1 / (1 + e^-x)
inline __m512 Sigmoid(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// x / (1 + e^-x)
inline __m512 Silu(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(x, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

}  // namespace vt::cpu::avx512
