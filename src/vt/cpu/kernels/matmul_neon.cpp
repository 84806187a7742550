// MatMul rows of Q8_0 and Q4_0 weights on aarch64 with the dot-product extension
// (built only for aarch64, with -march=armv8.2-a+dotprod; chosen by matmul.cpp where
// HasNeonDotprod()). x comes as kQ8x32 (int8 q, f32 d and int32 sum(q) per 32
// values, PortableXRowOps): a 32-value block's dot is two sdot instructions of 16
// int8 pairs each, scaled by d_w d_x:
//   Q8_0  [d f16][32 x int8]                         sum d_w d_x (q_w . q_x)
//   Q4_0  [d f16][16 bytes: value i low nibble of byte i, i + 16 its high nibble],
//         w = d_w (n - 8)                            sum d_w d_x (n . q_x - 8 sum q_x)
// Each weight row is read once from memory; its blocks are then dotted with every x
// row from L1 (the GEMV and the GEMM alike: this first ARM kernel has no register
// tiles across weight rows). Speed on ARM has not been measured (the tests run under
// qemu, docs/reliability.md).
#include <arm_neon.h>

#include <cstring>
#include <string>

#include "matmul_kernels.h"
#include "vt/error.h"

namespace vt::cpu::matmul {
namespace {

float HalfAt(const char* p) {
  __fp16 h;
  std::memcpy(&h, p, sizeof h);
  return static_cast<float>(h);
}

// d_w d_x (w . x) of one x row over a weight row, both of `blocks` 32-value blocks.
template <DType kW>
float RowDot(const char* w, const int8_t* q, const float* d, const int32_t* sums, int64_t blocks) {
  constexpr int64_t kBlockBytes = kW == DType::kQ8_0 ? 34 : 18;
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const char* block = w + b * kBlockBytes;
    const int8x16_t x_lo = vld1q_s8(q + 32 * b), x_hi = vld1q_s8(q + 32 * b + 16);
    int32x4_t dot = vdupq_n_s32(0);
    float correction = 0.0f;
    if constexpr (kW == DType::kQ8_0) {
      dot = vdotq_s32(dot, vld1q_s8(reinterpret_cast<const int8_t*>(block + 2)), x_lo);
      dot = vdotq_s32(dot, vld1q_s8(reinterpret_cast<const int8_t*>(block + 18)), x_hi);
    } else {
      const uint8x16_t packed = vld1q_u8(reinterpret_cast<const uint8_t*>(block + 2));
      dot = vdotq_s32(dot, vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f))), x_lo);
      dot = vdotq_s32(dot, vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), x_hi);
      correction = 8.0f * static_cast<float>(sums[b]);
    }
    const float scale = HalfAt(block) * d[b];
    const float value = static_cast<float>(vaddvq_s32(dot)) - correction;
    acc += scale * value;
  }
  return acc;
}

template <DType kW>
void Rows(const Problem& p, int64_t n_begin, int64_t n_end) {
  const int64_t blocks = p.k / 32;
  for (int64_t n = n_begin; n < n_end; ++n) {
    const char* w = p.WeightRow(n);
    for (int64_t m = 0; m < p.m; ++m) {
      p.Store(m, n, RowDot<kW>(w, p.x.q + m * p.k, p.x.d + m * blocks, p.x.sums + m * blocks, blocks));
    }
  }
}

}  // namespace

void MatMulRowsNeonDotprod(const Problem& p, int64_t n_begin, int64_t n_end) {
  if (p.x.format != XFormat::kQ8x32) throw Error("vt::MatMul (cpu, neon_dotprod): internal error: x is not kQ8x32");
  switch (p.w_dtype) {
    case DType::kQ8_0: return Rows<DType::kQ8_0>(p, n_begin, n_end);
    case DType::kQ4_0: return Rows<DType::kQ4_0>(p, n_begin, n_end);
    default: break;
  }
  throw Error(std::string("vt::MatMul (cpu, neon_dotprod): internal error: weights ") + DTypeName(p.w_dtype) +
              " reached the Q8_0 / Q4_0 kernel");
}

}  // namespace vt::cpu::matmul
