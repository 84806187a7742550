// MatMul, portable C++ variant (the reference the vector variants are checked
// against, and what CPUs without AVX2 run): out[M, N] = x[M, K] . w[N, K]^T over a
// range of weight rows, for every weight dtype.
//
// A panel of weight rows is converted (f16/bf16) or dequantized (block types,
// vt::DequantizeRow) to f32 once, then dotted with every f32 row of x, so the
// conversion cost is shared by all M rows. Eight partial sums per dot keep the FP
// dependency chains short (and let the compiler vectorise).
#include "../cpu_util.h"
#include "matmul_kernels.h"
#include "vt/quant.h"

namespace vt::cpu::matmul {
namespace {

constexpr int64_t kPanelRows = 8;

float DotF32(const float* a, const float* b, int64_t n) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += a[i + j] * b[i + j];
  }
  float sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float v : partial) sum += v;
  return sum;
}

void WeightRowToF32(const Problem& p, int64_t row, float* dst) {
  if (IsQuantized(p.w_dtype)) {
    DequantizeRow(p.WeightRow(row), p.w_dtype, p.k, dst);
  } else {
    LoadRow(p.WeightRow(row), p.w_dtype, p.k, dst);
  }
}

}  // namespace

void MatMulRowsPortable(const Problem& p, int64_t n_begin, int64_t n_end) {
  std::vector<float> panel(static_cast<size_t>(kPanelRows * p.k));  // [kPanelRows, K]
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanelRows) {
    const int64_t cols = std::min(kPanelRows, n_end - n0);
    for (int64_t c = 0; c < cols; ++c) WeightRowToF32(p, n0 + c, panel.data() + c * p.k);
    for (int64_t m = 0; m < p.m; ++m) {
      const float* x = p.x.f32 + m * p.x.f32_stride;
      for (int64_t c = 0; c < cols; ++c) p.Store(m, n0 + c, DotF32(x, panel.data() + c * p.k, p.k));
    }
  }
}

}  // namespace vt::cpu::matmul
