// Inline AVX2/FMA/F16C helpers for the *_avx2.cpp kernels: 8-lane f32 loads and
// stores of f32 / bf16 / f16 rows, a horizontal sum, and exp / sigmoid / silu
// accurate to a few ulp. Include only from *_avx2.cpp files (the only translation
// units compiled with AVX2 enabled). Row tails shorter than 8 are left to the
// caller's scalar code.
//
// Conversions match the scalar ones in vt/dtype.h bit for bit: bf16 stores round to
// nearest even and keep NaN quiet; f16 stores round to nearest even.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "vt/dtype.h"

namespace vt::cpu::avx2 {

inline constexpr int kLanes = 8;

// Scalar conversions for row tails. They live in this namespace, not in a header
// shared with baseline code: the linker may keep any one copy of an inline function,
// and a copy compiled here may contain AVX2 instructions.
inline float ToF32(float v) { return v; }
inline float ToF32(BFloat16 v) {
  const uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float ToF32(Float16 v) { return _cvtsh_ss(v.bits); }

template <typename T>
inline T FromF32(float v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40)};
    return BFloat16{static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
  } else if constexpr (std::is_same_v<T, Float16>) {
    return Float16{_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  } else {
    return v;
  }
}

inline __m256 Load(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load(const BFloat16* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
inline __m256 Load(const Float16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// f32 -> bf16 bits, round to nearest even, NaN stays a quiet NaN (as vt::F32ToBf16).
inline __m128i F32ToBf16Bits(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i bits = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
}

inline void Store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void Store(BFloat16* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), F32ToBf16Bits(v)); }
inline void Store(Float16* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline float ReduceAdd(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// e^x. Range reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n*ln2_hi
// is exact), e^r by its Taylor series to degree 7 (truncation < 1e-8 relative), then
// 2 * 2^(n-1) built in the exponent bits (so n = 128 still fits); below -86.6 the
// result is flushed to 0 (e^-86.6 = 2.4e-38), above 88.72 it is inf. NaN propagates
// (the clamps keep a NaN second operand).
inline __m256 Exp(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-86.6f), hi = _mm256_set1_ps(88.72f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  __m256 c = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), c);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606820309417e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i two_n_minus_1 =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
  __m256 result = _mm256_mul_ps(_mm256_add_ps(p, p), _mm256_castsi256_ps(two_n_minus_1));
  result = _mm256_andnot_ps(underflow, result);
  return _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_inff()), overflow);
}

// 1 / (1 + e^-x)
inline __m256 Sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// x / (1 + e^-x)
inline __m256 Silu(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(x, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

}  // namespace vt::cpu::avx2
