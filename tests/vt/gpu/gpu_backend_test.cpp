// The GPU backends as DeviceBackends: every backend this build produced loads
// without a GPU and registers a kernel for every op of ops.def (no "not provided"
// gaps, the goal on CUDA and ROCm alike); with a GPU, the allocator reuses freed
// blocks and reports memory, pageable host copies round-trip, work runs in queue
// order, and running out of memory is an error naming the device. The device tests
// skip themselves on machines without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>

#include "testing/op_testing.h"
#include "vt/device.h"
#include "vt/registry.h"

namespace vt {
namespace {

std::vector<DeviceType> BuiltGpuBackends() {
  std::vector<DeviceType> built;
  std::stringstream list(VT_BUILT_BACKEND_LIST);  // "cpu;cuda;rocm", from CMake
  for (std::string name; std::getline(list, name, ';');) {
    for (DeviceType t : {DeviceType::kCUDA, DeviceType::kROCM}) {
      if (name == DeviceTypeName(t)) built.push_back(t);
    }
  }
  return built;
}

TEST(GpuBackendTest, EveryBuiltBackendLoadsAndRegistersEveryOp) {
  LoadBackends();
  for (DeviceType type : BuiltGpuBackends()) {
    SCOPED_TRACE(DeviceTypeName(type));
    ASSERT_TRUE(IsBackendLoaded(type)) << BackendLoadError(type);
    EXPECT_GE(GetDeviceBackend(type).DeviceCount(), 0);
    for (OpId op : AllOps()) {
      const KernelEntry& entry = Registry::Get().Entry(op, type);
      EXPECT_NE(entry.fn, nullptr) << OpName(op) << " has no kernel";
      EXPECT_EQ(entry.not_provided, nullptr) << OpName(op) << " is declared not provided: " << entry.not_provided;
      if (entry.kernel_name != nullptr) {
        std::printf("%-6s %-20s %s\n", DeviceTypeName(type), OpName(op), entry.kernel_name);
      }
    }
  }
}

TEST(GpuBackendTest, AMissingDeviceIsAnErrorNamingIt) {
  LoadBackends();
  for (DeviceType type : BuiltGpuBackends()) {
    DeviceBackend& backend = GetDeviceBackend(type);
    const int count = backend.DeviceCount();
    const std::string name = std::string(DeviceTypeName(type)) + ":" + std::to_string(count);
    try {
      backend.Allocate(16, count);
      ADD_FAILURE() << "allocated on " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST(GpuDeviceTest, AllocatorReusesFreedBlocksAndReportsMemory) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  for (Device device : gpus) {
    DeviceBackend& backend = GetDeviceBackend(device.type);
    void* first = backend.Allocate(1000, device.index);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 256, 0u);
    backend.Free(first, device.index);
    void* again = backend.Allocate(900, device.index);  // same size class: the cached block
    EXPECT_EQ(again, first);
    void* other = backend.Allocate(100000, device.index);
    EXPECT_NE(other, again);
    backend.Free(again, device.index);
    backend.Free(other, device.index);
    const MemoryInfo info = backend.GetMemoryInfo(device.index);
    EXPECT_GT(info.total_bytes, size_t{1} << 30);
    EXPECT_LE(info.free_bytes, info.total_bytes);
    EXPECT_FALSE(backend.DeviceName(device.index).empty());
  }
}

TEST(GpuDeviceTest, OutOfMemoryIsAnErrorNamingTheDevice) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  for (Device device : gpus) {
    try {
      Tensor::Empty({int64_t{1} << 50}, DType::kF32, device);
      ADD_FAILURE() << "allocated 4 PiB";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of memory on " + device.ToString()), std::string::npos) << e.what();
    }
  }
}

TEST(GpuDeviceTest, PageableHostCopiesRoundTrip) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(7);
  for (Device device : gpus) {
    DeviceBackend& backend = GetDeviceBackend(device.type);
    for (size_t bytes : {size_t{1}, size_t{3}, size_t{4097}, size_t{33} << 20}) {
      std::vector<unsigned char> host(bytes + 1), back(bytes + 1, 0);
      for (unsigned char& b : host) b = static_cast<unsigned char>(rng());
      const std::vector<unsigned char> expected = host;
      void* a = backend.Allocate(bytes, device.index);
      void* b = backend.Allocate(bytes, device.index);
      backend.CopyHostToDevice(a, host.data() + 1, bytes, device.index);  // unaligned host source
      std::fill(host.begin(), host.end(), 0);                              // host buffer reusable at once
      backend.CopyDeviceToDevice(b, a, bytes, device.index);
      backend.CopyDeviceToHost(back.data() + 1, b, bytes, device.index);
      EXPECT_EQ(std::memcmp(expected.data() + 1, back.data() + 1, bytes), 0) << bytes << " bytes";
      backend.Free(a, device.index);
      backend.Free(b, device.index);
    }
  }
}

TEST(GpuDeviceTest, WorkRunsInQueueOrder) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  for (Device device : gpus) {
    // Thirty dependent launches with no host synchronisation between them: only
    // in-order execution on one queue gives 2^30.
    Tensor t = Tensor::Empty({1 << 20}, DType::kF32, device);
    Fill({.dst = t, .value = 1.0});
    for (int i = 0; i < 30; ++i) Add({.a = t, .b = t, .out = t});
    Synchronize(device);
    const std::vector<float> values = t.ToFloatVector();
    EXPECT_EQ(values.front(), 1073741824.0f);
    EXPECT_EQ(values.back(), 1073741824.0f);
  }
}

}  // namespace
}  // namespace vt
