// GGUF block formats on the host: ggml's block layouts and the reference
// (de)quantization of one row.
//
// Layouts follow ggml byte for byte (so files round-trip with llama.cpp); all
// multi-byte fields are little-endian, f16 is IEEE half. Per block:
//   Q4_0 (32 values, 18 B):  f16 d | 16 B q. Byte j holds value j (low nibble) and
//                             value j + 16 (high nibble); x = d * (q - 8).
//   Q8_0 (32 values, 34 B):  f16 d | 32 int8 q; x = d * q.
//   Q4_K (256 values, 144 B): f16 d | f16 dmin | 12 B scales | 128 B qs.
//       8 sub-blocks of 32 with 6-bit scale sc[j] and 6-bit min m[j] packed in the 12
//       bytes (see UnpackQ4KScaleMin); x = d * sc[j] * q - dmin * m[j], q in [0, 15].
//       qs: each 32-byte group g holds sub-block 2g in its low nibbles and sub-block
//       2g + 1 in its high nibbles (value 64g + l is qs[32g + l] & 15, value
//       64g + 32 + l is qs[32g + l] >> 4).
//   Q5_K (256 values, 176 B): f16 d | f16 dmin | 12 B scales | 32 B qh | 128 B qs.
//       As Q4_K with a fifth bit: value 64g + l adds 16 * bit 2g of qh[l], value
//       64g + 32 + l adds 16 * bit 2g + 1 of qh[l]; q in [0, 31].
//   Q6_K (256 values, 210 B): 128 B ql | 64 B qh | 16 int8 scales | f16 d.
//       16 sub-blocks of 16; value i uses scales[i / 16]; x = d * scale * (q - 32),
//       q in [0, 63]. In each half h (128 values, ql + 64h, qh + 32h), for l < 32:
//         value 128h + l      = ql[l] & 15      | ((qh[l] >> 0) & 3) << 4
//         value 128h + l + 32 = ql[l + 32] & 15 | ((qh[l] >> 2) & 3) << 4
//         value 128h + l + 64 = ql[l] >> 4      | ((qh[l] >> 4) & 3) << 4
//         value 128h + l + 96 = ql[l + 32] >> 4 | ((qh[l] >> 6) & 3) << 4
//   Q8_K (256 values, 292 B): f32 d | 256 int8 q | 16 int16 sums of 16 consecutive q;
//       x = d * q. The activation format of ggml's K-quant dot products.
// `n` is the row length in values and must be a multiple of the block size.
#pragma once

#include <cstdint>

#include "vt/dtype.h"

namespace vt {

struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[32];
};
struct BlockQ4_K {
  uint16_t d, dmin;  // f16
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;  // f16
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // f16
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// Sub-block j (0..7) of a Q4_K / Q5_K block: its 6-bit scale and min from the 12
// packed bytes. Sub-blocks 0-3 keep scale and min in the low 6 bits of bytes j and
// j + 4; sub-blocks 4-7 keep their low 4 bits in the nibbles of byte j + 4 (scale
// low, min high) and their top 2 bits in the top bits of bytes j - 4 (scale) and j
// (min).
inline void UnpackQ4KScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

void DequantizeRow(const void* blocks, DType dtype, int64_t n, float* out);
// Chooses per block the scales (and mins) that minimise the squared error of the
// row, searching around the plain range-based choice; not bit-identical to ggml's
// quantizer, but decoded identically by both.
void QuantizeRow(const float* values, int64_t n, void* blocks, DType dtype);

}  // namespace vt
