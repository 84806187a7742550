// Helpers for op contract tests: random inputs, strided views, the devices to
// run on, and comparison against a double-precision reference.
//
// Every op test computes its expected output with plain double arithmetic from the
// same inputs (read back as doubles), runs the op on every available device and,
// on CPU, at every instruction-set level the CPU has (so the portable path is
// exercised on any machine), and compares with a tolerance that depends on the
// dtype of the output.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "vt/ops.h"
#include "vt/tensor.h"

namespace vt::testing {

// cpu, plus cuda:0 / rocm:0 when their backend is loaded and a device exists.
std::vector<Device> TestDevices();
// TestDevices() without the CPU: the GPU tests skip themselves when it is empty.
std::vector<Device> GpuTestDevices();

// Runs `body` once per CPU instruction-set level available here (portable, avx2,
// avx512; avx2 with and without AVX-VNNI, avx512 with and without AMX where the CPU
// has them), restoring the limit afterwards; SCOPED_TRACE names the level.
void ForEachCpuIsa(const std::function<void()>& body);

// Runs `body(device)` for each test device; on the CPU once per ISA level.
void ForEachDeviceAndIsa(const std::function<void(Device)>& body);

// Uniform values in [lo, hi), rounded to `dtype`, contiguous, on `device`.
Tensor RandomTensor(const Shape& shape, DType dtype, Device device, std::mt19937& rng, float lo = -1.0f,
                    float hi = 1.0f);

// The same values as `t`, but in a buffer whose last dim is padded by `pad` elements
// (filled with NaN), so the result is a non-contiguous view with strided rows.
Tensor WithPaddedRows(const Tensor& t, int64_t pad);

// A view of `t` whose dims `dim0` and `dim1` are stored transposed (same values,
// non-contiguous layout).
Tensor WithTransposedStorage(const Tensor& t, int dim0, int dim1);

// Element values as doubles in row-major order of the view (any device/dtype).
std::vector<double> ToDoubles(const Tensor& t);
std::vector<int64_t> ToInts(const Tensor& t);

// out[m, n] = sum_k x[m, k] w[n, k] in double, from the values as stored: the
// MatMul reference (x [M, K], w [N, K], any dtype incl. quantized blocks).
std::vector<double> MatMulReference(const Tensor& x, const Tensor& w);

// Relative tolerance for results stored in `dtype` after f32 accumulation:
// f32 1e-5, bf16 1e-2 (8-bit mantissa: 2^-8 = 3.9e-3 per rounding, a few roundings),
// f16 2e-3 (11-bit mantissa).
double DefaultTolerance(DType dtype);

// Passes when max|got - ref| <= tol * max(1, max|ref|) elementwise-normed; reports
// the worst element, its index and both values.
::testing::AssertionResult AllClose(const std::vector<double>& ref, const Tensor& got, double tol);
::testing::AssertionResult AllClose(const std::vector<double>& ref, const std::vector<double>& got, double tol);

// Fills `t` with NaN (float dtypes) or -1 (integers) so unwritten outputs show up.
void Poison(const Tensor& t);

}  // namespace vt::testing
