// The CPU backend's allocator counts what it holds (vt::MemoryStats), as the GPU
// caching pool does, so the engine's memory profiling reads the same numbers on
// every device.
#include <gtest/gtest.h>

#include "vt/device.h"
#include "vt/tensor.h"

namespace vt {
namespace {

TEST(MemoryStatsTest, CpuAllocationsAreCountedWithTheirPeak) {
  DeviceBackend& cpu = GetDeviceBackend(DeviceType::kCPU);
  const size_t before = cpu.GetMemoryStats(0).allocated_bytes;
  cpu.ResetPeakMemoryStats(0);
  {
    const Tensor a = Tensor::Empty({1000}, DType::kF32, kCpu);  // 4000 bytes
    const Tensor b = Tensor::Empty({250}, DType::kF32, kCpu);
    const MemoryStats live = cpu.GetMemoryStats(0);
    EXPECT_GE(live.allocated_bytes, before + 5000);
    EXPECT_LE(live.allocated_bytes, before + 5000 + 2 * 128);  // each rounded to 64 bytes plus a 64-byte header
    EXPECT_EQ(live.peak_allocated_bytes, live.allocated_bytes);
  }
  const MemoryStats after = cpu.GetMemoryStats(0);
  EXPECT_EQ(after.allocated_bytes, before);
  EXPECT_GE(after.peak_allocated_bytes, before + 5000);
  cpu.ResetPeakMemoryStats(0);
  EXPECT_EQ(cpu.GetMemoryStats(0).peak_allocated_bytes, before);
}

}  // namespace
}  // namespace vt
