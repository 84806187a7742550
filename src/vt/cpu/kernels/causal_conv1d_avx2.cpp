// AVX2 token row of CausalConv1d / CausalConv1dUpdate (see causal_conv1d.cpp): 8
// channels per step, K FMAs and a vector SiLU (exp 8 lanes at a time, the bulk of
// the arithmetic); the last n % 8 channels take the scalar path.
#include <cmath>

#include "gdn_kernels.h"
#include "vec_avx2.h"

namespace vt::cpu::gdn {
namespace {

template <typename T>
void ConvTokenRow(const ConvTokenArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const int64_t history = a.kernel - 1;
  int64_t c = 0;
  for (; c + avx2::kLanes <= a.n; c += avx2::kLanes) {
    const __m256 xv = avx2::Load(x + c);
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a.weights[history] + c), xv);
    for (int64_t j = 0; j < history; ++j) {
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(a.weights[j] + c), _mm256_loadu_ps(a.window[j] + c), acc);
    }
    _mm256_storeu_ps(a.newest + c, xv);
    avx2::Store(out + c, a.silu ? avx2::Silu(acc) : acc);
  }
  for (; c < a.n; ++c) {
    const float xc = avx2::ToF32(x[c]);
    float acc = a.weights[history][c] * xc;
    for (int64_t j = 0; j < history; ++j) acc += a.weights[j][c] * a.window[j][c];
    a.newest[c] = xc;
    out[c] = avx2::FromF32<T>(a.silu ? acc / (1.0f + std::exp(-acc)) : acc);
  }
}

}  // namespace

void ConvTokenAvx2(const ConvTokenArgs& a) {
  switch (a.dtype) {
    case DType::kBF16: ConvTokenRow<BFloat16>(a); break;
    case DType::kF16: ConvTokenRow<Float16>(a); break;
    default: ConvTokenRow<float>(a); break;
  }
}

}  // namespace vt::cpu::gdn
