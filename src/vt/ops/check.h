// Validation helpers shared by the public ops: every failure throws a vt::Error
// that starts with "vt::<Op> on <device>:" and names the argument, what was
// expected and what was found (dtype, shape, strides, device).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "vt/error.h"
#include "vt/tensor.h"

namespace vt::detail {

using NamedTensor = std::pair<const char*, const Tensor*>;

class OpCheck {
 public:
  // Checks that all tensors are defined and on one device, which becomes device().
  OpCheck(const char* op, std::initializer_list<NamedTensor> tensors);

  Device device() const { return device_; }
  [[noreturn]] void Fail(const std::string& what) const;
  // For a fixed message only: its argument is built at every call, even when the
  // condition holds, and ops run hundreds of times a step. A message assembled from
  // values goes through `if (!condition) check.Fail(...)`.
  void Require(bool condition, const std::string& what) const {
    if (!condition) Fail(what);
  }

  void DType(const Tensor& t, const char* name, std::initializer_list<vt::DType> allowed) const;
  void FloatDType(const Tensor& t, const char* name) const;  // f32, f16 or bf16
  void IndexDType(const Tensor& t, const char* name) const;  // i32 or i64
  // A matmul weight: a float dtype or a GGUF block type, but not q8_k (the
  // activation format of K-quant dot products).
  void WeightDType(const Tensor& t, const char* name) const;
  void Rank(const Tensor& t, const char* name, int ndim) const;
  void MinRank(const Tensor& t, const char* name, int ndim) const;
  void Shape(const Tensor& t, const char* name, const vt::Shape& expected) const;
  void SameShape(const Tensor& t, const char* name, const Tensor& ref, const char* ref_name) const;
  void Size(const Tensor& t, const char* name, int dim, int64_t expected, const char* meaning) const;
  void LastDimContiguous(const Tensor& t, const char* name) const;
  void Contiguous(const Tensor& t, const char* name) const;
  // `out` may not share a byte with `in` unless `allow_same_view` and it is the same view.
  void NoOverlap(const Tensor& out, const char* out_name, const Tensor& in, const char* in_name,
                 bool allow_same_view) const;

 private:
  std::string prefix_;
  Device device_;
};

std::string Describe(const Tensor& t);

}  // namespace vt::detail
