// MatMul's activations in the input format of the chosen variant (matmul_kernels.h):
// f32 rows, bf16 rows or AMX tiles, or 8-bit blocks with their scales and sums. Done once
// per call, in parallel over rows, before the weights are streamed.
#include <algorithm>
#include <cmath>

#include "../thread_pool.h"
#include "matmul_kernels.h"

namespace vt::cpu::matmul {
namespace {

// Round to nearest (even) for |v| < 2^22, without a libm call.
inline int RoundToInt(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return static_cast<int>((v + kMagic) - kMagic);
}

// One block of 8-bit activations: d = amax / 127, q = round(x / d) in [-127, 127].
// Returns sum(q).
int QuantizeBlock(const float* x, int n, int8_t* q, float* d) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  *d = amax / 127.0f;
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  int sum = 0;
  for (int i = 0; i < n; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(RoundToInt(x[i] * inv), -127, 127));
    sum += q[i];
  }
  return sum;
}

void QuantizeRowQ8x32(const float* x, int64_t k, int8_t* q, float* d, int32_t* sums) {
  for (int64_t b = 0; b < k / 32; ++b) sums[b] = QuantizeBlock(x + 32 * b, 32, q + 32 * b, d + b);
}

// Q8_K-like: one scale per 256 values, plus sums of each 16 q (for the K-quants' mins).
void QuantizeRowQ8x256(const float* x, int64_t k, int8_t* q, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < k / 256; ++b) {
    QuantizeBlock(x + 256 * b, 256, q + 256 * b, d + b);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[256 * b + 16 * g + i];
      bsums[16 * b + g] = static_cast<int16_t>(sum);
    }
  }
}

void RoundRowToBf16(const float* x, int64_t k, uint16_t* out) {
  for (int64_t i = 0; i < k; ++i) out[i] = F32ToBf16(x[i]);
}

// kBf16Tiles: rows rounded up to 16, K to 32 (matmul_kernels.h).
int64_t TileRows(int64_t m) { return (m + 15) / 16 * 16; }
int64_t TileK(int64_t k) { return (k + 31) / 32 * 32; }

// Row r of x as bf16 (ops.bf16) into its place in the kBf16Tiles layout of `tiles`:
// value 32 s + 2 p + t of row r at [r / 16][s][p][r % 16][t]. The padding stays zero.
void ScatterRowToTiles(const float* row, int64_t r, int64_t k, const XRowOps& ops, uint16_t* tiles) {
  thread_local std::vector<uint16_t> bf16;
  const int64_t k_padded = TileK(k), num_steps = k_padded / 32;
  bf16.assign(static_cast<size_t>(k_padded), 0);
  ops.bf16(row, k, bf16.data());
  uint16_t* block = tiles + (r / 16) * num_steps * 512 + (r % 16) * 2;
  for (int64_t s = 0; s < num_steps; ++s) {
    for (int64_t pair = 0; pair < 16; ++pair) {
      uint16_t* dst = block + s * 512 + pair * 32;
      dst[0] = bf16[static_cast<size_t>(32 * s + 2 * pair)];
      dst[1] = bf16[static_cast<size_t>(32 * s + 2 * pair + 1)];
    }
  }
}

void AllocateStorage(XFormat format, int64_t m, int64_t k, PreparedX* out) {
  const auto size = static_cast<size_t>(m * k);
  switch (format) {
    case XFormat::kF32: out->f32_storage.resize(size); break;
    case XFormat::kBf16: out->bf16_storage.resize(size); break;
    case XFormat::kBf16Tiles: out->bf16_storage.assign(static_cast<size_t>(TileRows(m) * TileK(k)), 0); break;
    case XFormat::kQ8x32:
      out->q_storage.resize(size);
      out->d_storage.resize(size / 32);
      out->sums_storage.resize(size / 32);
      break;
    case XFormat::kQ8x256:
      out->q_storage.resize(size);
      out->d_storage.resize(size / 256);
      out->bsums_storage.resize(size / 16);
      break;
  }
}

// Row r of x, already f32, into out's storage for `format` (allocated for m * k).
void PrepareRow(const float* row, int64_t r, int64_t k, XFormat format, const XRowOps& ops, PreparedX* out) {
  switch (format) {
    case XFormat::kF32: std::copy(row, row + k, out->f32_storage.data() + r * k); break;
    case XFormat::kBf16: ops.bf16(row, k, out->bf16_storage.data() + r * k); break;
    case XFormat::kBf16Tiles: ScatterRowToTiles(row, r, k, ops, out->bf16_storage.data()); break;
    case XFormat::kQ8x32:
      ops.q8x32(row, k, out->q_storage.data() + r * k, out->d_storage.data() + r * (k / 32),
                out->sums_storage.data() + r * (k / 32));
      break;
    case XFormat::kQ8x256:
      ops.q8x256(row, k, out->q_storage.data() + r * k, out->d_storage.data() + r * (k / 256),
                 out->bsums_storage.data() + r * (k / 16));
      break;
  }
}

}  // namespace

XRowOps PortableXRowOps() { return {QuantizeRowQ8x32, QuantizeRowQ8x256, RoundRowToBf16}; }

void PrepareX(const void* x, DType x_dtype, int64_t x_stride, int64_t m, int64_t k, XFormat format, const XRowOps& ops,
              PreparedX* out) {
  out->format = format;
  if (format == XFormat::kF32 && x_dtype == DType::kF32) {
    out->f32 = static_cast<const float*>(x);
    out->f32_stride = x_stride;
    return;
  }
  AllocateStorage(format, m, k, out);
  const auto* base = static_cast<const char*>(x);
  const int64_t row_bytes = BytesFor(x_dtype, x_stride);
  ParallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(k, 1)), [&](int64_t begin, int64_t end) {
    std::vector<float> converted(static_cast<size_t>(x_dtype == DType::kF32 ? 0 : k));
    for (int64_t r = begin; r < end; ++r) {
      const char* src = base + r * row_bytes;
      const float* row = reinterpret_cast<const float*>(src);  // f32 x is read in place
      if (x_dtype != DType::kF32) {
        LoadRow(src, x_dtype, k, converted.data());
        row = converted.data();
      }
      PrepareRow(row, r, k, format, ops, out);
    }
  });
  out->f32 = out->f32_storage.data();
  out->f32_stride = k;
  out->bf16 = out->bf16_storage.data();
  out->q = out->q_storage.data();
  out->d = out->d_storage.data();
  out->sums = out->sums_storage.data();
  out->bsums = out->bsums_storage.data();
}

}  // namespace vt::cpu::matmul
