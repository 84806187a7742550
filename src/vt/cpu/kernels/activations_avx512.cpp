// AVX-512 rows of SiluMul and SigmoidMul (see row_kernels.h): 16 lanes with masked
// tails, bf16/f16 converted in registers, exp by the polynomial in vec_avx512.h
// instead of a libm call per element.
#include "row_kernels.h"
#include "vec_avx512.h"

namespace vt::cpu {
namespace {

using namespace avx512;

template <typename T>
void SiluMulRow(const void* gate_v, const void* up_v, int64_t n, void* out_v) {
  const T* gate = static_cast<const T*>(gate_v);
  const T* up = static_cast<const T*>(up_v);
  T* out = static_cast<T*>(out_v);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    StoreMasked(out + i, _mm512_mul_ps(Silu(LoadMasked(gate + i, m)), LoadMasked(up + i, m)), m);
  }
}

template <typename T, typename G>
void SigmoidMulRow(const void* x_v, const void* gate_v, int64_t n, void* out_v) {
  const T* x = static_cast<const T*>(x_v);
  const G* gate = static_cast<const G*>(gate_v);
  T* out = static_cast<T*>(out_v);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    StoreMasked(out + i, _mm512_mul_ps(LoadMasked(x + i, m), Sigmoid(LoadMasked(gate + i, m))), m);
  }
}

template <typename T>
void SigmoidMulF32GateRow(const void* x, const float* gate, int64_t n, void* out) {
  SigmoidMulRow<T, float>(x, gate, n, out);
}

template <typename T>
void ScaleRow(const void* x_v, float s, int64_t n, void* out_v) {
  const T* x = static_cast<const T*>(x_v);
  T* out = static_cast<T*>(out_v);
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = TailMask(n - i);
    StoreMasked(out + i, _mm512_mul_ps(LoadMasked(x + i, m), vs), m);
  }
}

template <typename T>
constexpr ActivationRowKernels kRows = {&SiluMulRow<T>, &SigmoidMulRow<T, T>, &SigmoidMulF32GateRow<T>, &ScaleRow<T>};

}  // namespace

const ActivationRowKernels& ActivationRowsAvx512(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kRows<BFloat16>;
    case DType::kF16: return kRows<Float16>;
    default: return kRows<float>;
  }
}

}  // namespace vt::cpu
