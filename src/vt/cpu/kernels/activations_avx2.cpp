// AVX2 rows of SiluMul and SigmoidMul (see row_kernels.h): 8 lanes, bf16/f16
// converted in registers, exp by the polynomial in vec_avx2.h instead of a libm
// call per element; the last n % 8 elements take the scalar path.
#include <cmath>

#include "row_kernels.h"
#include "vec_avx2.h"

namespace vt::cpu {
namespace {

using namespace avx2;

float SigmoidScalar(float v) { return 1.0f / (1.0f + std::exp(-v)); }

template <typename T>
void SiluMulRow(const void* gate_v, const void* up_v, int64_t n, void* out_v) {
  const T* gate = static_cast<const T*>(gate_v);
  const T* up = static_cast<const T*>(up_v);
  T* out = static_cast<T*>(out_v);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(out + i, _mm256_mul_ps(Silu(Load(gate + i)), Load(up + i)));
  for (; i < n; ++i) {
    const float g = ToF32(gate[i]);
    out[i] = FromF32<T>(g / (1.0f + std::exp(-g)) * ToF32(up[i]));
  }
}

template <typename T, typename G>
void SigmoidMulRow(const void* x_v, const void* gate_v, int64_t n, void* out_v) {
  const T* x = static_cast<const T*>(x_v);
  const G* gate = static_cast<const G*>(gate_v);
  T* out = static_cast<T*>(out_v);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(out + i, _mm256_mul_ps(Load(x + i), Sigmoid(Load(gate + i))));
  for (; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * SigmoidScalar(ToF32(gate[i])));
}

template <typename T>
void SigmoidMulF32GateRow(const void* x, const float* gate, int64_t n, void* out) {
  SigmoidMulRow<T, float>(x, gate, n, out);
}

template <typename T>
void ScaleRow(const void* x_v, float s, int64_t n, void* out_v) {
  const T* x = static_cast<const T*>(x_v);
  T* out = static_cast<T*>(out_v);
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(out + i, _mm256_mul_ps(Load(x + i), vs));
  for (; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * s);
}

template <typename T>
constexpr ActivationRowKernels kRows = {&SiluMulRow<T>, &SigmoidMulRow<T, T>, &SigmoidMulF32GateRow<T>, &ScaleRow<T>};

}  // namespace

const ActivationRowKernels& ActivationRowsAvx2(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kRows<BFloat16>;
    case DType::kF16: return kRows<Float16>;
    default: return kRows<float>;
  }
}

}  // namespace vt::cpu
