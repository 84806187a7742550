// GGUF block formats on the host: the reference (de)quantization of one row.
//
// Layouts follow ggml exactly (so files round-trip with llama.cpp):
//   Q4_0: 32 values, f16 scale d, 16 bytes of 4-bit q; x = d * (q - 8).
//   Q8_0: 32 values, f16 scale d, 32 int8 q; x = d * q.
//   Q4_K: 256 values, f16 d, f16 dmin, 12 bytes of packed 6-bit sub-block scales and
//         mins (8 sub-blocks of 32), 128 bytes of 4-bit q; x = d*sc*q - dmin*m.
//   Q5_K: as Q4_K plus 32 bytes of high bits (5-bit q).
//   Q6_K: 256 values, 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, f16 d;
//         x = d * scale * (q - 32).
//   Q8_K: 256 values, f32 d, 256 int8 q, 16 int16 block sums (activation format of
//         the K-quant dot products).
// `n` is the row length in values and must be a multiple of the block size.
#pragma once

#include <cstdint>

#include "vt/dtype.h"

namespace vt {

void DequantizeRow(const void* blocks, DType dtype, int64_t n, float* out);
void QuantizeRow(const float* values, int64_t n, void* blocks, DType dtype);

}  // namespace vt
