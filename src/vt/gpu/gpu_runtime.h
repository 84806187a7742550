// Host-side helpers of the GPU kernel launchers: the device's stream, error checks
// that throw vt::Error naming the op, and launch-size arithmetic that can never
// produce an empty grid or block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu_compat.h"
#include "vt/error.h"
#include "vt/tensor.h"

namespace vt::gpu {

// Makes `device` current for the calling thread and returns its one stream (every
// kernel and copy of the device runs there, in order). Defined in gpu_device.cu.
gpuStream_t PrepareDevice(Device device);

// Multiprocessors (CUDA SMs / AMD CUs) of the device; kernel choices size grids by it.
int MultiprocessorCount(Device device);

// Blocks of `threads` threads of `kernel` (a __global__ function's address) that one
// multiprocessor of `device` holds at once, as its registers and shared memory
// allow (with `dynamic_shared_bytes` of dynamic shared memory each); asked of the
// runtime once per kernel, device and size. Grids meant to be one
// wave of resident blocks are sized by it (a second, partial wave is a tail).
int ResidentBlocksPerMultiprocessor(const void* kernel, int threads, Device device, size_t dynamic_shared_bytes = 0);

// The device's warp width as the runtime reports it (32 or 64). Host code that
// maps work to warps uses this; device code uses the compile-time kWarpSize of the
// target it was built for, which is the same number on that device.
int WarpSize(Device device);

// The most shared memory one block of a kernel on `device` can have (CUDA: after
// raising the kernel's limit with gpuFuncSetAttribute; 227 KB on Hopper, 163 KB on
// the A100; HIP: the per-block size, 64 KB on gfx90a).
size_t MaxSharedBytesPerBlock(Device device);

// Indices that kernels read from device memory (GatherRows' ids, MoeExperts'
// expert ids) are checked by the kernels themselves: reading them back to validate
// on the host would wait for the whole queue at every call, which a decode step
// cannot afford. The first out-of-range index a kernel meets is recorded on the
// device; the device backend reads the record after its next wait for the queue
// (Synchronize, a copy to or from the host) and throws a vt::Error naming the op,
// the position and the value there. The kernel skips the bad index (GatherRows
// writes a NaN row, MoeExperts leaves the expert out).
enum class CheckedIndexOp : int32_t { kNone = 0, kGatherRows = 1, kMoeExperts = 2, kPenalties = 3, kTopLogprobs = 4 };

struct BadIndexRecord {
  int32_t found;     // 0 until a kernel records a bad index (later ones are dropped)
  int32_t op;        // CheckedIndexOp
  int64_t position;  // flat position in the index tensor
  int64_t value;     // the bad index
  int64_t bound;     // the valid range is [0, bound)
  int64_t columns;   // the index tensor's last dim (1 for a vector), to name [row, column]
};

// The device's record, for a launcher to pass to a kernel that checks indices
// (also tells the backend to read the record back at its next wait).
BadIndexRecord* BadIndexRecordFor(Device device);

[[noreturn]] void ThrowGpuError(gpuError_t error, const std::string& what);

inline void CheckGpu(gpuError_t error, const char* what) {
  if (error != gpuSuccess) ThrowGpuError(error, what);
}

// Call right after a launch: reports a bad configuration or a missing device
// image for this GPU ("no kernel image is available") as a vt::Error naming `op`.
void CheckLaunch(const char* op);

// Threads per block used by element-wise kernels: a multiple of every warp width.
inline constexpr int kElementwiseThreads = 256;

// Blocks needed to cover `items` with `per_block` items each. Launchers call this
// only with items > 0 (the public ops return before dispatch on empty tensors); a
// zero count is a bug and throws instead of launching an empty grid.
inline unsigned GridFor(int64_t items, int64_t per_block, const char* op) {
  if (items <= 0 || per_block <= 0) {
    throw Error(std::string("vt::") + op + ": internal error: launch over " + std::to_string(items) + " items");
  }
  int64_t blocks = (items + per_block - 1) / per_block;
  constexpr int64_t kMaxGridX = 2147483647;
  return static_cast<unsigned>(blocks < kMaxGridX ? blocks : kMaxGridX);
}

// Blocks of kElementwiseThreads for a grid-stride loop over `items`: enough to fill
// the device several times over, never more than the items need.
inline unsigned GridStrideBlocks(int64_t items, Device device, const char* op) {
  const unsigned needed = GridFor(items, kElementwiseThreads, op);
  const unsigned cap = static_cast<unsigned>(MultiprocessorCount(device)) * 32u;
  return needed < cap ? needed : cap;
}

// "bf16 [3, 4] on cuda:0" for error messages.
inline std::string DescribeForError(const char* op, const Tensor& t) {
  return std::string("vt::") + op + " on " + t.device().ToString() + ": " + t.Describe();
}

}  // namespace vt::gpu
