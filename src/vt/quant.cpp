// Reference (de)quantization of GGUF block formats, row by row (see vt/quant.h).
#include "vt/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "quant_k.h"
#include "vt/error.h"

namespace vt {
namespace {

constexpr int64_t kQ4_0Block = 32, kQ8_0Block = 32;

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

void DequantizeQ8_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b, blocks += 34) {
    const float d = F16ToF32(LoadU16(blocks));
    const auto* q = reinterpret_cast<const int8_t*>(blocks + 2);
    for (int i = 0; i < kQ8_0Block; ++i) out[b * kQ8_0Block + i] = d * q[i];
  }
}

void QuantizeQ8_0(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b, blocks += 34, x += kQ8_0Block) {
    float amax = 0;
    for (int i = 0; i < kQ8_0Block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    // Round against the f16 scale that decoding will use.
    const uint16_t d = F32ToF16(amax / 127.0f);
    const float id = F16ToF32(d) != 0 ? 1.0f / F16ToF32(d) : 0.0f;
    StoreU16(blocks, d);
    auto* q = reinterpret_cast<int8_t*>(blocks + 2);
    for (int i = 0; i < kQ8_0Block; ++i) {
      q[i] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lround(x[i] * id)), -127, 127));
    }
  }
}

// Q4_0: byte j holds value j (low nibble) and value j + 16 (high nibble).
void DequantizeQ4_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQ4_0Block; ++b, blocks += 18) {
    const float d = F16ToF32(LoadU16(blocks));
    const uint8_t* qs = blocks + 2;
    for (int j = 0; j < 16; ++j) {
      out[b * kQ4_0Block + j] = d * ((qs[j] & 0x0f) - 8);
      out[b * kQ4_0Block + j + 16] = d * ((qs[j] >> 4) - 8);
    }
  }
}

// Like ggml: the scale maps the value of largest magnitude to -8.
void QuantizeQ4_0(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / kQ4_0Block; ++b, blocks += 18, x += kQ4_0Block) {
    float amax = 0, max = 0;
    for (int i = 0; i < kQ4_0Block; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    StoreU16(blocks, F32ToF16(d));
    uint8_t* qs = blocks + 2;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Q8_K: f32 d = amax / 127, so q spans [-127, 127]; bsums are sums of 16 q.
void DequantizeQ8_K(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / quant::kSuperBlock; ++b, out += quant::kSuperBlock) {
    BlockQ8_K block;
    std::memcpy(&block, blocks + b * sizeof(BlockQ8_K), sizeof(block));
    for (int i = 0; i < quant::kSuperBlock; ++i) out[i] = block.d * block.qs[i];
  }
}

void QuantizeQ8_K(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / quant::kSuperBlock; ++b, x += quant::kSuperBlock) {
    BlockQ8_K block;
    float amax = 0;
    for (int i = 0; i < quant::kSuperBlock; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    block.d = amax / 127.0f;
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        block.qs[i] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lround(x[i] * id)), -127, 127));
        sum += block.qs[i];
      }
      block.bsums[j] = static_cast<int16_t>(sum);
    }
    std::memcpy(blocks + b * sizeof(BlockQ8_K), &block, sizeof(block));
  }
}

[[noreturn]] void NotABlockType(const char* function, DType dtype) {
  throw Error(std::string("vt::") + function + ": " + DTypeName(dtype) +
              " is not a GGUF block dtype (expected q4_0, q8_0, q4_k, q5_k, q6_k or q8_k)");
}

}  // namespace

void DequantizeRow(const void* blocks, DType dtype, int64_t n, float* out) {
  BytesFor(dtype, n);  // validates whole blocks
  const auto* p = static_cast<const uint8_t*>(blocks);
  switch (dtype) {
    case DType::kQ8_0: DequantizeQ8_0(p, n, out); return;
    case DType::kQ4_0: DequantizeQ4_0(p, n, out); return;
    case DType::kQ4_K: quant::DequantizeQ4_K(p, n, out); return;
    case DType::kQ5_K: quant::DequantizeQ5_K(p, n, out); return;
    case DType::kQ6_K: quant::DequantizeQ6_K(p, n, out); return;
    case DType::kQ8_K: DequantizeQ8_K(p, n, out); return;
    default: NotABlockType("DequantizeRow", dtype);
  }
}

void QuantizeRow(const float* values, int64_t n, void* blocks, DType dtype) {
  BytesFor(dtype, n);
  auto* p = static_cast<uint8_t*>(blocks);
  switch (dtype) {
    case DType::kQ8_0: QuantizeQ8_0(values, n, p); return;
    case DType::kQ4_0: QuantizeQ4_0(values, n, p); return;
    case DType::kQ4_K: quant::QuantizeQ4_K(values, n, p); return;
    case DType::kQ5_K: quant::QuantizeQ5_K(values, n, p); return;
    case DType::kQ6_K: quant::QuantizeQ6_K(values, n, p); return;
    case DType::kQ8_K: QuantizeQ8_K(values, n, p); return;
    default: NotABlockType("QuantizeRow", dtype);
  }
}

}  // namespace vt
