// Decoding GGUF block formats inside GPU kernels, one value at a time.
//
// The layouts are ggml's (see include/vt/quant.h for the host reference):
//   Q4_0  [d f16][16 B: value j in the low nibble of byte j, value j+16 in the high]
//   Q8_0  [d f16][32 x int8]
//   Q4_K  [d f16][dmin f16][12 B packed 6-bit scales/mins of 8 sub-blocks][128 B nibbles]
//   Q5_K  as Q4_K with [32 B high bits] before the nibbles
//   Q6_K  [128 B low nibbles][64 B high 2-bit pairs][16 x int8 scales][d f16]
//   Q8_K  [d f32][256 x int8][16 x int16 sums]
// A value is decoded from its block without touching the rest of the row, so any
// thread can read any element; kernels that stream whole rows let neighbouring
// lanes read neighbouring values, which keeps the block bytes in cache.
#pragma once

#include <cstdint>

#include "gpu_compat.h"
#include "vt/dtype.h"

namespace vt::gpu {

__device__ inline uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Scale and min of sub-block `j` (0..7) from the 12 packed bytes of Q4_K / Q5_K.
__device__ inline void KQuantScaleMin(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: value i (0..255) of a super-block. Values come in 4 groups of 64;
// group g uses 32 bytes of nibbles (low nibbles for its first 32 values, high for
// the next 32) and sub-blocks 2g and 2g+1.
__device__ inline float DequantQ45K(const uint8_t* block, int i, bool five_bits) {
  const float d = HalfBitsToFloat(LoadU16(block));
  const float dmin = HalfBitsToFloat(LoadU16(block + 2));
  const uint8_t* packed = block + 4;
  const uint8_t* high = block + 16;
  const uint8_t* nibbles = block + (five_bits ? 48 : 16);
  const int group = i / 64, within = i % 64, l = within % 32, upper = within / 32;
  int scale, min;
  KQuantScaleMin(packed, 2 * group + upper, &scale, &min);
  int q = (nibbles[group * 32 + l] >> (4 * upper)) & 0x0f;
  if (five_bits) q += ((high[l] >> (2 * group + upper)) & 1) << 4;
  return d * scale * q - dmin * min;
}

// Q6_K: value i of a super-block. Two halves of 128; in a half, quarter qd of 32
// values takes low nibbles from ql[l + 32*(qd&1)] (shifted by 4 for qd >= 2) and
// two high bits from qh[l] >> (2*qd); scale index l/16 + 2*qd within the half.
__device__ inline float DequantQ6K(const uint8_t* block, int i) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = HalfBitsToFloat(LoadU16(block + 208));
  const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
  const int low = (ql[half * 64 + l + 32 * (quarter & 1)] >> (quarter >= 2 ? 4 : 0)) & 0x0f;
  const int high = (qh[half * 32 + l] >> (2 * quarter)) & 3;
  const int q = (low | (high << 4)) - 32;
  return d * scales[half * 8 + l / 16 + 2 * quarter] * q;
}

// Value `i` of a row of block dtype `dtype` starting at `row` (block-aligned).
__device__ inline float DequantElement(const uint8_t* row, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kQ8_0: {
      const uint8_t* block = row + (i / 32) * 34;
      return HalfBitsToFloat(LoadU16(block)) * static_cast<int8_t>(block[2 + i % 32]);
    }
    case DType::kQ4_0: {
      const uint8_t* block = row + (i / 32) * 18;
      const int j = static_cast<int>(i % 32);
      const int q = (block[2 + j % 16] >> (j < 16 ? 0 : 4)) & 0x0f;
      return HalfBitsToFloat(LoadU16(block)) * (q - 8);
    }
    case DType::kQ4_K: return DequantQ45K(row + (i / 256) * 144, static_cast<int>(i % 256), false);
    case DType::kQ5_K: return DequantQ45K(row + (i / 256) * 176, static_cast<int>(i % 256), true);
    case DType::kQ6_K: return DequantQ6K(row + (i / 256) * 210, static_cast<int>(i % 256));
    case DType::kQ8_K: {
      const uint8_t* block = row + (i / 256) * 292;
      float d;
      memcpy(&d, block, 4);
      return d * static_cast<int8_t>(block[4 + i % 256]);
    }
    default: return 0.0f;
  }
}

// Bytes from the start of a row to its element `elems` (a multiple of the block size
// for block dtypes): what vt::BytesFor computes on the host.
__host__ __device__ inline int64_t ElementBytes(int64_t elems, int64_t block_elems, int64_t block_bytes) {
  return elems / block_elems * block_bytes;
}

}  // namespace vt::gpu
