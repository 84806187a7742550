// The CPU DeviceBackend: aligned host memory and memcpy.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "vt/device.h"
#include "vt/error.h"

namespace vt::cpu {
namespace {

class CpuDeviceBackend final : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::kCPU; }
  int DeviceCount() const override { return 1; }
  std::string DeviceName(int) const override { return "host CPU"; }

  MemoryInfo GetMemoryInfo(int) const override {
    MemoryInfo info;
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    size_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit) {
      if (key == "MemTotal:") info.total_bytes = kib * 1024;
      if (key == "MemAvailable:") info.free_bytes = kib * 1024;
    }
    return info;
  }

  void* Allocate(size_t bytes, int) override {
    // 64-byte alignment covers AVX-512 loads; round the size up as aligned_alloc requires.
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) throw Error("vt: out of memory on cpu allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void Free(void* ptr, int) override { std::free(ptr); }

  void CopyHostToDevice(void* dst, const void* src, size_t bytes, int) override { std::memcpy(dst, src, bytes); }
  void CopyDeviceToHost(void* dst, const void* src, size_t bytes, int) override { std::memcpy(dst, src, bytes); }
  void CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int) override { std::memmove(dst, src, bytes); }
  void Synchronize(int) override {}
};

struct Registrar {
  Registrar() { RegisterDeviceBackend(std::make_unique<CpuDeviceBackend>()); }
};
const Registrar registrar;

}  // namespace
}  // namespace vt::cpu
