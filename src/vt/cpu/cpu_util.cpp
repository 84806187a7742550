#include "cpu_util.h"

namespace vt::cpu {

void LoadRow(const void* src, DType dtype, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(s[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = LoadFloat(src, dtype, i);
  }
}

void StoreRow(const float* src, int64_t n, void* dst, DType dtype) {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToBf16(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) StoreFloat(dst, dtype, i, src[i]);
  }
}

}  // namespace vt::cpu
