// `Vec`: the f32 vector type of the translation unit that includes this header, for
// the Gated DeltaNet vector kernels (gdn_recurrent_vec.h, gdn_chunked_vec.h). Those
// kernels are written once against Vec and compiled twice: in *_avx2.cpp files Vec
// is 8 lanes of __m256, in *_avx512.cpp files 16 lanes of __m512.
//
// Include only from *_avx2.cpp / *_avx512.cpp. Everything here and in the kernel
// headers is in an anonymous namespace: each translation unit keeps its own copy, so
// the linker can never hand an AVX2 caller a copy compiled for AVX-512.
#pragma once

#include <immintrin.h>

#include <cstdint>

#if defined(__AVX512F__)
#include "vec_avx512.h"
#elif defined(__AVX2__)
#include "vec_avx2.h"
#else
#error "gdn_vec.h is for *_avx2.cpp and *_avx512.cpp translation units only"
#endif

namespace vt::cpu::gdn {
namespace {

#if defined(__AVX512F__)
struct Vec {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  // Micro-tile of the chunk products: 8 rows x 2 vectors = 16 of the 32 registers
  // accumulate, the rest hold B rows and broadcasts.
  static constexpr int kTileRows = 8;
  // Column strip of the recurrent kernel: 8 vectors (a whole row of 128 columns, read
  // front to back as the prefetchers like) x 3 live values = 24 registers.
  static constexpr int kRecurrentVecs = 8;

  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Set(float x) { return _mm512_set1_ps(x); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  // The first `lanes` lanes (0 < lanes <= kLanes); others read as 0 / are not written.
  static Reg LoadPartial(const float* p, int lanes) { return _mm512_maskz_loadu_ps(Mask(lanes), p); }
  static void StorePartial(float* p, Reg v, int lanes) { _mm512_mask_storeu_ps(p, Mask(lanes), v); }
  static Reg Add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg Sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
  static Reg Exp(Reg x) { return avx512::Exp(x); }

 private:
  static __mmask16 Mask(int lanes) { return static_cast<__mmask16>((1u << lanes) - 1u); }
};
#else
struct Vec {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  // Micro-tile of the chunk products: 6 rows x 2 vectors = 12 of the 16 registers
  // accumulate, 2 hold a B row, 1 a broadcast.
  static constexpr int kTileRows = 6;
  // Column strip of the recurrent kernel: 4 vectors (32 columns) x 3 live values = 12
  // registers.
  static constexpr int kRecurrentVecs = 4;

  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Set(float x) { return _mm256_set1_ps(x); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg LoadPartial(const float* p, int lanes) { return _mm256_maskload_ps(p, Mask(lanes)); }
  static void StorePartial(float* p, Reg v, int lanes) { _mm256_maskstore_ps(p, Mask(lanes), v); }
  static Reg Add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg Sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c
  static Reg Exp(Reg x) { return avx2::Exp(x); }

 private:
  // Lane i is on (sign bit set) when i < lanes.
  static __m256i Mask(int lanes) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};
#endif

}  // namespace
}  // namespace vt::cpu::gdn
