#include "vt/host_upload.h"

#include <algorithm>
#include <string>

#include "vt/error.h"

namespace vt {

HostUpload::HostUpload(Device device) : device_(device), backend_(&GetDeviceBackend(device.type)) {}

HostUpload::~HostUpload() { Release(); }

void HostUpload::Release() {
  if (staging_ == nullptr) return;
  if (read_) read_->Wait();  // the device may still be reading it
  backend_->FreeHostStaging(staging_, device_.index);
  staging_ = nullptr;
  capacity_ = 0;
}

std::span<std::byte> HostUpload::Stage(size_t bytes) {
  if (read_) {
    read_->Wait();
    read_.reset();
  }
  if (bytes > capacity_) {
    Release();
    // Page-locking is slow (a system call and the pages' mapping): grow by half again.
    const size_t capacity = std::max(bytes, capacity_ + capacity_ / 2);
    staging_ = static_cast<std::byte*>(backend_->AllocateHostStaging(capacity, device_.index));
    capacity_ = capacity;
  }
  staged_ = bytes;
  return {staging_, bytes};
}

void HostUpload::Upload(const Tensor& dst) {
  const size_t bytes = static_cast<size_t>(dst.nbytes());
  if (dst.device() != device_ || !dst.is_contiguous() || bytes > staged_) {
    throw Error("vt::HostUpload to " + device_.ToString() + ": the destination (" + dst.device().ToString() + ", " +
                std::to_string(bytes) + " bytes, " + (dst.is_contiguous() ? "contiguous" : "strided") +
                ") must be a contiguous tensor on the upload's device of at most the " + std::to_string(staged_) +
                " staged bytes");
  }
  if (bytes == 0) return;
  backend_->QueueCopyFromHostStaging(dst.data(), staging_, bytes, device_.index);
  read_ = backend_->MarkQueue(device_.index);
}

}  // namespace vt
