#include "vt/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "vt/error.h"
#include "vt/ops.h"

namespace vt {

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

Shape ContiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, Shape strides, DType dtype)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), strides_(std::move(strides)),
      dtype_(dtype) {
  for (int64_t d : shape_) {
    if (d < 0) throw Error("vt: negative dimension in shape " + ShapeToString(shape_));
  }
  CheckBlockLayout();
}

Tensor Tensor::Empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    if (d < 0) throw Error("vt: cannot allocate a tensor of shape " + ShapeToString(shape));
  }
  int64_t numel = NumElements(shape);
  if (!shape.empty() && numel > 0 && shape.back() % Info(dtype).block_elems != 0) {
    throw Error(std::string("vt: a ") + DTypeName(dtype) + " tensor needs whole blocks of " +
                std::to_string(Info(dtype).block_elems) + " in its last dim, got shape " + ShapeToString(shape));
  }
  size_t bytes = static_cast<size_t>(BytesFor(dtype, numel));
  DeviceBackend& backend = GetDeviceBackend(device.type);
  void* data = backend.Allocate(std::max<size_t>(bytes, 1), device.index);
  int index = device.index;
  auto storage = std::make_shared<Storage>(data, bytes, device, [&backend, index](void* p) { backend.Free(p, index); });
  return Tensor(std::move(storage), 0, shape, ContiguousStrides(shape), dtype);
}

Tensor Tensor::Zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = Empty(shape, dtype, device);
  if (t.numel() > 0) Fill({.dst = t, .value = 0.0});
  return t;
}

Tensor Tensor::FromExternal(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> owner) {
  size_t bytes = static_cast<size_t>(BytesFor(dtype, NumElements(shape)));
  auto storage = std::make_shared<Storage>(data, bytes, device, [owner](void*) mutable { owner.reset(); });
  return Tensor(std::move(storage), 0, shape, ContiguousStrides(shape), dtype);
}

namespace {
template <typename T>
Tensor FromHostValues(const std::vector<T>& values, const Shape& shape, DType dtype) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    throw Error("vt: FromVector got " + std::to_string(values.size()) + " values for shape " + ShapeToString(shape));
  }
  Tensor t = Tensor::Empty(shape, dtype, kCpu);
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}
}  // namespace

Tensor Tensor::FromVector(const std::vector<float>& v, const Shape& s) { return FromHostValues(v, s, DType::kF32); }
Tensor Tensor::FromVector(const std::vector<int32_t>& v, const Shape& s) { return FromHostValues(v, s, DType::kI32); }
Tensor Tensor::FromVector(const std::vector<int64_t>& v, const Shape& s) { return FromHostValues(v, s, DType::kI64); }

Device Tensor::device() const { return storage_ ? storage_->device() : kCpu; }

int Tensor::WrapDim(int dim, int ndim_plus) const {
  int n = ndim() + ndim_plus;
  int wrapped = dim < 0 ? dim + n : dim;
  if (wrapped < 0 || wrapped >= n) {
    throw Error("vt: dim " + std::to_string(dim) + " out of range for " + Describe());
  }
  return wrapped;
}

int64_t Tensor::size(int dim) const { return shape_[WrapDim(dim)]; }
int64_t Tensor::stride(int dim) const { return strides_[WrapDim(dim)]; }
int64_t Tensor::numel() const { return NumElements(shape_); }

void* Tensor::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + BytesFor(dtype_, offset_);
}

bool Tensor::is_contiguous() const { 
  int64_t expected = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

int64_t Tensor::nbytes() const { return BytesFor(dtype_, numel()); }

void Tensor::CheckBlockLayout() const {
  const int64_t block = Info(dtype_).block_elems;
  if (block == 1 || numel() == 0) return;
  bool ok = ndim() >= 1 && strides_.back() == 1 && shape_.back() % block == 0 && offset_ % block == 0;
  for (int i = 0; ok && i + 1 < ndim(); ++i) ok = shape_[i] == 1 || strides_[i] % block == 0;
  if (!ok) {
    throw Error(std::string("vt: a ") + DTypeName(dtype_) + " view must keep whole " + std::to_string(block) +
                "-element blocks in a contiguous last dim: " + Describe());
  }
}

std::pair<int64_t, int64_t> Tensor::ByteSpan() const {
  if (numel() == 0) return {0, 0};
  int64_t lo = offset_, hi = offset_;
  for (int i = 0; i < ndim(); ++i) {
    int64_t extent = (shape_[i] - 1) * strides_[i];
    (extent < 0 ? lo : hi) += extent;
  }
  const int64_t block = Info(dtype_).block_elems;
  // Round to whole blocks so block dtypes map to exact byte ranges.
  lo = lo / block * block;
  hi = (hi / block + 1) * block;
  return {BytesFor(dtype_, lo), BytesFor(dtype_, hi)};
}

Tensor Tensor::AsStrided(const Shape& shape, const Shape& strides, int64_t offset) const {
  if (shape.size() != strides.size()) {
    throw Error("vt: AsStrided shape " + ShapeToString(shape) + " and strides " + ShapeToString(strides) +
                " differ in rank");
  }
  Tensor view(storage_, offset, shape, strides, dtype_);
  auto [lo, hi] = view.ByteSpan();
  if (view.numel() > 0 && (offset < 0 || lo < 0 || hi > static_cast<int64_t>(storage_->nbytes()))) {
    throw Error("vt: view " + view.Describe() + " reaches outside its storage of " +
                std::to_string(storage_->nbytes()) + " bytes");
  }
  return view;
}

Tensor Tensor::Slice(int dim, int64_t start, int64_t end) const {
  int d = WrapDim(dim);
  if (start < 0 || end < start || end > shape_[d]) {
    throw Error("vt: slice [" + std::to_string(start) + ", " + std::to_string(end) + ") of dim " +
                std::to_string(dim) + " is out of range for " + Describe());
  }
  Shape shape = shape_;
  shape[d] = end - start;
  return AsStrided(shape, strides_, offset_ + start * strides_[d]);
}

Tensor Tensor::Select(int dim, int64_t index) const {
  int d = WrapDim(dim);
  if (index < 0 || index >= shape_[d]) {
    throw Error("vt: index " + std::to_string(index) + " is out of range for dim " + std::to_string(dim) + " of " +
                Describe());
  }
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return AsStrided(shape, strides, offset_ + index * strides_[d]);
}

Tensor Tensor::Transpose(int dim0, int dim1) const {
  int a = WrapDim(dim0), b = WrapDim(dim1);
  Shape shape = shape_, strides = strides_;
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return AsStrided(shape, strides, offset_);
}

Tensor Tensor::Unsqueeze(int dim) const {
  int d = WrapDim(dim, 1);
  Shape shape = shape_, strides = strides_;
  int64_t stride = d < ndim() ? shape_[d] * strides_[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return AsStrided(shape, strides, offset_);
}

Tensor Tensor::View(const Shape& requested) const {
  Shape shape = requested;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error("vt: View " + ShapeToString(requested) + " has more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0) shape[infer] = numel() / known;
  if (NumElements(shape) != numel()) {
    throw Error("vt: cannot view " + Describe() + " as " + ShapeToString(requested) + ": element counts differ");
  }
  if (!is_contiguous()) throw Error("vt: View needs a contiguous tensor, got " + Describe());
  return AsStrided(shape, ContiguousStrides(shape), offset_);
}

Tensor Tensor::To(Device device) const {
  Tensor out = Empty(shape_, dtype_, device);
  out.CopyFrom(*this);
  return out;
}

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  return To(device());
}

namespace {

// Moves raw bytes between any two devices (through the host between two GPUs).
void MoveBytes(void* dst, Device to, const void* src, Device from, size_t bytes) {
  if (from.type == DeviceType::kCPU && to.type == DeviceType::kCPU) {
    std::memcpy(dst, src, bytes);
  } else if (from.type == DeviceType::kCPU) {
    GetDeviceBackend(to.type).CopyHostToDevice(dst, src, bytes, to.index);
  } else if (to.type == DeviceType::kCPU) {
    GetDeviceBackend(from.type).CopyDeviceToHost(dst, src, bytes, from.index);
  } else if (from == to) {
    GetDeviceBackend(to.type).CopyDeviceToDevice(dst, src, bytes, to.index);
  } else {
    std::vector<char> host(bytes);
    GetDeviceBackend(from.type).CopyDeviceToHost(host.data(), src, bytes, from.index);
    GetDeviceBackend(to.type).CopyHostToDevice(dst, host.data(), bytes, to.index);
  }
}

// Block dtypes are never cast (the Copy op cannot write them), so equal-dtype
// views move as rows of whole blocks: one transfer when both are contiguous, else
// one per row (each row is contiguous by the block layout rule).
void CopyBlockRows(const Tensor& src, const Tensor& dst) {
  const DType dtype = dst.dtype();
  if (src.is_contiguous() && dst.is_contiguous()) {
    MoveBytes(dst.data(), dst.device(), src.data(), src.device(), static_cast<size_t>(dst.nbytes()));
    return;
  }
  const int64_t row_elems = dst.size(-1), rows = dst.numel() / row_elems;
  const size_t row_bytes = static_cast<size_t>(BytesFor(dtype, row_elems));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, src_offset = 0, dst_offset = 0;
    for (int d = dst.ndim() - 2; d >= 0; --d) {
      const int64_t i = rest % dst.size(d);
      rest /= dst.size(d);
      src_offset += i * src.stride(d);
      dst_offset += i * dst.stride(d);
    }
    MoveBytes(static_cast<char*>(dst.data()) + BytesFor(dtype, dst_offset), dst.device(),
              static_cast<const char*>(src.data()) + BytesFor(dtype, src_offset), src.device(), row_bytes);
  }
}

}  // namespace

void Tensor::CopyFrom(const Tensor& src) const {
  if (src.shape_ != shape_) {
    throw Error("vt: CopyFrom shape mismatch: destination " + Describe() + ", source " + src.Describe());
  }
  if (numel() == 0) return;
  if (IsQuantized(dtype_) && dtype_ == src.dtype_) {
    CopyBlockRows(src, *this);
    return;
  }
  if (src.device() == device()) {
    Copy({.src = src, .dst = *this});
    return;
  }
  // Across devices: move contiguous bytes of src's dtype, then cast/scatter on the destination.
  Tensor packed = src.Contiguous();
  const bool direct = is_contiguous() && dtype_ == src.dtype_;
  const Tensor staging = direct ? *this : Empty(shape_, src.dtype_, device());
  MoveBytes(staging.data(), device(), packed.data(), src.device(), static_cast<size_t>(packed.nbytes()));
  if (!direct) Copy({.src = staging, .dst = *this});
}

std::vector<float> Tensor::ToFloatVector() const {
  Tensor host = Empty(shape_, DType::kF32, kCpu);
  host.CopyFrom(*this);
  const float* p = host.data_ptr<float>();
  return std::vector<float>(p, p + host.numel());
}

std::vector<int64_t> Tensor::ToIntVector() const {
  if (!IsInteger(dtype_)) throw Error("vt: ToIntVector needs an integer tensor, got " + Describe());
  Tensor host = Empty(shape_, DType::kI64, kCpu);
  host.CopyFrom(*this);
  const int64_t* p = host.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + host.numel());
}

std::string Tensor::Describe() const {
  if (!defined()) return "undefined tensor";
  std::string s = std::string(DTypeName(dtype_)) + " " + ShapeToString(shape_);
  if (!is_contiguous()) s += " strides " + ShapeToString(strides_);
  return s + " on " + device().ToString();
}

bool Tensor::Overlaps(const Tensor& other) const {
  if (!defined() || !other.defined() || storage_ != other.storage_) return false;
  if (numel() == 0 || other.numel() == 0) return false;
  auto [lo_a, hi_a] = ByteSpan();
  auto [lo_b, hi_b] = other.ByteSpan();
  return lo_a < hi_b && lo_b < hi_a;
}

bool Tensor::SameView(const Tensor& other) const {
  return storage_ == other.storage_ && offset_ == other.offset_ && shape_ == other.shape_ &&
         strides_ == other.strides_ && dtype_ == other.dtype_;
}

}  // namespace vt
