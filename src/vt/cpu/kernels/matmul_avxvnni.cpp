// MatMul, AVX2 + AVX-VNNI variant, block weights only: the integer tiles of
// matmul_int8_x86.h at 256 bits, as the AVX2 variant runs them, with the VEX-encoded
// vpdpbusd / vpdpwssd in place of maddubs + madd + add. maddubs saturates its int16
// pairs where vpdpbusd does not, but the tiles keep every pair within int16
// (matmul_avx2.cpp), so both compute the same sums. x is quantized by Avx2XRowOps.
#include <immintrin.h>

#include "matmul_int8_x86.h"

namespace vt::cpu::matmul {
namespace {

struct AvxVnniInt8 {
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
  static __m256i MaddI16(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
};

}  // namespace

void MatMulRowsAvx2Vnni(const Problem& p, int64_t n_begin, int64_t n_end) {
  RunInt8Tiles<AvxVnniInt8, Ymm16Int8Shape>(p, n_begin, n_end);
}

}  // namespace vt::cpu::matmul
