// A device backend that does nothing, for the fake backend libraries of
// backend_loading_test.cpp: loading one must register (or, refused, not register)
// this backend and one kernel.
#pragma once

#include <memory>
#include <string>

#include "vt/device.h"
#include "vt/error.h"
#include "vt/registry.h"

namespace vt::fake {

class FakeBackend final : public DeviceBackend {
 public:
  explicit FakeBackend(DeviceType type) : type_(type) {}
  DeviceType type() const override { return type_; }
  int DeviceCount() const override { return 0; }
  std::string DeviceName(int) const override { return "fake"; }
  MemoryInfo GetMemoryInfo(int) const override { return {}; }
  MemoryStats GetMemoryStats(int) const override { return {}; }
  void ResetPeakMemoryStats(int) override {}
  void* Allocate(size_t, int) override { throw Error("fake backend: no memory"); }
  void Free(void*, int) override {}
  void CopyHostToDevice(void*, const void*, size_t, int) override { throw Error("fake backend: no copies"); }
  void CopyDeviceToHost(void*, const void*, size_t, int) override { throw Error("fake backend: no copies"); }
  void CopyDeviceToDevice(void*, const void*, size_t, int) override { throw Error("fake backend: no copies"); }
  void Synchronize(int) override {}

 private:
  DeviceType type_;
};

inline void FakeFill(const FillArgs&) {}

struct FakeRegistrar {
  explicit FakeRegistrar(DeviceType type) { RegisterDeviceBackend(std::make_unique<FakeBackend>(type)); }
};

}  // namespace vt::fake

// What a fake library registers when it is opened, as a real backend does: its
// device backend and one kernel (Fill) for DEVICE (kCUDA, kROCM).
#define VT_FAKE_BACKEND(DEVICE)                                                     \
  namespace vt::fake {                                                              \
  namespace {                                                                       \
  const FakeRegistrar registrar(DeviceType::DEVICE);                                \
  VT_REGISTER_KERNEL(Fill, DEVICE, FakeFill);                                       \
  }                                                                                 \
  }
