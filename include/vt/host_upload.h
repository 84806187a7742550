// Uploads the host does not wait for: data staged in page-locked host memory (on a
// GPU; plain memory on the CPU) is copied into a device tensor after the work
// already queued, and the host goes on at once.
//
// Why: a plain host-to-device copy (Tensor::To, CopyFrom) waits for the device's
// whole queue, so a step that uploads something after queueing its forward (a
// grammar's bitmask rows, the sampling parameters) holds the host until the forward
// ends and then leaves the device idle while the copy and the next launches go out.
//
//   vt::HostUpload upload(device);                    // one staging region, reused
//   std::span<int32_t> rows = upload.Stage<int32_t>(n);  // waits for the last upload's read
//   ... fill rows ...
//   upload.Upload(dst);                               // queued; dst contiguous, n values
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "vt/device.h"
#include "vt/tensor.h"

namespace vt {

class HostUpload {
 public:
  explicit HostUpload(Device device);
  ~HostUpload();
  HostUpload(const HostUpload&) = delete;
  HostUpload& operator=(const HostUpload&) = delete;

  // Host memory for `bytes` of the next upload (grown as needed; contents left
  // over). Waits first until the device has read what the previous Upload queued.
  std::span<std::byte> Stage(size_t bytes);
  template <typename T>
  std::span<T> Stage(size_t count) {
    std::span<std::byte> bytes = Stage(count * sizeof(T));
    return {reinterpret_cast<T*>(bytes.data()), count};
  }

  // Queues the copy of the first dst.nbytes() staged bytes into `dst`, which must be
  // contiguous, on this upload's device, and no larger than what was staged.
  void Upload(const Tensor& dst);

  Device device() const { return device_; }

 private:
  void Release();
  Device device_;
  DeviceBackend* backend_;
  std::byte* staging_ = nullptr;
  size_t capacity_ = 0, staged_ = 0;
  std::unique_ptr<QueueMark> read_;  // passed when the device has read the last upload
};

}  // namespace vt
