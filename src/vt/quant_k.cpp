// Q4_K, Q5_K and Q6_K: ggml's K-quant super-blocks of 256 values (layouts in
// vt/quant.h). Quantization fits each sub-block's scale (and min) by least squares
// over several candidate grids, then quantizes the sub-block scales themselves
// (6-bit for Q4_K/Q5_K, 8-bit for Q6_K) against one f16 super-block scale, and
// finally re-rounds every value against the scales as they will be decoded.
#include "quant_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "vt/dtype.h"
#include "vt/quant.h"

namespace vt::quant {
namespace {

// Nearest integer in [lo, hi] (NaN -> lo). Clamping first keeps |v| < 2^22, where
// adding and subtracting 1.5 * 2^23 rounds to nearest without a libm call.
int RoundClamp(float v, int lo, int hi) {
  constexpr float kMagic = 12582912.0f;
  float clamped = v >= static_cast<float>(lo) ? v : static_cast<float>(lo);
  clamped = clamped <= static_cast<float>(hi) ? clamped : static_cast<float>(hi);
  return static_cast<int>((clamped + kMagic) - kMagic);
}

// Squared error of x against the grid scale * q - min, q = nearest in [0, nmax].
float GridError(const float* x, int n, int nmax, float scale, float min) {
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  float err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = RoundClamp((x[i] + min) * inv, 0, nmax);
    const float diff = scale * q - min - x[i];
    err += diff * diff;
  }
  return err;
}

// Least-squares (scale, offset) for x ~= scale * q + offset with the given q,
// constrained to offset <= 0 (min >= 0). Returns false if the fit is degenerate.
bool FitLine(const float* x, const int* q, int n, ScaleMin* fit) {
  double sq = 0, sqq = 0, sx = 0, sqx = 0;
  for (int i = 0; i < n; ++i) {
    sq += q[i];
    sqq += static_cast<double>(q[i]) * q[i];
    sx += x[i];
    sqx += static_cast<double>(q[i]) * x[i];
  }
  const double det = n * sqq - sq * sq;
  if (det <= 0) return false;
  double scale = (n * sqx - sq * sx) / det;
  double offset = (sx - scale * sq) / n;
  if (offset > 0) {  // the grid must reach zero: refit through the origin
    offset = 0;
    scale = sqx / sqq;
  }
  if (scale <= 0) return false;
  *fit = {static_cast<float>(scale), static_cast<float>(-offset)};
  return true;
}

// Q4_K / Q5_K share everything but the width of q (nmax 15 or 31): fills d, dmin,
// the packed 6-bit scales and the 256 integer q of one super-block.
void QuantizeScaleMinSuperBlock(const float* x, int nmax, uint16_t* d_f16, uint16_t* dmin_f16, uint8_t* scales,
                                int* q) {
  ScaleMin fits[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    fits[j] = FitScaleMin(x + 32 * j, 32, nmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  *d_f16 = F32ToF16(max_scale / 63);
  *dmin_f16 = F32ToF16(max_min / 63);
  const float d = F16ToF32(*d_f16), dmin = F16ToF32(*dmin_f16);
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int sc = d > 0 ? RoundClamp(fits[j].scale / d, 0, 63) : 0;
    const int m = dmin > 0 ? RoundClamp(fits[j].min / dmin, 0, 63) : 0;
    if (j < 4) {
      scales[j] |= static_cast<uint8_t>(sc);
      scales[j + 4] |= static_cast<uint8_t>(m);
    } else {
      scales[j + 4] = static_cast<uint8_t>((sc & 0x0f) | ((m & 0x0f) << 4));
      scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
    }
    const float step = d * sc, offset = dmin * m;
    for (int i = 0; i < 32; ++i) q[32 * j + i] = step > 0 ? RoundClamp((x[32 * j + i] + offset) / step, 0, nmax) : 0;
  }
}

// Decodes one Q4_K/Q5_K super-block given its 256 integer q.
void DecodeScaleMinSuperBlock(uint16_t d_f16, uint16_t dmin_f16, const uint8_t* scales, const int* q, float* out) {
  const float d = F16ToF32(d_f16), dmin = F16ToF32(dmin_f16);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackQ4KScaleMin(scales, j, &sc, &m);
    for (int i = 0; i < 32; ++i) out[32 * j + i] = d * sc * q[32 * j + i] - dmin * m;
  }
}

}  // namespace

ScaleMin FitScaleMin(const float* x, int n, int nmax) {
  float lo = 0, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) return {0.0f, -lo};  // constant (<= 0) values: the min alone is exact
  ScaleMin best = {(hi - lo) / nmax, -lo};
  float best_err = GridError(x, n, nmax, best.scale, best.min);
  int q[256];
  // Grids with slightly fewer or more steps across the range, each refit by least
  // squares: the widest value is not always worth an exact grid point.
  for (int step = -10; step <= 10; ++step) {
    const float inv = (nmax + 0.1f * step) / (hi - lo);
    for (int i = 0; i < n; ++i) q[i] = RoundClamp((x[i] - lo) * inv, 0, nmax);
    ScaleMin fit;
    if (!FitLine(x, q, n, &fit)) continue;
    const float err = GridError(x, n, nmax, fit.scale, fit.min);
    if (err < best_err) {
      best_err = err;
      best = fit;
    }
  }
  return best;
}

float FitSymmetricScale(const float* x, int n) {
  float extreme = 0;  // the value of largest magnitude, with its sign
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  if (extreme == 0) return 0.0f;
  auto error = [&](float s) {
    const float inv = 1.0f / s;
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = s * RoundClamp(x[i] * inv, -32, 31) - x[i];
      err += diff * diff;
    }
    return err;
  };
  // The extreme maps to -32 (the side with one more step), then least-squares refits
  // of grids around it.
  float best = extreme / -32.0f, best_err = error(best);
  for (int step = -10; step <= 10; ++step) {
    const float inv = -(32.0f + 0.1f * step) / extreme;
    float sqx = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = RoundClamp(x[i] * inv, -32, 31);
      sqx += q * x[i];
      sqq += static_cast<float>(q * q);
    }
    if (sqq <= 0 || sqx == 0) continue;
    const float s = sqx / sqq;
    const float err = error(s);
    if (err < best_err) {
      best_err = err;
      best = s;
    }
  }
  return best;
}

void DequantizeQ4_K(const uint8_t* blocks, int64_t n, float* out) {
  int q[256];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, out += kSuperBlock) {
    BlockQ4_K block;
    std::memcpy(&block, blocks + b * sizeof(BlockQ4_K), sizeof(block));
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        q[64 * g + l] = block.qs[32 * g + l] & 0x0f;
        q[64 * g + 32 + l] = block.qs[32 * g + l] >> 4;
      }
    }
    DecodeScaleMinSuperBlock(block.d, block.dmin, block.scales, q, out);
  }
}

void QuantizeQ4_K(const float* x, int64_t n, uint8_t* blocks) {
  int q[256];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ4_K block;
    QuantizeScaleMinSuperBlock(x, 15, &block.d, &block.dmin, block.scales, q);
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l)
        block.qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
    }
    std::memcpy(blocks + b * sizeof(BlockQ4_K), &block, sizeof(block));
  }
}

void DequantizeQ5_K(const uint8_t* blocks, int64_t n, float* out) {
  int q[256];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, out += kSuperBlock) {
    BlockQ5_K block;
    std::memcpy(&block, blocks + b * sizeof(BlockQ5_K), sizeof(block));
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        q[64 * g + l] = (block.qs[32 * g + l] & 0x0f) | (((block.qh[l] >> (2 * g)) & 1) << 4);
        q[64 * g + 32 + l] = (block.qs[32 * g + l] >> 4) | (((block.qh[l] >> (2 * g + 1)) & 1) << 4);
      }
    }
    DecodeScaleMinSuperBlock(block.d, block.dmin, block.scales, q, out);
  }
}

void QuantizeQ5_K(const float* x, int64_t n, uint8_t* blocks) {
  int q[256];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ5_K block;
    QuantizeScaleMinSuperBlock(x, 31, &block.d, &block.dmin, block.scales, q);
    std::memset(block.qh, 0, sizeof(block.qh));
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * g + l], hi = q[64 * g + 32 + l];
        block.qs[32 * g + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        block.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      }
    }
    std::memcpy(blocks + b * sizeof(BlockQ5_K), &block, sizeof(block));
  }
}

// Loops over (half, part, 16-value sub-block) so each inner loop has one scale and
// fixed shifts (and vectorises).
void DequantizeQ6_K(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, out += kSuperBlock) {
    BlockQ6_K block;
    std::memcpy(&block, blocks + b * sizeof(BlockQ6_K), sizeof(block));
    const float d = F16ToF32(block.d);
    for (int h = 0; h < 2; ++h) {
      for (int part = 0; part < 4; ++part) {
        const uint8_t* ql = block.ql + 64 * h + 32 * (part % 2);
        const uint8_t* qh = block.qh + 32 * h;
        const int low_shift = part < 2 ? 0 : 4, high_shift = 2 * part;
        for (int half16 = 0; half16 < 2; ++half16) {
          const float scale = d * block.scales[8 * h + 2 * part + half16];
          float* y = out + 128 * h + 32 * part + 16 * half16;
          for (int l = 16 * half16; l < 16 * half16 + 16; ++l) {
            const int q = ((ql[l] >> low_shift) & 0x0f) | (((qh[l] >> high_shift) & 3) << 4);
            y[l - 16 * half16] = scale * (q - 32);
          }
        }
      }
    }
  }
}

void QuantizeQ6_K(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ6_K block;
    float scales[16], max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitSymmetricScale(x + 16 * j, 16);
      max_abs = std::max(max_abs, std::fabs(scales[j]));
    }
    block.d = F32ToF16(max_abs / 127);
    const float d = F16ToF32(block.d);
    int q[256];
    for (int j = 0; j < 16; ++j) {
      block.scales[j] = static_cast<int8_t>(d > 0 ? RoundClamp(scales[j] / d, -127, 127) : 0);
      const float step = d * block.scales[j];
      for (int i = 0; i < 16; ++i) q[16 * j + i] = step != 0 ? RoundClamp(x[16 * j + i] / step, -32, 31) + 32 : 32;
    }
    std::memset(block.qh, 0, sizeof(block.qh));
    for (int h = 0; h < 2; ++h) {
      const int* qv = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        block.ql[64 * h + l] = static_cast<uint8_t>((qv[l] & 0x0f) | ((qv[l + 64] & 0x0f) << 4));
        block.ql[64 * h + l + 32] = static_cast<uint8_t>((qv[l + 32] & 0x0f) | ((qv[l + 96] & 0x0f) << 4));
        block.qh[32 * h + l] = static_cast<uint8_t>((qv[l] >> 4) | ((qv[l + 32] >> 4) << 2) | ((qv[l + 64] >> 4) << 4) |
                                                    ((qv[l + 96] >> 4) << 6));
      }
    }
    std::memcpy(blocks + b * sizeof(BlockQ6_K), &block, sizeof(block));
  }
}

}  // namespace vt::quant
