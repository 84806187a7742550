// Per-row functions of the norm, activation and sampling kernels, one table per
// instruction set (and, for norms and activations, per activation dtype: f32,
// bf16, f16). norms.cpp, activations.cpp and sampling.cpp own the ops (row
// addressing, threads, weights); the tables do one contiguous row each:
//
//   norms.cpp / activations.cpp / sampling.cpp   portable C++ rows (any CPU)
//   *_avx2.cpp                                    8 lanes
//   *_avx512.cpp                                  16 lanes, masked tails
//
// Every row function reads its whole input before writing an element it has read,
// so `out` may be the same memory as an input where the op allows it. Weights are
// contiguous f32; the norm's weight offset (1 for zero-centred weights) is added
// in the row, as HF does in f32. All math is f32.
#pragma once

#include <cstdint>

#include "vt/dtype.h"

namespace vt::cpu {

struct NormRowKernels {
  // out = x * rsqrt(mean(x^2) + eps) * (w + w_offset)
  void (*rms_norm)(const void* x, const float* w, float w_offset, int64_t n, float eps, void* out);
  // residual = round(residual + x); out = residual * rsqrt(mean(residual^2) + eps) * (w + w_offset)
  void (*add_rms_norm)(const void* x, void* residual, const float* w, float w_offset, int64_t n, float eps,
                       void* out);
  // out = x * rsqrt(mean(x^2) + eps) * w * silu(z)
  void (*gated_rms_norm)(const void* x, const void* z, const float* w, int64_t n, float eps, void* out);
  // out = x * rsqrt(sum(x^2) + eps) * scale
  void (*l2_norm)(const void* x, int64_t n, float eps, float scale, void* out);
};

struct ActivationRowKernels {
  // out = silu(gate) * up
  void (*silu_mul)(const void* gate, const void* up, int64_t n, void* out);
  // out = x * sigmoid(gate), gate in x's dtype
  void (*sigmoid_mul)(const void* x, const void* gate, int64_t n, void* out);
  // out = x * sigmoid(gate), gate already f32
  void (*sigmoid_mul_f32_gate)(const void* x, const float* gate, int64_t n, void* out);
  // out = x * s
  void (*scale)(const void* x, float s, int64_t n, void* out);
};

// Rows of f32 logits (other dtypes are converted first).
struct SamplingRowKernels {
  // sum_i e^(x[i] - shift)
  float (*sum_exp_shifted)(const float* x, int64_t n, float shift);
  // The first index of the largest value; a NaN counts as larger than any number.
  int64_t (*argmax)(const float* x, int64_t n);
};

// dtype is f32, bf16 or f16.
const NormRowKernels& NormRowsPortable(DType dtype);
const NormRowKernels& NormRowsAvx2(DType dtype);
const NormRowKernels& NormRowsAvx512(DType dtype);
const ActivationRowKernels& ActivationRowsPortable(DType dtype);
const ActivationRowKernels& ActivationRowsAvx2(DType dtype);
const ActivationRowKernels& ActivationRowsAvx512(DType dtype);
const SamplingRowKernels& SamplingRowsPortable();
const SamplingRowKernels& SamplingRowsAvx2();
const SamplingRowKernels& SamplingRowsAvx512();

}  // namespace vt::cpu
