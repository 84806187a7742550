// The K-quant formats (Q4_K, Q5_K, Q6_K) of vt/quant.h: row (de)quantization used
// by vt::DequantizeRow / vt::QuantizeRow, plus the scale fitting they share.
#pragma once

#include <cstdint>

namespace vt::quant {

inline constexpr int64_t kSuperBlock = 256;

// Integer q in [0, nmax] with x ~= scale * q - min, scale >= 0 and min >= 0 (so the
// grid always reaches 0 or below, like ggml's K-quants).
struct ScaleMin {
  float scale;
  float min;
};
// Least-squares search over several grids spanning [min(x, 0), max(x)].
ScaleMin FitScaleMin(const float* x, int n, int nmax);
// Signed scale s with x ~= s * q, q in [-32, 31] (Q6_K's sub-blocks).
float FitSymmetricScale(const float* x, int n);

void DequantizeQ4_K(const uint8_t* blocks, int64_t n, float* out);
void DequantizeQ5_K(const uint8_t* blocks, int64_t n, float* out);
void DequantizeQ6_K(const uint8_t* blocks, int64_t n, float* out);
void QuantizeQ4_K(const float* x, int64_t n, uint8_t* blocks);
void QuantizeQ5_K(const float* x, int64_t n, uint8_t* blocks);
void QuantizeQ6_K(const float* x, int64_t n, uint8_t* blocks);

}  // namespace vt::quant
