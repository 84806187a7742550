// Element and block storage types of vt tensors.
//
// Float and integer types hold one value per element. GGUF block types (Q4_0 ...
// Q8_K) hold `block_elems` values in `block_bytes` bytes; a tensor of a block type
// must have whole blocks along its innermost (contiguous) dimension, so every byte
// address is computed from an element offset that is a multiple of block_elems.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace vt {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI32,
  kI64,
  kQ4_0,
  kQ8_0,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ8_K,
};
inline constexpr int kNumDTypes = 11;

struct DTypeInfo {
  const char* name;     // "f32", "bf16", "q8_0", ...
  int64_t block_elems;  // 1 for plain types
  int64_t block_bytes;  // bytes per block (= element size for plain types)
  bool is_float;        // f32 / f16 / bf16
  bool is_quantized;    // a GGUF block type
};

const DTypeInfo& Info(DType dtype);
inline const char* DTypeName(DType dtype) { return Info(dtype).name; }
inline bool IsQuantized(DType dtype) { return Info(dtype).is_quantized; }
inline bool IsFloat(DType dtype) { return Info(dtype).is_float; }
inline bool IsInteger(DType dtype) { return dtype == DType::kI32 || dtype == DType::kI64; }

// Parses "f32", "float32", "bf16", "bfloat16", "q8_0", ... Throws on unknown names.
DType ParseDType(const std::string& name);

// Bytes occupied by `num_elems` consecutive elements. Throws if num_elems is not a
// whole number of blocks.
int64_t BytesFor(DType dtype, int64_t num_elems);

// ---- 16-bit float conversions (scalar; kernels have vector versions) ----------

struct BFloat16 {
  uint16_t bits;
};
struct Float16 {
  uint16_t bits;
};

inline float Bf16ToF32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float f);  // round to nearest even, overflow to inf

}  // namespace vt
