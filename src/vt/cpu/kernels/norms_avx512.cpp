// AVX-512 rows of RmsNorm, AddRmsNorm, GatedRmsNorm and L2Norm (see row_kernels.h).
//
// Each row is two passes over at most a few KB (L1-resident): a sum of squares
// with two 16-lane accumulators, then the scaled store. Row tails use masked loads
// and stores, so any width runs without a scalar loop. bf16/f16 convert in registers.
#include <cmath>

#include "row_kernels.h"
#include "vec_avx512.h"

namespace vt::cpu {
namespace {

using namespace avx512;

template <typename T>
__m512 RoundTo(__m512 v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return Bf16BitsToF32(F32ToBf16Bits(v));
  } else if constexpr (std::is_same_v<T, Float16>) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    return v;
  }
}

template <typename T>
float SumSquares(const T* x, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 a = Load(x + i), b = Load(x + i + kLanes);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += kLanes) {
    const __m512 a = LoadMasked(x + i, TailMask(n - i));
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  return ReduceAdd(_mm512_add_ps(acc0, acc1));
}

// out = x * s * (w + w_offset)
template <typename T>
void ScaleByWeight(const T* x, float s, const float* w, float w_offset, int64_t n, T* out) {
  const __m512 vs = _mm512_set1_ps(s), offset = _mm512_set1_ps(w_offset);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    const __m512 weight = _mm512_add_ps(LoadMasked(w + i, m), offset);
    StoreMasked(out + i, _mm512_mul_ps(_mm512_mul_ps(LoadMasked(x + i, m), vs), weight), m);
  }
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
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    // The sum is rounded to the activation dtype first: the norm reads what is stored.
    const __m512 r = RoundTo<T>(_mm512_add_ps(LoadMasked(residual + i, m), LoadMasked(x + i, m)));
    StoreMasked(residual + i, r, m);
    acc = _mm512_fmadd_ps(r, r, acc);
  }
  const float s = 1.0f / std::sqrt(ReduceAdd(acc) / static_cast<float>(n) + eps);
  ScaleByWeight(residual, s, w, w_offset, n, static_cast<T*>(outv));
}

template <typename T>
void GatedRmsNormRow(const void* xv, const void* zv, const float* w, int64_t n, float eps, void* outv) {
  const T* x = static_cast<const T*>(xv);
  const T* z = static_cast<const T*>(zv);
  T* out = static_cast<T*>(outv);
  const __m512 s = _mm512_set1_ps(1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps));
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    const __m512 normed = _mm512_mul_ps(_mm512_mul_ps(LoadMasked(x + i, m), s), LoadMasked(w + i, m));
    StoreMasked(out + i, _mm512_mul_ps(normed, Silu(LoadMasked(z + i, m))), m);
  }
}

template <typename T>
void L2NormRow(const void* xv, int64_t n, float eps, float scale, void* outv) {
  const T* x = static_cast<const T*>(xv);
  T* out = static_cast<T*>(outv);
  const __m512 r = _mm512_set1_ps(1.0f / std::sqrt(SumSquares(x, n) + eps));
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    StoreMasked(out + i, _mm512_mul_ps(_mm512_mul_ps(LoadMasked(x + i, m), r), vscale), m);
  }
}

template <typename T>
constexpr NormRowKernels kRows = {&RmsNormRow<T>, &AddRmsNormRow<T>, &GatedRmsNormRow<T>, &L2NormRow<T>};

}  // namespace

const NormRowKernels& NormRowsAvx512(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kRows<BFloat16>;
    case DType::kF16: return kRows<Float16>;
    default: return kRows<float>;
  }
}

}  // namespace vt::cpu
