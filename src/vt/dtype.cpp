#include "vt/dtype.h"

#include <stdexcept>

namespace vt {
namespace {

// Block layouts follow ggml's: Q4_0 / Q8_0 hold 32 values with one f16 scale;
// the K-quants hold 256 values in super-blocks.
constexpr DTypeInfo kInfos[kNumDTypes] = {
    {"f32", 1, 4, true, false},     {"f16", 1, 2, true, false},    {"bf16", 1, 2, true, false},
    {"i32", 1, 4, false, false},    {"i64", 1, 8, false, false},   {"q4_0", 32, 18, false, true},
    {"q8_0", 32, 34, false, true},  {"q4_k", 256, 144, false, true}, {"q5_k", 256, 176, false, true},
    {"q6_k", 256, 210, false, true}, {"q8_k", 256, 292, false, true},
};

}  // namespace

const DTypeInfo& Info(DType dtype) {
  auto i = static_cast<int>(dtype);
  if (i < 0 || i >= kNumDTypes) throw std::invalid_argument("vt: invalid dtype value " + std::to_string(i));
  return kInfos[i];
}

DType ParseDType(const std::string& name) {
  if (name == "float32" || name == "float") return DType::kF32;
  if (name == "float16" || name == "half") return DType::kF16;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "int32") return DType::kI32;
  if (name == "int64") return DType::kI64;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == kInfos[i].name) return static_cast<DType>(i);
  }
  throw std::invalid_argument("vt: unknown dtype name '" + name +
                              "' (expected f32, f16, bf16, i32, i64, q4_0, q8_0, q4_k, q5_k, q6_k or q8_k)");
}

int64_t BytesFor(DType dtype, int64_t num_elems) {
  const DTypeInfo& info = Info(dtype);
  if (num_elems % info.block_elems != 0) {
    throw std::invalid_argument(std::string("vt: ") + std::to_string(num_elems) + " elements of " + info.name +
                                " are not a whole number of " + std::to_string(info.block_elems) +
                                "-element blocks");
  }
  return num_elems / info.block_elems * info.block_bytes;
}

float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int shift = 0;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        ++shift;
      }
      mant &= 0x3ffu;
      u = sign | static_cast<uint32_t>(127 - 15 + 1 - shift) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow (rounds to inf)
  if (abs < 0x38800000u) {  // result is subnormal or zero: 2^-14 > |f|
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 113 + 13 - e
    uint32_t half_m = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<uint16_t>(sign | half_m);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0x0fffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace vt
