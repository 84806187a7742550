// CPU kernels for RmsNorm, AddRmsNorm, GatedRmsNorm and L2Norm.
//
// Shapes (vt/op_args.h): x, z, residual, out [rows..., D] with any row strides and a
// contiguous last dim; weight [D] in any float dtype and any stride. Every row is
// independent: rows are split across threads, and one row is done by the row
// functions of the active instruction set (row_kernels.h): this file holds the
// portable rows, norms_avx2.cpp / norms_avx512.cpp the vector ones. Math is f32;
// a weight that is not contiguous f32 is converted once per call, and the weight
// offset is added in the row (1 + w for zero-centred weights, as HF computes it).
//
// The rows are memory-bound: the fast paths read each row once from memory (the
// second pass hits L1) and convert bf16/f16 in registers.
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

// Eight partial sums: a sequential f32 sum would lose accuracy over long rows.
template <typename T>
float SumSquares(const T* x, int64_t n) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += ToF32(x[i + j]) * ToF32(x[i + j]);
  }
  for (; i < n; ++i) partial[0] += ToF32(x[i]) * ToF32(x[i]);
  float sum = 0;
  for (float p : partial) sum += p;
  return sum;
}

template <typename T>
void RmsNormRow(const void* xv, const float* w, float w_offset, int64_t n, float eps, void* outv) {
  const T* x = static_cast<const T*>(xv);
  T* out = static_cast<T*>(outv);
  const float s = 1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * s * (w[i] + w_offset));
}

template <typename T>
void AddRmsNormRow(const void* xv, void* residual_v, const float* w, float w_offset, int64_t n, float eps,
                   void* outv) {
  const T* x = static_cast<const T*>(xv);
  T* residual = static_cast<T*>(residual_v);
  // Rounded to the activation dtype before the norm reads it, as HF's add does.
  for (int64_t i = 0; i < n; ++i) residual[i] = FromF32<T>(ToF32(residual[i]) + ToF32(x[i]));
  RmsNormRow<T>(residual, w, w_offset, n, eps, outv);
}

template <typename T>
void GatedRmsNormRow(const void* xv, const void* zv, const float* w, int64_t n, float eps, void* outv) {
  const T* x = static_cast<const T*>(xv);
  const T* z = static_cast<const T*>(zv);
  T* out = static_cast<T*>(outv);
  const float s = 1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float zi = ToF32(z[i]);
    out[i] = FromF32<T>(ToF32(x[i]) * s * w[i] * (zi / (1.0f + std::exp(-zi))));
  }
}

template <typename T>
void L2NormRow(const void* xv, int64_t n, float eps, float scale, void* outv) {
  const T* x = static_cast<const T*>(xv);
  T* out = static_cast<T*>(outv);
  const float r = 1.0f / std::sqrt(SumSquares(x, n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = FromF32<T>(ToF32(x[i]) * r * scale);
}

template <typename T>
constexpr NormRowKernels kPortableRows = {&RmsNormRow<T>, &AddRmsNormRow<T>, &GatedRmsNormRow<T>, &L2NormRow<T>};

}  // namespace

const NormRowKernels& NormRowsPortable(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kPortableRows<BFloat16>;
    case DType::kF16: return kPortableRows<Float16>;
    default: return kPortableRows<float>;
  }
}

namespace {

// The row functions of the widest active ISA; counts "<kernel>.<isa>" in vt::reach.
const NormRowKernels& ActiveNormRows(const char* kernel, DType dtype) {
  const Isa isa = ActiveIsa();
  reach::Hit(std::string(kernel) + "." + IsaName(isa));
  switch (isa) {
    case Isa::kAvx512: return NormRowsAvx512(dtype);
    case Isa::kAvx2: return NormRowsAvx2(dtype);
    default: return NormRowsPortable(dtype);
  }
}

// weight [D] as contiguous f32: the tensor's own memory when it already is that,
// else a converted copy in `storage`.
const float* WeightF32(const Tensor& weight, std::vector<float>& storage) {
  const int64_t n = weight.size(0), stride = weight.stride(0);
  if (weight.dtype() == DType::kF32 && (stride == 1 || n == 1)) return weight.data_ptr<float>();
  storage.resize(static_cast<size_t>(n));
  const void* data = weight.data();
  if (stride == 1) {
    LoadRow(data, weight.dtype(), n, storage.data());
  } else {
    for (int64_t i = 0; i < n; ++i) storage[i] = LoadFloat(data, weight.dtype(), i * stride);
  }
  return storage.data();
}

// Calls fn(row) for every row of a [rows..., D] op on the thread pool.
template <typename Fn>
void ForEachRow(int64_t num_rows, int64_t d, const Fn& fn) {
  ParallelFor(num_rows, std::max<int64_t>(1, 16384 / d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

// Address of flat row r of t.
char* RowAt(const Tensor& t, const Rows& rows, int64_t r) { return ElementAddress(t.data(), t.dtype(), rows.Offset(r)); }

void RmsNormCpu(const RmsNormArgs& a) {
  const NormRowKernels& rows_fn = ActiveNormRows("RmsNormCpu", a.x.dtype());
  std::vector<float> storage;
  const float* w = WeightF32(a.weight, storage);
  const int64_t d = a.x.size(-1);
  const Rows x_rows(a.x), out_rows(a.out);
  ForEachRow(x_rows.count(), d, [&](int64_t r) {
    rows_fn.rms_norm(RowAt(a.x, x_rows, r), w, a.weight_offset, d, a.eps, RowAt(a.out, out_rows, r));
  });
}

void AddRmsNormCpu(const AddRmsNormArgs& a) {
  const NormRowKernels& rows_fn = ActiveNormRows("AddRmsNormCpu", a.x.dtype());
  std::vector<float> storage;
  const float* w = WeightF32(a.weight, storage);
  const int64_t d = a.x.size(-1);
  const Rows x_rows(a.x), residual_rows(a.residual), out_rows(a.out);
  ForEachRow(x_rows.count(), d, [&](int64_t r) {
    rows_fn.add_rms_norm(RowAt(a.x, x_rows, r), RowAt(a.residual, residual_rows, r), w, a.weight_offset, d, a.eps,
                         RowAt(a.out, out_rows, r));
  });
}

void GatedRmsNormCpu(const GatedRmsNormArgs& a) {
  const NormRowKernels& rows_fn = ActiveNormRows("GatedRmsNormCpu", a.x.dtype());
  std::vector<float> storage;
  const float* w = WeightF32(a.weight, storage);
  const int64_t d = a.x.size(-1);
  const Rows x_rows(a.x), z_rows(a.z), out_rows(a.out);
  ForEachRow(x_rows.count(), d, [&](int64_t r) {
    rows_fn.gated_rms_norm(RowAt(a.x, x_rows, r), RowAt(a.z, z_rows, r), w, d, a.eps, RowAt(a.out, out_rows, r));
  });
}

void L2NormCpu(const L2NormArgs& a) {
  const NormRowKernels& rows_fn = ActiveNormRows("L2NormCpu", a.x.dtype());
  const int64_t d = a.x.size(-1);
  const Rows x_rows(a.x), out_rows(a.out);
  ForEachRow(x_rows.count(), d, [&](int64_t r) {
    rows_fn.l2_norm(RowAt(a.x, x_rows, r), d, a.eps, a.scale, RowAt(a.out, out_rows, r));
  });
}

}  // namespace

VT_REGISTER_KERNEL(RmsNorm, kCPU, RmsNormCpu);
VT_REGISTER_KERNEL(AddRmsNorm, kCPU, AddRmsNormCpu);
VT_REGISTER_KERNEL(GatedRmsNorm, kCPU, GatedRmsNormCpu);
VT_REGISTER_KERNEL(L2Norm, kCPU, L2NormCpu);

}  // namespace vt::cpu
