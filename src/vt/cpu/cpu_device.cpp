// The CPU DeviceBackend: aligned host memory and memcpy.
#include <atomic>
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

  MemoryStats GetMemoryStats(int) const override {
    return {.allocated_bytes = allocated_.load(), .peak_allocated_bytes = peak_.load()};
  }
  void ResetPeakMemoryStats(int) override { peak_.store(allocated_.load()); }

  // Each block starts with a 64-byte header holding its size (for the counts),
  // then the caller's memory: 64-byte alignment covers AVX-512 loads.
  void* Allocate(size_t bytes, int) override {
    const size_t rounded = (bytes + 63) / 64 * 64 + kHeader;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) throw Error("vt: out of memory on cpu allocating " + std::to_string(bytes) + " bytes");
    *static_cast<size_t*>(p) = rounded;
    const size_t now = allocated_.fetch_add(rounded) + rounded;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return static_cast<char*>(p) + kHeader;
  }
  void Free(void* ptr, int) override {
    if (ptr == nullptr) return;
    void* block = static_cast<char*>(ptr) - kHeader;
    allocated_.fetch_sub(*static_cast<size_t*>(block));
    std::free(block);
  }

  void CopyHostToDevice(void* dst, const void* src, size_t bytes, int) override { std::memcpy(dst, src, bytes); }
  void CopyDeviceToHost(void* dst, const void* src, size_t bytes, int) override { std::memcpy(dst, src, bytes); }
  void CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int) override { std::memmove(dst, src, bytes); }
  void Synchronize(int) override {}

 private:
  static constexpr size_t kHeader = 64;
  std::atomic<size_t> allocated_{0}, peak_{0};
};

struct Registrar {
  Registrar() { RegisterDeviceBackend(std::make_unique<CpuDeviceBackend>()); }
};
const Registrar registrar;

}  // namespace
}  // namespace vt::cpu
