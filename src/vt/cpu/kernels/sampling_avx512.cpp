// AVX-512 rows of LogSoftmax and Argmax (see row_kernels.h): the exponentials of a
// vocabulary-sized row by the polynomial in vec_avx512.h, 16 lanes at a time with
// 4 independent sums, instead of a libm call per element; argmax as a vector max
// followed by a search for its first occurrence.
#include "row_kernels.h"
#include "vec_avx512.h"

namespace vt::cpu {
namespace {

using namespace avx512;

// Lanes past n load as -inf: e^(-inf - shift) = 0 and they never win a max.
__m512 LoadOrMinusInf(const float* x, int64_t remaining) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), TailMask(remaining), x);
}

float SumExpShifted(const float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    for (int k = 0; k < 4; ++k) acc[k] = _mm512_add_ps(acc[k], Exp(_mm512_sub_ps(_mm512_loadu_ps(x + i + k * kLanes), s)));
  }
  for (; i < n; i += kLanes) acc[0] = _mm512_add_ps(acc[0], Exp(_mm512_sub_ps(LoadOrMinusInf(x + i, n - i), s)));
  return ReduceAdd(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

int64_t Argmax(const float* x, int64_t n) {
  __m512 best = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += kLanes) {
    const __m512 v = LoadOrMinusInf(x + i, n - i);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (nan != 0) return i + __builtin_ctz(nan);
    best = _mm512_max_ps(best, v);
  }
  const __m512 target = _mm512_set1_ps(_mm512_reduce_max_ps(best));
  for (int64_t i = 0; i < n; i += kLanes) {
    // Masked load: the row's tail may end at the last readable byte.
    const __mmask16 hit = _mm512_cmp_ps_mask(LoadOrMinusInf(x + i, n - i), target, _CMP_EQ_OQ) & TailMask(n - i);
    if (hit != 0) return i + __builtin_ctz(hit);
  }
  return 0;
}

constexpr SamplingRowKernels kRows = {&SumExpShifted, &Argmax};

}  // namespace

const SamplingRowKernels& SamplingRowsAvx512() { return kRows; }

}  // namespace vt::cpu
