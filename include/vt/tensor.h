// Tensor: a view of device memory.
//
// A Tensor is (storage, element offset, shape, strides in elements, dtype). Views
// (Slice, Select, Transpose, AsStrided) share the storage and may be
// non-contiguous; every op either honours strides or refuses them with an error.
// Copying a Tensor copies the view, not the data.
//
// Block dtypes (Q8_0, Q4_K, ...): the innermost dimension must have stride 1 and a
// whole number of blocks; other strides and the offset must be multiples of the
// block size. Byte addresses are then vt::BytesFor(dtype, element offset).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vt/device.h"
#include "vt/dtype.h"

namespace vt {

using Shape = std::vector<int64_t>;

// A block of memory on one device. Frees itself through `deleter` (the device
// allocator, munmap for a mapped file, or nothing for borrowed memory).
class Storage {
 public:
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void(void*)> deleter_;
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised contiguous tensor from the device's allocator.
  static Tensor Empty(const Shape& shape, DType dtype, Device device = kCpu);
  static Tensor Zeros(const Shape& shape, DType dtype, Device device = kCpu);
  // Wraps memory owned elsewhere (an mmapped file, a caller's buffer) without
  // copying; `owner` is kept alive as long as any view exists.
  static Tensor FromExternal(void* data, const Shape& shape, DType dtype, Device device,
                             std::shared_ptr<void> owner);
  // A contiguous CPU tensor holding a copy of `values` (f32, i32 or i64 only).
  static Tensor FromVector(const std::vector<float>& values, const Shape& shape);
  static Tensor FromVector(const std::vector<int32_t>& values, const Shape& shape);
  static Tensor FromVector(const std::vector<int64_t>& values, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const;
  int ndim() const { return static_cast<int>(shape_.size()); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t size(int dim) const;    // dim < 0 counts from the end
  int64_t stride(int dim) const;  // in elements
  int64_t numel() const;
  int64_t offset() const { return offset_; }  // in elements, from the storage start
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Address of the first element of the view.
  void* data() const;
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(data());
  }

  bool is_contiguous() const;
  // Bytes spanned by the view's elements if it is contiguous.
  int64_t nbytes() const;

  // ---- views (share storage) ----
  Tensor Slice(int dim, int64_t start, int64_t end) const;  // [start, end) along dim
  Tensor Select(int dim, int64_t index) const;              // drops dim
  Tensor Transpose(int dim0, int dim1) const;
  Tensor Unsqueeze(int dim) const;
  // Same elements, new shape; requires a contiguous view (one dim may be -1).
  Tensor View(const Shape& shape) const;
  // Arbitrary view into the same storage; bounds-checked against the storage.
  Tensor AsStrided(const Shape& shape, const Shape& strides, int64_t offset) const;

  // ---- copies ----
  Tensor To(Device device) const;  // contiguous copy (same device: a clone)
  Tensor Contiguous() const;       // *this if already contiguous, else a copy
  // Copies `src` (same shape; any device; dtype cast through vt::Copy) into this view.
  void CopyFrom(const Tensor& src) const;

  // Host copy of a CPU/GPU tensor's elements as f32 (float dtypes) — tests and tools.
  std::vector<float> ToFloatVector() const;
  std::vector<int64_t> ToIntVector() const;

  // "bf16 [3, 4] strides [4, 1] on cuda:0"
  std::string Describe() const;

  // Whether two views can touch a common byte (conservative: compares spans).
  bool Overlaps(const Tensor& other) const;
  // Whether two views are the same elements in the same order (in-place use).
  bool SameView(const Tensor& other) const;

 private:
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, Shape strides, DType dtype);
  int WrapDim(int dim, int ndim_plus = 0) const;
  void CheckBlockLayout() const;
  // [lo, hi) byte range within the storage touched by the view.
  std::pair<int64_t, int64_t> ByteSpan() const;

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::kF32;
};

std::string ShapeToString(const Shape& shape);  // "[3, 4]"
Shape ContiguousStrides(const Shape& shape);
int64_t NumElements(const Shape& shape);

}  // namespace vt
