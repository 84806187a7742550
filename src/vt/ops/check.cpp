#include "check.h"

namespace vt::detail {

std::string Describe(const Tensor& t) { return t.Describe(); }

OpCheck::OpCheck(const char* op, std::initializer_list<NamedTensor> tensors) : prefix_(std::string("vt::") + op) {
  const NamedTensor* first = nullptr;
  for (const NamedTensor& named : tensors) {
    if (!named.second->defined()) throw Error(prefix_ + ": argument '" + named.first + "' is an undefined tensor");
    if (first == nullptr) {
      first = &named;
      device_ = named.second->device();
    } else if (named.second->device() != device_) {
      throw Error(prefix_ + ": all tensors must be on one device, but '" + first->first + "' is on " +
                  device_.ToString() + " and '" + named.first + "' is " + named.second->Describe());
    }
  }
  prefix_ += " on " + device_.ToString();
}

void OpCheck::Fail(const std::string& what) const { throw Error(prefix_ + ": " + what); }

void OpCheck::DType(const Tensor& t, const char* name, std::initializer_list<vt::DType> allowed) const {
  for (vt::DType d : allowed) {
    if (d == t.dtype()) return;
  }
  std::string list;
  size_t i = 0;
  for (vt::DType d : allowed) {
    list += (i == 0 ? "" : (i + 1 == allowed.size() ? " or " : ", "));
    list += DTypeName(d);
    ++i;
  }
  Fail(std::string(name) + " must be " + list + ", got " + t.Describe());
}

void OpCheck::FloatDType(const Tensor& t, const char* name) const {
  DType(t, name, {vt::DType::kF32, vt::DType::kF16, vt::DType::kBF16});
}

void OpCheck::WeightDType(const Tensor& t, const char* name) const {
  if (IsInteger(t.dtype())) Fail(std::string(name) + " must be a float or block dtype, got " + t.Describe());
  if (t.dtype() == vt::DType::kQ8_K) {
    Fail(std::string(name) + " " + t.Describe() +
         " is q8_k, the activation format of K-quant dot products, not a weight format; weights may be f32, f16, "
         "bf16, q4_0, q8_0, q4_k, q5_k or q6_k");
  }
}

void OpCheck::IndexDType(const Tensor& t, const char* name) const {
  DType(t, name, {vt::DType::kI32, vt::DType::kI64});
}

void OpCheck::Rank(const Tensor& t, const char* name, int ndim) const {
  if (t.ndim() == ndim) return;
  Fail(std::string(name) + " must have " + std::to_string(ndim) + " dims, got " + t.Describe());
}

void OpCheck::MinRank(const Tensor& t, const char* name, int ndim) const {
  if (t.ndim() >= ndim) return;
  Fail(std::string(name) + " must have at least " + std::to_string(ndim) + " dims, got " + t.Describe());
}

void OpCheck::Shape(const Tensor& t, const char* name, const vt::Shape& expected) const {
  if (t.shape() == expected) return;
  Fail(std::string(name) + " must have shape " + ShapeToString(expected) + ", got " + t.Describe());
}

void OpCheck::SameShape(const Tensor& t, const char* name, const Tensor& ref, const char* ref_name) const {
  if (t.shape() == ref.shape()) return;
  Fail(std::string(name) + " must have the shape of " + ref_name + " " + ShapeToString(ref.shape()) + ", got " +
       t.Describe());
}

void OpCheck::Size(const Tensor& t, const char* name, int dim, int64_t expected, const char* meaning) const {
  if (t.size(dim) == expected) return;
  Fail(std::string(name) + " dim " + std::to_string(dim) + " must be " + std::to_string(expected) + " (" + meaning +
       "), got " + t.Describe());
}

void OpCheck::LastDimContiguous(const Tensor& t, const char* name) const {
  if (t.ndim() == 0 || t.stride(-1) == 1 || t.size(-1) == 1) return;
  Fail(std::string(name) + " must have unit stride in its last dim, got " + t.Describe());
}

void OpCheck::Contiguous(const Tensor& t, const char* name) const {
  if (t.is_contiguous()) return;
  Fail(std::string(name) + " must be contiguous, got " + t.Describe());
}

void OpCheck::NoOverlap(const Tensor& out, const char* out_name, const Tensor& in, const char* in_name,
                        bool allow_same_view) const {
  if (!out.Overlaps(in)) return;
  if (allow_same_view && out.SameView(in)) return;
  Fail(std::string(out_name) + " overlaps " + in_name + (allow_same_view ? " without being the same view" : "") + " (" +
       out.Describe() + " vs " + in.Describe() + ")");
}

}  // namespace vt::detail
