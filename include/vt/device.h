// Devices and the per-device backend interface (memory, copies, queues).
//
// The CPU backend is built into libvt. GPU backends (CUDA, ROCm) are shared
// libraries (libvt_cuda.so, libvt_rocm.so) that LoadBackends() opens at run time
// from the folder holding libvt; loading one registers its DeviceBackend and its
// kernels, once its versioned entry point says it was built against this libvt
// (backend_abi.h). A binary built with CUDA therefore still runs on a machine
// without it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vt {

enum class DeviceType : uint8_t { kCPU, kCUDA, kROCM };
inline constexpr int kNumDeviceTypes = 3;
inline constexpr DeviceType kAllDeviceTypes[kNumDeviceTypes] = {DeviceType::kCPU, DeviceType::kCUDA,
                                                                DeviceType::kROCM};

const char* DeviceTypeName(DeviceType type);  // "cpu", "cuda", "rocm"

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string ToString() const;  // "cpu", "cuda:0"
};

inline constexpr Device kCpu{DeviceType::kCPU, 0};

// Parses "cpu", "cuda", "cuda:1", "rocm". Throws on anything else.
Device ParseDevice(const std::string& text);

// A point in a device's queue: Wait() returns once the device has done everything
// queued before it (MarkQueue).
class QueueMark {
 public:
  virtual ~QueueMark() = default;
  virtual void Wait() = 0;
};

class GraphMemory;    // device_graph.h
class CapturedGraph;  // device_graph.h

struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// The backend allocator's own accounting (as torch.cuda.memory_stats): what the
// engine's memory profiling reads. Sizes are what the allocator holds (a GPU
// caching pool counts whole size classes).
struct MemoryStats {
  size_t allocated_bytes = 0;       // live allocations
  size_t peak_allocated_bytes = 0;  // highest allocated_bytes since ResetPeakMemoryStats
  size_t cached_bytes = 0;          // freed blocks kept for reuse (used for GetMemoryInfo, free to allocations)
  size_t graph_bytes = 0;           // held by graph memories (device_graph.h), outside the counts above
};

// What a device type provides beyond kernels. Every call takes the device index.
// All work on a device goes to its one queue (stream), in order; Synchronize waits.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual DeviceType type() const = 0;
  virtual int DeviceCount() const = 0;
  virtual std::string DeviceName(int index) const = 0;
  virtual MemoryInfo GetMemoryInfo(int index) const = 0;
  virtual MemoryStats GetMemoryStats(int index) const = 0;
  // Starts a new peak: peak_allocated_bytes = allocated_bytes.
  virtual void ResetPeakMemoryStats(int index) = 0;

  // Returns memory aligned to at least 256 bytes; throws std::bad_alloc-like
  // vt errors (naming the device and size) when out of memory.
  virtual void* Allocate(size_t bytes, int index) = 0;
  virtual void Free(void* ptr, int index) = 0;

  // Copies run in queue order on the device's queue; host-side copies block
  // until the data is in place.
  virtual void CopyHostToDevice(void* dst, const void* src, size_t bytes, int index) = 0;
  virtual void CopyDeviceToHost(void* dst, const void* src, size_t bytes, int index) = 0;
  virtual void CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int index) = 0;
  virtual void Synchronize(int index) = 0;

  // Uploads the host does not wait for (host_upload.h). Staging memory is host memory
  // the device can read while the host goes on (page-locked on a GPU);
  // QueueCopyFromHostStaging queues the copy from it after the work already queued
  // and returns at once, so `src` must stay unchanged until a mark queued after the
  // copy has passed. The defaults (the CPU's) are plain memory, a copy made at once
  // and a mark that waits for the whole queue.
  virtual void* AllocateHostStaging(size_t bytes, int index);
  virtual void FreeHostStaging(void* ptr, int index);
  virtual void QueueCopyFromHostStaging(void* dst, const void* src, size_t bytes, int index);
  virtual std::unique_ptr<QueueMark> MarkQueue(int index);

  // Graph capture (device_graph.h). The defaults are those of a backend without
  // graphs (the CPU's): not supported, and the other calls throw saying so.
  virtual bool SupportsGraphs() const { return false; }
  virtual std::shared_ptr<GraphMemory> NewGraphMemory(int index);
  // Starts recording the device's queue into a graph whose allocations come from `memory`.
  virtual void BeginGraphCapture(const std::shared_ptr<GraphMemory>& memory, int index);
  // Stops recording; returns the graph ready to replay. Throws (and leaves the
  // queue running as usual) when the recording failed.
  virtual std::unique_ptr<CapturedGraph> EndGraphCapture(int index);

  // Turns the vendor profiler's capture on or off for the process (CUDA's
  // cudaProfilerStart / Stop, HIP's hipProfilerStart / Stop), so that a profiler
  // started with capture off (`ncu --profile-from-start off`) records only the work
  // in between. The default (the CPU's) throws: it has no such profiler.
  virtual void SetProfilerCapture(bool on, int index);
};

// SetProfilerCapture of the device's backend; throws for the CPU.
void SetProfilerCapture(Device device, bool on);

// Installs the backend of a device type (called by the backend itself when loaded).
void RegisterDeviceBackend(std::unique_ptr<DeviceBackend> backend);

// The backend of `type`; throws "vt: device cuda is not available (...why...)".
DeviceBackend& GetDeviceBackend(DeviceType type);
bool IsBackendLoaded(DeviceType type);
// Whether the backend is loaded and has a device with this index (GPU tests skip
// themselves when this is false).
bool IsDeviceAvailable(Device device);

// Opens the GPU backend libraries that were built next to libvt. Idempotent.
// Returns one line per backend saying whether it loaded and, if not, why.
std::vector<std::string> LoadBackends();

// Opens `path` as the backend library of `type` (LoadBackends does this for the
// libraries of this build). The library's registrations count only when its
// versioned entry point (backend_abi.h) reports libvt's ABI version and ops.def
// fingerprint; otherwise nothing of it is registered and the backend stays
// unavailable. Returns "" when it loaded (or the backend already was), else the
// reason, which BackendLoadError and GetDeviceBackend then report. One attempt per
// type: LoadBackends does not try again after a failure.
std::string LoadBackendLibrary(DeviceType type, const std::string& path);

// Whether this build produced a backend library for `type` (fixed at build time).
bool IsBackendBuilt(DeviceType type);

// Why a built backend failed to load ("" if loaded or not attempted).
std::string BackendLoadError(DeviceType type);

}  // namespace vt
