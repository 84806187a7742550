// AVX2 rows of RmsNorm, AddRmsNorm, GatedRmsNorm and L2Norm (see row_kernels.h).
//
// Each row is two passes over at most a few KB (L1-resident): a sum of squares
// with two 8-lane accumulators, then the scaled store; bf16/f16 convert in
// registers. The last n % 8 elements take the scalar path.
#include <cmath>

#include "row_kernels.h"
#include "vec_avx2.h"

namespace vt::cpu {
namespace {

using namespace avx2;

float SiluScalar(float v) { return v / (1.0f + std::exp(-v)); }

template <typename T>
__m256 RoundTo(__m256 v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(F32ToBf16Bits(v)), 16));
  } else if constexpr (std::is_same_v<T, Float16>) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    return v;
  }
}

template <typename T>
float SumSquares(const T* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256 a = Load(x + i), b = Load(x + i + kLanes);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 a = Load(x + i);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
  }
  float sum = ReduceAdd(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += ToF32(x[i]) * ToF32(x[i]);
  return sum;
}

// out = x * s * (w + w_offset)
template <typename T>
void ScaleByWeight(const T* x, float s, const float* w, float w_offset, int64_t n, T* out) {
  const __m256 vs = _mm256_set1_ps(s), offset = _mm256_set1_ps(w_offset);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Store(out + i, _mm256_mul_ps(_mm256_mul_ps(Load(x + i), vs), _mm256_add_ps(Load(w + i), offset)));
  }
  for (; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * s * (w[i] + w_offset));
}

template <typename T>
void RmsNormRow(const void* xv, const float* w, float w_offset, int64_t n, float eps, void* outv) {
  const T* x = static_cast<const T*>(xv);
  const float s = 1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps);
  ScaleByWeight(x, s, w, w_offset, n, static_cast<T*>(outv));
}

template <typename T>
void AddRmsNormRow(const void* xv, void* residual_v, const float* w, float w_offset, int64_t n, float eps,
                   void* outv) {
  const T* x = static_cast<const T*>(xv);
  T* residual = static_cast<T*>(residual_v);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    // The sum is rounded to the activation dtype first: the norm reads what is stored.
    const __m256 r = RoundTo<T>(_mm256_add_ps(Load(residual + i), Load(x + i)));
    Store(residual + i, r);
    acc = _mm256_fmadd_ps(r, r, acc);
  }
  float sum = ReduceAdd(acc);
  for (; i < n; ++i) {
    residual[i] = FromF32<T>(ToF32(residual[i]) + ToF32(x[i]));
    sum += ToF32(residual[i]) * ToF32(residual[i]);
  }
  const float s = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  ScaleByWeight(residual, s, w, w_offset, n, static_cast<T*>(outv));
}

template <typename T>
void GatedRmsNormRow(const void* xv, const void* zv, const float* w, int64_t n, float eps, void* outv) {
  const T* x = static_cast<const T*>(xv);
  const T* z = static_cast<const T*>(zv);
  T* out = static_cast<T*>(outv);
  const float s = 1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps);
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 normed = _mm256_mul_ps(_mm256_mul_ps(Load(x + i), vs), Load(w + i));
    Store(out + i, _mm256_mul_ps(normed, Silu(Load(z + i))));
  }
  for (; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * s * w[i] * SiluScalar(ToF32(z[i])));
}

template <typename T>
void L2NormRow(const void* xv, int64_t n, float eps, float scale, void* outv) {
  const T* x = static_cast<const T*>(xv);
  T* out = static_cast<T*>(outv);
  const float r = 1.0f / std::sqrt(SumSquares(x, n) + eps);
  const __m256 vr = _mm256_set1_ps(r), vscale = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(out + i, _mm256_mul_ps(_mm256_mul_ps(Load(x + i), vr), vscale));
  for (; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * r * scale);
}

template <typename T>
constexpr NormRowKernels kRows = {&RmsNormRow<T>, &AddRmsNormRow<T>, &GatedRmsNormRow<T>, &L2NormRow<T>};

}  // namespace

const NormRowKernels& NormRowsAvx2(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kRows<BFloat16>;
    case DType::kF16: return kRows<Float16>;
    default: return kRows<float>;
  }
}

}  // namespace vt::cpu
