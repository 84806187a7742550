// The GPU DeviceBackend shared by CUDA and ROCm: one stream per device, a caching
// pool over the runtime's allocator, and host<->device copies.
//
// Loading the backend library touches no GPU: the runtime is first called when a
// device is counted or used, and a machine without a GPU (or without a driver)
// simply has DeviceCount() == 0. Per-device state (stream, pool, properties) is
// created on first use of that device.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "caching_pool.h"
#include "gpu_compat.h"
#include "gpu_launch.cuh"
#include "gpu_runtime.h"
#include "vt/backend_abi.h"
#include "vt/device.h"
#include "vt/device_graph.h"
#include "vt/error.h"

// The library's versioned entry point: LoadBackends checks it before letting the
// registrations below in (backend_abi.h).
VT_DEFINE_BACKEND_ABI()

namespace vt::gpu {
namespace {

const char* BackendName() { return DeviceTypeName(kGpuDeviceType); }

// The raw allocator under every pool of device `index`.
CachingPool::RawAllocate RawAllocator(int index) {
  return [index](size_t bytes) -> void* {
    void* ptr = nullptr;
    if (gpuSetDevice(index) != gpuSuccess || gpuMalloc(&ptr, bytes) != gpuSuccess) {
      (void)gpuGetLastError();  // out of memory is reported by Allocate
      return nullptr;
    }
    return ptr;
  };
}

CachingPool::RawFree RawFreer(int index) {
  return [index](void* ptr) {
    (void)gpuSetDevice(index);
    (void)gpuFree(ptr);
  };
}

class GpuGraphMemory;

struct PerDevice {
  std::once_flag once;
  gpuStream_t stream = nullptr;
  int multiprocessors = 0;
  int warp_size = 32;
  int compute_major = 0;  // CUDA compute capability (HIP: the gfx major, unused)
  size_t max_shared_bytes_per_block = 0;  // with the opt-in above the 48 KB default (CUDA)
  std::string name;
  std::unique_ptr<CachingPool> pool;
  // The kernels' record of a bad index (gpu_runtime.h), allocated on first use;
  // `record_armed` says a checking kernel ran since the record was last read.
  BadIndexRecord* bad_index = nullptr;
  std::once_flag bad_index_once;
  std::atomic<bool> record_armed{false};
  std::atomic<uint64_t> record_requests{0};  // BadIndexRecordFor calls, to tell whether a capture made any
  // Graph capture (device_graph.h): the memory of the capture under way (null when
  // none), and every live graph memory, whose blocks Free must recognise.
  std::shared_ptr<GpuGraphMemory> capturing;
  uint64_t record_requests_at_capture = 0;
  std::mutex graph_mutex;
  std::vector<GpuGraphMemory*> graph_memories;
};

// A pool of its own for the allocations of captured graphs. When it goes away,
// blocks still held by tensors move to the device's main pool (their Free finds
// them there); its cached blocks go back to the runtime.
class GpuGraphMemory final : public GraphMemory {
 public:
  GpuGraphMemory(PerDevice& device, int index)
      : device_(device), index_(index), pool_(RawAllocator(index), RawFreer(index)) {
    std::lock_guard<std::mutex> lock(device_.graph_mutex);
    device_.graph_memories.push_back(this);
  }
  ~GpuGraphMemory() override {
    std::lock_guard<std::mutex> lock(device_.graph_mutex);
    std::erase(device_.graph_memories, this);
    for (const auto& [ptr, size] : pool_.TakeLiveBlocks()) device_.pool->Adopt(ptr, size);
  }
  CachingPool& pool() { return pool_; }
  int index() const { return index_; }

 private:
  PerDevice& device_;
  int index_;
  CachingPool pool_;
};

class GpuCapturedGraph final : public CapturedGraph {
 public:
  GpuCapturedGraph(gpuGraphExec_t exec, PerDevice& device, int index, std::shared_ptr<GpuGraphMemory> memory,
                   bool checks_indices)
      : exec_(exec), device_(device), index_(index), memory_(std::move(memory)), checks_indices_(checks_indices) {}
  ~GpuCapturedGraph() override {
    (void)gpuSetDevice(index_);
    (void)gpuGraphExecDestroy(exec_);
  }
  void Replay() override {
    CheckGpu(gpuSetDevice(index_), "selecting the device");
    if (checks_indices_) device_.record_armed = true;  // its kernels may record a bad index
    CheckGpu(gpuGraphLaunch(exec_, device_.stream), "replaying a captured graph");
  }

 private:
  gpuGraphExec_t exec_;
  PerDevice& device_;
  int index_;
  std::shared_ptr<GpuGraphMemory> memory_;  // the blocks the graph's kernels use
  bool checks_indices_;
};

// "vt::GatherRows on cuda:0: ids[2] = 5 is out of range for a table of 5 rows".
std::string DescribeBadIndex(const BadIndexRecord& r, const std::string& device) {
  const std::string where = " (found by the kernel; reported at the device's next wait for its queue)";
  const int64_t columns = r.columns > 0 ? r.columns : 1;
  // "[row, column] = value" of a 2-D index tensor.
  std::string at = "[";  // appended, not "[" + ...: g++ 12 -O3 warns (-Wrestrict) on that form here
  at += std::to_string(r.position / columns) + ", " + std::to_string(r.position % columns) + "] = " +
        std::to_string(r.value);
  switch (static_cast<CheckedIndexOp>(r.op)) {
    case CheckedIndexOp::kPenalties:
      return "vt::Penalties on " + device + ": token_ids" + at + " is not a token of x (" + std::to_string(r.bound) +
             " entries, or -1, padding)" + where;
    case CheckedIndexOp::kMoeExperts:
      return "vt::MoeExperts on " + device + ": topk_ids" + at + " is not an expert of w_gate (" +
             std::to_string(r.bound) + " experts)" + where;
    case CheckedIndexOp::kTopLogprobs:
      return "vt::TopLogprobs on " + device + ": token[" + std::to_string(r.position) + "] = " +
             std::to_string(r.value) + " is not an index of x (" + std::to_string(r.bound) + " columns)" + where;
    default:
      return "vt::GatherRows on " + device + ": ids[" + std::to_string(r.position) + "] = " +
             std::to_string(r.value) + " is out of range for a table of " + std::to_string(r.bound) + " rows" + where;
  }
}

// A recorded event: the host waits for it alone, not for the whole queue.
class GpuQueueMark final : public QueueMark {
 public:
  GpuQueueMark(gpuStream_t stream, int index) {
    CheckGpu(gpuSetDevice(index), "selecting the device");
    CheckGpu(gpuEventCreateWithFlags(&event_, gpuEventDisableTiming), "creating a queue mark");
    CheckGpu(gpuEventRecord(event_, stream), "recording a queue mark");
  }
  ~GpuQueueMark() override { (void)gpuEventDestroy(event_); }
  void Wait() override { CheckGpu(gpuEventSynchronize(event_), "waiting for a queue mark"); }

 private:
  gpuEvent_t event_{};
};

class GpuDeviceBackend final : public DeviceBackend {
 public:
  DeviceType type() const override { return kGpuDeviceType; }

  int DeviceCount() const override {
    std::call_once(count_once_, [this] {
      int count = 0;
      if (gpuGetDeviceCount(&count) != gpuSuccess) {
        count = 0;
        (void)gpuGetLastError();  // a machine without a GPU is not an error state
      }
      count_ = count;
      devices_ = std::vector<PerDevice>(static_cast<size_t>(count));
    });
    return count_;
  }

  std::string DeviceName(int index) const override { return State(index).name; }

  MemoryInfo GetMemoryInfo(int index) const override {
    State(index);
    CheckGpu(gpuSetDevice(index), "selecting the device");
    size_t free_bytes = 0, total_bytes = 0;
    CheckGpu(gpuMemGetInfo(&free_bytes, &total_bytes), "reading free memory");
    return {free_bytes, total_bytes};
  }

  MemoryStats GetMemoryStats(int index) const override {
    PerDevice& device = State(index);
    MemoryStats stats{.allocated_bytes = device.pool->live_bytes(),
                      .peak_allocated_bytes = device.pool->peak_live_bytes(),
                      .cached_bytes = device.pool->cached_bytes()};
    std::lock_guard<std::mutex> lock(device.graph_mutex);
    for (GpuGraphMemory* memory : device.graph_memories) {
      stats.graph_bytes += memory->pool().live_bytes() + memory->pool().cached_bytes();
    }
    return stats;
  }

  void ResetPeakMemoryStats(int index) override { State(index).pool->ResetPeak(); }

  void* Allocate(size_t bytes, int index) override {
    PerDevice& device = State(index);
    CheckGpu(gpuSetDevice(index), "selecting the device");
    void* ptr = (device.capturing ? device.capturing->pool() : *device.pool).Allocate(bytes);
    if (ptr == nullptr) {
      size_t free_bytes = 0, total_bytes = 0;
      (void)gpuMemGetInfo(&free_bytes, &total_bytes);
      (void)gpuGetLastError();
      throw Error(std::string("vt: out of memory on ") + BackendName() + ":" + std::to_string(index) +
                  " allocating " + std::to_string(bytes) + " bytes (" + std::to_string(free_bytes >> 20) +
                  " MiB free of " + std::to_string(total_bytes >> 20) + " MiB)");
    }
    return ptr;
  }

  void Free(void* ptr, int index) override {
    if (ptr == nullptr) return;
    PerDevice& device = State(index);
    if (device.pool->Free(ptr)) return;
    {
      std::lock_guard<std::mutex> lock(device.graph_mutex);
      for (GpuGraphMemory* memory : device.graph_memories) {
        if (memory->pool().Free(ptr)) return;
      }
    }
    throw Error(std::string("vt: freeing a pointer that ") + BackendName() + ":" + std::to_string(index) +
                " did not allocate");
  }

  void CopyHostToDevice(void* dst, const void* src, size_t bytes, int index) override {
    Copy(dst, src, bytes, gpuMemcpyHostToDevice, index, true);
  }
  void CopyDeviceToHost(void* dst, const void* src, size_t bytes, int index) override {
    Copy(dst, src, bytes, gpuMemcpyDeviceToHost, index, true);
  }
  void CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int index) override {
    Copy(dst, src, bytes, gpuMemcpyDeviceToDevice, index, false);
  }

  void* AllocateHostStaging(size_t bytes, int index) override {
    State(index);
    void* ptr = nullptr;
    CheckGpu(gpuHostAllocPortable(&ptr, bytes == 0 ? 1 : bytes),
             ("page-locking " + std::to_string(bytes) + " bytes of host staging memory").c_str());
    return ptr;
  }
  void FreeHostStaging(void* ptr, int) override {
    if (ptr != nullptr) (void)gpuFreeHost(ptr);
  }
  void QueueCopyFromHostStaging(void* dst, const void* src, size_t bytes, int index) override {
    Copy(dst, src, bytes, gpuMemcpyHostToDevice, index, false);
  }
  std::unique_ptr<QueueMark> MarkQueue(int index) override {
    return std::make_unique<GpuQueueMark>(State(index).stream, index);
  }

  void Synchronize(int index) override {
    PerDevice& device = State(index);
    CheckGpu(gpuSetDevice(index), "selecting the device");
    CheckGpu(gpuStreamSynchronize(device.stream), "waiting for the device's queue");
    ReportBadIndex(device, index);
  }

  BadIndexRecord* BadIndexRecordOf(int index) {
    PerDevice& device = State(index);
    AllocateBadIndexRecord(device, index);
    device.record_armed = true;
    ++device.record_requests;
    return device.bad_index;
  }

  bool SupportsGraphs() const override { return true; }

  std::shared_ptr<GraphMemory> NewGraphMemory(int index) override {
    return std::make_shared<GpuGraphMemory>(State(index), index);
  }

  void BeginGraphCapture(const std::shared_ptr<GraphMemory>& memory, int index) override {
    PerDevice& device = State(index);
    auto gpu_memory = std::dynamic_pointer_cast<GpuGraphMemory>(memory);
    if (!gpu_memory || gpu_memory->index() != index) {
      throw Error(std::string("vt::CaptureGraph on ") + BackendName() + ":" + std::to_string(index) +
                  ": the GraphMemory belongs to another device");
    }
    if (device.capturing) {
      throw Error(std::string("vt::CaptureGraph on ") + BackendName() + ":" + std::to_string(index) +
                  ": a capture is already under way");
    }
    AllocateBadIndexRecord(device, index);  // not inside the graph
    CheckGpu(gpuSetDevice(index), "selecting the device");
    CheckGpu(gpuStreamBeginCapture(device.stream, gpuStreamCaptureModeRelaxed), "starting a graph capture");
    device.capturing = std::move(gpu_memory);
    device.record_requests_at_capture = device.record_requests;
  }

  std::unique_ptr<CapturedGraph> EndGraphCapture(int index) override {
    PerDevice& device = State(index);
    std::shared_ptr<GpuGraphMemory> memory = std::move(device.capturing);  // leaves capturing null
    CheckGpu(gpuSetDevice(index), "selecting the device");
    gpuGraph_t graph = nullptr;
    const gpuError_t ended = gpuStreamEndCapture(device.stream, &graph);
    (void)gpuGetLastError();  // a failed capture leaves its error behind: the queue runs on as usual
    if (ended != gpuSuccess || graph == nullptr) {
      if (graph != nullptr) (void)gpuGraphDestroy(graph);
      ThrowGpuError(ended, "ending a graph capture (did the recorded code wait for the device?)");
    }
    gpuGraphExec_t exec = nullptr;
    const gpuError_t instantiated = gpuGraphInstantiateWithFlags(&exec, graph, 0);
    (void)gpuGraphDestroy(graph);
    CheckGpu(instantiated, "instantiating a captured graph");
    return std::make_unique<GpuCapturedGraph>(exec, device, index, std::move(memory),
                                              device.record_requests != device.record_requests_at_capture);
  }

  void SetProfilerCapture(bool on, int index) override {
#if VT_GPU_HIP
    // HIP's hipProfilerStart / Stop are deprecated for roctracer / rocTX, which this
    // build does not link.
    (void)on;
    (void)index;
    throw Error("vt: profiler capture is not implemented for rocm (hipProfilerStart is deprecated; rocTX is not linked)");
#else
    Synchronize(index);  // the work before belongs outside the capture, the work after inside
    CheckGpu(on ? cudaProfilerStart() : cudaProfilerStop(), on ? "starting the profiler's capture" : "stopping it");
#endif
  }

  static void AllocateBadIndexRecord(PerDevice& device, int index) {
    std::call_once(device.bad_index_once, [&] {
      void* ptr = nullptr;
      CheckGpu(gpuSetDevice(index), "selecting the device");
      CheckGpu(gpuMalloc(&ptr, sizeof(BadIndexRecord)), "allocating the kernels' index-check record");
      CheckGpu(gpuMemsetAsync(ptr, 0, sizeof(BadIndexRecord), device.stream), "clearing the index-check record");
      device.bad_index = static_cast<BadIndexRecord*>(ptr);
    });
  }

  PerDevice& State(int index) const {
    if (index < 0 || index >= DeviceCount()) {
      throw Error(std::string("vt: device ") + BackendName() + ":" + std::to_string(index) + " does not exist (" +
                  std::to_string(DeviceCount()) + " " + BackendName() + " devices found)");
    }
    PerDevice& device = devices_[static_cast<size_t>(index)];
    std::call_once(device.once, [&] { Initialize(device, index); });
    return device;
  }

 private:
  static void Initialize(PerDevice& device, int index) {
    CheckGpu(gpuSetDevice(index), "selecting the device");
    gpuDeviceProp_t props{};
    CheckGpu(gpuGetDeviceProperties(&props, index), "reading device properties");
    device.name = props.name;
    device.multiprocessors = props.multiProcessorCount;
    device.warp_size = props.warpSize;
    device.compute_major = props.major;
#if VT_GPU_HIP
    device.max_shared_bytes_per_block = props.sharedMemPerBlock;  // HIP 5.2 has no opt-in field
#else
    device.max_shared_bytes_per_block = props.sharedMemPerBlockOptin;
#endif
    CheckGpu(gpuStreamCreateWithFlags(&device.stream, gpuStreamNonBlocking), "creating the device's stream");
    device.pool = std::make_unique<CachingPool>(RawAllocator(index), RawFreer(index));
  }

  // Pageable host memory is safe: the host-side copies wait for the stream, so the
  // host buffer may be reused (H2D) or read (D2H) as soon as the call returns.
  void Copy(void* dst, const void* src, size_t bytes, decltype(gpuMemcpyHostToDevice) kind, int index,
            bool wait) {
    if (bytes == 0) return;
    PerDevice& device = State(index);
    CheckGpu(gpuSetDevice(index), "selecting the device");
    CheckGpu(gpuMemcpyAsync(dst, src, bytes, kind, device.stream), "copying memory");
    if (!wait) return;
    CheckGpu(gpuStreamSynchronize(device.stream), "waiting for a copy");
    ReportBadIndex(device, index);
  }

  // After a wait for the queue: throws the bad index a kernel recorded, if any, and
  // clears the record so that later work on the device is not blamed for it.
  static void ReportBadIndex(PerDevice& device, int index) {
    if (!device.record_armed.exchange(false)) return;
    BadIndexRecord record{};
    CheckGpu(gpuMemcpyAsync(&record, device.bad_index, sizeof record, gpuMemcpyDeviceToHost, device.stream),
             "reading the kernels' index-check record");
    CheckGpu(gpuStreamSynchronize(device.stream), "reading the kernels' index-check record");
    if (record.found == 0) return;
    CheckGpu(gpuMemsetAsync(device.bad_index, 0, sizeof record, device.stream), "clearing the index-check record");
    throw Error(DescribeBadIndex(record, std::string(BackendName()) + ":" + std::to_string(index)));
  }

  mutable std::once_flag count_once_;
  mutable int count_ = 0;
  mutable std::vector<PerDevice> devices_;
};

GpuDeviceBackend* g_backend = nullptr;

struct Registrar {
  Registrar() {
    auto backend = std::make_unique<GpuDeviceBackend>();
    g_backend = backend.get();
    RegisterDeviceBackend(std::move(backend));
  }
};
const Registrar registrar;

}  // namespace

gpuStream_t PrepareDevice(Device device) {
  PerDevice& state = g_backend->State(device.index);
  CheckGpu(gpuSetDevice(device.index), "selecting the device");
  return state.stream;
}

BadIndexRecord* BadIndexRecordFor(Device device) { return g_backend->BadIndexRecordOf(device.index); }

int MultiprocessorCount(Device device) { return g_backend->State(device.index).multiprocessors; }

int ResidentBlocksPerMultiprocessor(const void* kernel, int threads, Device device, size_t dynamic_shared_bytes) {
  static std::mutex mutex;
  // (kernel, threads, device, dynamic shared bytes) -> blocks
  static std::map<std::tuple<const void*, int, int, size_t>, int> known;
  const auto key = std::make_tuple(kernel, threads, device.index, dynamic_shared_bytes);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(key);
  if (found != known.end()) return found->second;
  PrepareDevice(device);
  int blocks = 0;
  CheckGpu(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_shared_bytes),
           "asking how many blocks of a kernel a multiprocessor holds");
  return known[key] = blocks > 0 ? blocks : 1;
}
int WarpSize(Device device) { return g_backend->State(device.index).warp_size; }

size_t MaxSharedBytesPerBlock(Device device) { return g_backend->State(device.index).max_shared_bytes_per_block; }

bool ProgrammaticLaunchOnCurrentDevice() {
#if VT_GPU_HIP
  return false;
#else
  int index = 0;
  CheckGpu(cudaGetDevice(&index), "reading the current device");
  // Kernels carry sm_90 machine code (with the wait) and compute_80 PTX (without):
  // only a 9.x device runs the former.
  if (g_backend->State(index).compute_major != 9) return false;
  const std::string variant = tuning::Variant(kLaunchVariantFamily);
  if (variant.empty() || variant == "programmatic") return true;
  if (variant == "serialized") return false;
  throw Error("vt: unknown variant '" + variant + "' forced for " + std::string(kLaunchVariantFamily) +
              " (known: programmatic, serialized)");
#endif
}

bool ClustersOnCurrentDevice() {
#if VT_GPU_HIP
  return false;
#else
  int index = 0;
  CheckGpu(cudaGetDevice(&index), "reading the current device");
  return g_backend->State(index).compute_major == 9;  // see ProgrammaticLaunchOnCurrentDevice
#endif
}

void ThrowGpuError(gpuError_t error, const std::string& what) {
  throw Error(std::string("vt: ") + BackendName() + " runtime error while " + what + ": " + gpuGetErrorString(error));
}

void CheckLaunch(const char* op) {
  gpuError_t error = gpuGetLastError();
  if (error != gpuSuccess) {
    throw Error(std::string("vt::") + op + " on " + BackendName() + ": kernel launch failed: " +
                gpuGetErrorString(error));
  }
}

}  // namespace vt::gpu
