// CPU kernels for SiluMul and SigmoidMul.
//
// SiluMul: gate, up, out [rows..., I]; out = silu(gate) * up.
// SigmoidMul: x, out [rows..., D]; gate [rows..., D] (any float dtype) or
// [rows..., 1] (one gate per row, broadcast); out = x * sigmoid(gate).
// Rows may be strided (last dim contiguous); out may be the same view as an input
// where validation allows it, since every element is read before it is written.
// Rows are split across threads and computed by the row functions of the active
// instruction set (row_kernels.h): this file holds the portable rows, the
// *_avx2.cpp / *_avx512.cpp files vector ones with a polynomial exp. Math is f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../cpu_features.h"
#include "../cpu_util.h"
#include "../thread_pool.h"
#include "row_kernels.h"
#include "scalar_elems.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::cpu {
namespace {

using portable::FromF32;
using portable::ToF32;

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

template <typename T>
void SiluMulRow(const void* gate_v, const void* up_v, int64_t n, void* out_v) {
  const T* gate = static_cast<const T*>(gate_v);
  const T* up = static_cast<const T*>(up_v);
  T* out = static_cast<T*>(out_v);
  for (int64_t i = 0; i < n; ++i) {
    const float g = ToF32(gate[i]);
    out[i] = FromF32<T>(g / (1.0f + std::exp(-g)) * ToF32(up[i]));
  }
}

template <typename T, typename G>
void SigmoidMulRow(const void* x_v, const void* gate_v, int64_t n, void* out_v) {
  const T* x = static_cast<const T*>(x_v);
  const G* gate = static_cast<const G*>(gate_v);
  T* out = static_cast<T*>(out_v);
  for (int64_t i = 0; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * Sigmoid(ToF32(gate[i])));
}

template <typename T>
void SigmoidMulF32GateRow(const void* x, const float* gate, int64_t n, void* out) {
  SigmoidMulRow<T, float>(x, gate, n, out);
}

template <typename T>
void ScaleRow(const void* x_v, float s, int64_t n, void* out_v) {
  const T* x = static_cast<const T*>(x_v);
  T* out = static_cast<T*>(out_v);
  for (int64_t i = 0; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * s);
}

template <typename T>
constexpr ActivationRowKernels kPortableRows = {&SiluMulRow<T>, &SigmoidMulRow<T, T>, &SigmoidMulF32GateRow<T>,
                                                &ScaleRow<T>};

}  // namespace

const ActivationRowKernels& ActivationRowsPortable(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kPortableRows<BFloat16>;
    case DType::kF16: return kPortableRows<Float16>;
    default: return kPortableRows<float>;
  }
}

namespace {

// The row functions of the widest active ISA; counts "<kernel>.<isa>" in vt::reach.
const ActivationRowKernels& ActiveActivationRows(const char* kernel, DType dtype) {
  const Isa isa = ActiveIsa();
  reach::Hit(std::string(kernel) + "." + IsaName(isa));
  switch (isa) {
    case Isa::kAvx512: return ActivationRowsAvx512(dtype);
    case Isa::kAvx2: return ActivationRowsAvx2(dtype);
    default: return ActivationRowsPortable(dtype);
  }
}

char* RowAt(const Tensor& t, const Rows& rows, int64_t r) { return ElementAddress(t.data(), t.dtype(), rows.Offset(r)); }

int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, 16384 / d); }

void SiluMulCpu(const SiluMulArgs& a) {
  const ActivationRowKernels& rows_fn = ActiveActivationRows("SiluMulCpu", a.gate.dtype());
  const int64_t d = a.gate.size(-1);
  const Rows gate_rows(a.gate), up_rows(a.up), out_rows(a.out);
  ParallelFor(gate_rows.count(), RowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      rows_fn.silu_mul(RowAt(a.gate, gate_rows, r), RowAt(a.up, up_rows, r), d, RowAt(a.out, out_rows, r));
    }
  });
}

void SigmoidMulCpu(const SigmoidMulArgs& a) {
  const ActivationRowKernels& rows_fn = ActiveActivationRows("SigmoidMulCpu", a.x.dtype());
  const int64_t d = a.x.size(-1);
  const bool per_element = a.gate.size(-1) == d;
  const bool same_dtype = a.gate.dtype() == a.x.dtype();
  const Rows x_rows(a.x), gate_rows(a.gate), out_rows(a.out);
  ParallelFor(x_rows.count(), RowGrain(d), [&](int64_t begin, int64_t end) {
    std::vector<float> gate_f32(per_element && !same_dtype ? static_cast<size_t>(d) : 0);
    for (int64_t r = begin; r < end; ++r) {
      const char* x = RowAt(a.x, x_rows, r);
      const char* gate = RowAt(a.gate, gate_rows, r);
      char* out = RowAt(a.out, out_rows, r);
      if (!per_element) {
        rows_fn.scale(x, Sigmoid(LoadFloat(gate, a.gate.dtype(), 0)), d, out);
      } else if (same_dtype) {
        rows_fn.sigmoid_mul(x, gate, d, out);
      } else {
        LoadRow(gate, a.gate.dtype(), d, gate_f32.data());
        rows_fn.sigmoid_mul_f32_gate(x, gate_f32.data(), d, out);
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(SiluMul, kCPU, SiluMulCpu);
VT_REGISTER_KERNEL(SigmoidMul, kCPU, SigmoidMulCpu);

}  // namespace vt::cpu
