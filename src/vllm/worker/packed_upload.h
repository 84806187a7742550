// PackedUpload: a step's int32 metadata arrays in one host buffer, uploaded to the
// model's device in one copy (each copy to a device is a wait for its queue), then
// handed out as views of the uploaded buffer. The model runner's batches and the MTP
// proposer's use it.
#pragma once

#include <cstdint>
#include <vector>

#include "vt/tensor.h"

namespace vllm {

class PackedUpload {
 public:
  // Returns the position of `values` in the buffer, for Take.
  int64_t Add(const std::vector<int32_t>& values) {
    const int64_t at = static_cast<int64_t>(buffer_.size());
    buffer_.insert(buffer_.end(), values.begin(), values.end());
    return at;
  }
  void Upload(vt::Device device) {
    const vt::Tensor host = vt::Tensor::FromVector(buffer_, {static_cast<int64_t>(buffer_.size())});
    uploaded_ = device.type == vt::DeviceType::kCPU ? host : host.To(device);
  }
  // A contiguous view of `shape` starting at `at`.
  vt::Tensor Take(int64_t at, const vt::Shape& shape) const {
    return uploaded_.Slice(0, at, at + vt::NumElements(shape)).View(shape);
  }

 private:
  std::vector<int32_t> buffer_;
  vt::Tensor uploaded_;
};

}  // namespace vllm
