// CPU kernel for RopeNeox: NeoX (rotate-half) rotary embedding, in place, on the
// first rotary_dim dims of every head.
//
// x [T, heads, D] (any strides, unit stride in the last dim), positions [T] i32/i64
// (any stride). With half = rotary_dim / 2 and i < half, dims i and i + half rotate:
//
//   x'[i]        = x[i] * cos(a_i) - x[i + half] * sin(a_i)
//   x'[i + half] = x[i + half] * cos(a_i) + x[i] * sin(a_i)
//   a_i = position * inv_freq[i],  inv_freq[i] = 1 / theta^(2i / rotary_dim)
//
// Dims [rotary_dim, D) pass through. The angles follow HF's order of f32 operations
// exactly (its _compute_default_rope_parameters and rotary forward): the exponent
// 2i / rotary_dim in f32, theta^exponent in f32, its f32 reciprocal, then the f32
// product with the position, then cos and sin in f32. At large positions the f32
// angle is what HF (and so the reference logits) use, so it is kept on purpose.
// cos/sin are computed once per token and shared by all its heads.
#include <cmath>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

std::vector<float> InverseFrequencies(int64_t rotary_dim, float theta) {
  std::vector<float> inv_freq(static_cast<size_t>(rotary_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    inv_freq[i] = 1.0f / std::pow(theta, exponent);
  }
  return inv_freq;
}

void RotateHead(char* head, DType dtype, int64_t half, const float* cos_a, const float* sin_a) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = LoadFloat(head, dtype, i), x2 = LoadFloat(head, dtype, i + half);
    StoreFloat(head, dtype, i, x1 * cos_a[i] - x2 * sin_a[i]);
    StoreFloat(head, dtype, i + half, x2 * cos_a[i] + x1 * sin_a[i]);
  }
}

void RopeNeoxCpu(const RopeNeoxArgs& a) {
  const DType dtype = a.x.dtype();
  const int64_t tokens = a.x.size(0), heads = a.x.size(1), half = a.rotary_dim / 2;
  const int64_t x_strides[2] = {a.x.stride(0), a.x.stride(1)}, elem = BytesFor(dtype, 1);
  char* x = static_cast<char*>(a.x.data());
  const void* positions = a.positions.data();
  const DType position_dtype = a.positions.dtype();
  const int64_t position_stride = a.positions.stride(0);
  const std::vector<float> inv_freq = InverseFrequencies(a.rotary_dim, a.theta);
  ParallelFor(tokens, std::max<int64_t>(1, 1024 / (heads * half)), [&](int64_t begin, int64_t end) {
    std::vector<float> cos_a(static_cast<size_t>(half)), sin_a(static_cast<size_t>(half));
    for (int64_t t = begin; t < end; ++t) {
      const float position = static_cast<float>(LoadIndex(positions, position_dtype, t * position_stride));
      for (int64_t i = 0; i < half; ++i) {
        const float angle = position * inv_freq[i];
        cos_a[i] = std::cos(angle);
        sin_a[i] = std::sin(angle);
      }
      for (int64_t h = 0; h < heads; ++h) {
        RotateHead(x + elem * (t * x_strides[0] + h * x_strides[1]), dtype, half, cos_a.data(), sin_a.data());
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(RopeNeox, kCPU, RopeNeoxCpu);

}  // namespace vt::cpu
