// AVX2 rows of LogSoftmax and Argmax (see row_kernels.h): the exponentials of a
// vocabulary-sized row by the polynomial in vec_avx2.h, 8 lanes at a time with 4
// independent sums, instead of a libm call per element; argmax as a vector max
// followed by a search for its first occurrence. Row tails run scalar.
#include <cmath>

#include "row_kernels.h"
#include "vec_avx2.h"

namespace vt::cpu {
namespace {

using namespace avx2;

float SumExpShifted(const float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i + k * kLanes), s)));
  }
  for (; i + kLanes <= n; i += kLanes) acc[0] = _mm256_add_ps(acc[0], Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
  float sum = ReduceAdd(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

int64_t Argmax(const float* x, int64_t n) {
  __m256 best = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const int nan = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    if (nan != 0) return i + __builtin_ctz(nan);
    best = _mm256_max_ps(best, v);
  }
  float lanes[kLanes];
  _mm256_storeu_ps(lanes, best);
  float max_value = lanes[0];
  for (float v : lanes) max_value = std::fmax(max_value, v);
  for (; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    max_value = std::fmax(max_value, x[i]);
  }
  const __m256 target = _mm256_set1_ps(max_value);
  for (i = 0; i + kLanes <= n; i += kLanes) {
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), target, _CMP_EQ_OQ));
    if (hit != 0) return i + __builtin_ctz(hit);
  }
  for (; i < n; ++i) {
    if (x[i] == max_value) return i;
  }
  return 0;
}

constexpr SamplingRowKernels kRows = {&SumExpShifted, &Argmax};

}  // namespace

const SamplingRowKernels& SamplingRowsAvx2() { return kRows; }

}  // namespace vt::cpu
