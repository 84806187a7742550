// Helpers shared by CPU kernels: element conversion and row addressing.
//
// Kernels compute in f32. Rows: a tensor [d0, ..., dn-2, D] is a list of
// d0*...*dn-2 rows of D elements; Rows maps a flat row index to the element offset
// of that row through the view's strides (so strided views work everywhere).
#pragma once

#include <cstdint>
#include <cstring>

#include "vt/dtype.h"
#include "vt/tensor.h"

namespace vt::cpu {

inline float LoadFloat(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kBF16: return Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16: return F16ToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    case DType::kI64: return static_cast<float>(static_cast<const int64_t*>(base)[i]);
    default: return 0.0f;  // block types are never addressed per element
  }
}

inline void StoreFloat(void* base, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(base)[i] = F32ToBf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(base)[i] = F32ToF16(v); break;
    case DType::kI32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    default: break;
  }
}

inline int64_t LoadIndex(const void* base, DType dtype, int64_t i) {
  return dtype == DType::kI64 ? static_cast<const int64_t*>(base)[i] : static_cast<const int32_t*>(base)[i];
}

// n contiguous elements of a float dtype -> f32, and back.
void LoadRow(const void* src, DType dtype, int64_t n, float* dst);
void StoreRow(const float* src, int64_t n, void* dst, DType dtype);

// Address of element offset `elems` (a multiple of the block size for block dtypes).
inline char* ElementAddress(void* base, DType dtype, int64_t elems) {
  return static_cast<char*>(base) + BytesFor(dtype, elems);
}

class Rows {
 public:
  explicit Rows(const Tensor& t) {
    num_dims_ = t.ndim() - 1;
    count_ = 1;
    for (int i = 0; i < num_dims_ && i < kMaxDims; ++i) {
      sizes_[i] = t.size(i);
      strides_[i] = t.stride(i);
      count_ *= sizes_[i];
    }
  }
  int64_t count() const { return count_; }
  // Element offset (relative to t.data()) of flat row r.
  int64_t Offset(int64_t r) const {
    int64_t offset = 0;
    for (int i = num_dims_ - 1; i >= 0; --i) {
      offset += (r % sizes_[i]) * strides_[i];
      r /= sizes_[i];
    }
    return offset;
  }

 private:
  static constexpr int kMaxDims = 8;
  int num_dims_ = 0;
  int64_t count_ = 1;
  int64_t sizes_[kMaxDims] = {};
  int64_t strides_[kMaxDims] = {};
};

}  // namespace vt::cpu
