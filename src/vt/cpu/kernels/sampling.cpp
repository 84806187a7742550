// CPU kernels for the sampling helpers LogSoftmax and Argmax.
//
// LogSoftmax: x [rows..., V] (any float dtype, strided rows), out same shape f32;
// out = x - max - log(sum(exp(x - max))), all in f32. The sum runs over 16 partial
// sums so that a 250k-entry vocabulary keeps its accuracy. out may be the same view
// as an f32 x (each element is read before it is written).
//
// Argmax: x [R, V] float (strided rows), out [R] i32: the first index of the row's
// largest value; a NaN counts as larger than any number (as torch.argmax), so the
// first NaN wins if there is one.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "scalar_elems.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

float SumExpShifted(const float* x, int64_t n, float shift) {
  constexpr int kPartials = 16;
  float partial[kPartials] = {};
  int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials) {
    for (int j = 0; j < kPartials; ++j) partial[j] += std::exp(x[i + j] - shift);
  }
  for (; i < n; ++i) partial[0] += std::exp(x[i] - shift);
  float sum = 0;
  for (float p : partial) sum += p;
  return sum;
}

void LogSoftmaxRow(const float* x, int64_t n, float* out) {
  const float max_value = *std::max_element(x, x + n);
  const float log_norm = max_value + std::log(SumExpShifted(x, n, max_value));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] - log_norm;
}

void LogSoftmaxCpu(const LogSoftmaxArgs& a) {
  const int64_t n = a.x.size(-1);
  const DType dtype = a.x.dtype();
  const Rows x_rows(a.x), out_rows(a.out);
  ParallelFor(x_rows.count(), std::max<int64_t>(1, 16384 / n), [&](int64_t begin, int64_t end) {
    std::vector<float> converted(dtype == DType::kF32 ? 0 : static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const char* x = ElementAddress(a.x.data(), dtype, x_rows.Offset(r));
      float* out = a.out.data_ptr<float>() + out_rows.Offset(r);
      if (dtype == DType::kF32) {
        LogSoftmaxRow(reinterpret_cast<const float*>(x), n, out);
      } else {
        LoadRow(x, dtype, n, converted.data());
        LogSoftmaxRow(converted.data(), n, out);
      }
    }
  });
}

template <typename T>
int32_t ArgmaxRow(const T* x, int64_t n) {
  int32_t best = 0;
  float best_value = portable::ToF32(x[0]);
  if (std::isnan(best_value)) return 0;
  for (int64_t i = 1; i < n; ++i) {
    const float v = portable::ToF32(x[i]);
    if (std::isnan(v)) return static_cast<int32_t>(i);
    if (v > best_value) {
      best_value = v;
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

int32_t ArgmaxRow(const char* x, DType dtype, int64_t n) {
  switch (dtype) {
    case DType::kBF16: return ArgmaxRow(reinterpret_cast<const BFloat16*>(x), n);
    case DType::kF16: return ArgmaxRow(reinterpret_cast<const Float16*>(x), n);
    default: return ArgmaxRow(reinterpret_cast<const float*>(x), n);
  }
}

void ArgmaxCpu(const ArgmaxArgs& a) {
  const int64_t rows = a.x.size(0), n = a.x.size(1);
  int32_t* out = a.out.data_ptr<int32_t>();
  ParallelFor(rows, std::max<int64_t>(1, 65536 / n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      out[r] = ArgmaxRow(ElementAddress(a.x.data(), a.x.dtype(), r * a.x.stride(0)), a.x.dtype(), n);
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(LogSoftmax, kCPU, LogSoftmaxCpu);
VT_REGISTER_KERNEL(Argmax, kCPU, ArgmaxCpu);

}  // namespace vt::cpu
