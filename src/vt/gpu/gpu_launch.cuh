// Kernel launches that may overlap the kernel ahead of them in the stream
// (programmatic dependent launch: CUDA, compute capability 9.x).
//
// Why: a decode step is 450-900 small kernels one after another on the device's one
// stream (a CUDA graph replays them). Between two of them the device lets the first
// drain (its last blocks, then its memory flush) before it schedules a block of the
// second, which then starts cold: its first weight loads wait a DRAM trip. With
// LaunchKernel the next kernel's blocks are scheduled as soon as every block of the
// kernel ahead has passed its WaitForPriorKernels(); they take the multiprocessors'
// spare room, run their prologue (a GEMV starts streaming its weights), and wait in
// their own WaitForPriorKernels() until the kernel ahead has finished and its writes
// are visible. Only one kernel runs ahead: a kernel lets its successor start only
// from its own WaitForPriorKernels(), i.e. once its predecessor has finished, and a
// block of the successor can only be scheduled once every block of this kernel is.
//
// The contract of a kernel launched by LaunchKernel: every block calls
// WaitForPriorKernels() before it reads or writes memory that work earlier in the
// stream may write or read (activations, caches, outputs, scratch, index records);
// before that call it may read only what no kernel writes while a forward runs
// (weights) and use its registers and shared memory. A kernel that calls it but is
// launched with <<<>>> (or before a device that has no programmatic launch) simply
// does not wait there. HIP has no programmatic launch: LaunchKernel is <<<>>> and
// WaitForPriorKernels() nothing.
//
// vt::tuning family "gpu.launch" forces "serialized" (every launch waits for the
// kernel ahead, as <<<>>>) or "programmatic" (the default where available), so a
// benchmark can measure what the overlap saves in one process.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "gpu_compat.h"
#include "gpu_runtime.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {

inline constexpr std::string_view kLaunchVariantFamily = "gpu.launch";

__device__ inline void WaitForPriorKernels() {
#if !VT_GPU_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches on the current device (the launchers' PrepareDevice made it so)
// overlap the kernel ahead: the device can (CUDA 9.x: the kernels' sm_90 code has the
// wait; code JIT-compiled from the compute_80 PTX for a newer device does not) and
// "gpu.launch" does not force "serialized".
bool ProgrammaticLaunchOnCurrentDevice();

// Whether the current device runs thread-block clusters from our kernels: CUDA 9.x,
// whose sm_90 code is what runs (the compute_80 PTX has no clusters).
bool ClustersOnCurrentDevice();

// kernel<<<grid, block, shared_bytes, stream>>>(args...), overlapping the kernel ahead
// where ProgrammaticLaunchOnCurrentDevice(). Launch errors are left for CheckLaunch.
template <typename... Params, typename... Args>
void LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, gpuStream_t stream,
                  Args&&... args) {
#if VT_GPU_HIP
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#else
  if (!ProgrammaticLaunchOnCurrentDevice()) {
    kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
    return;
  }
  reach::Hit("GpuLaunch.programmatic");
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);  // the error stays for CheckLaunch
#endif
}

#if !VT_GPU_HIP
// LaunchKernel with the grid's blocks grouped into clusters of `cluster` blocks
// (each grid dimension a multiple of the cluster's), for kernels that share
// shared memory across a cluster; only where ClustersOnCurrentDevice().
template <typename... Params, typename... Args>
void LaunchClusterKernel(void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block, size_t shared_bytes,
                         gpuStream_t stream, Args&&... args) {
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = cluster.x;
  attributes[0].val.clusterDim.y = cluster.y;
  attributes[0].val.clusterDim.z = cluster.z;
  unsigned count = 1;
  if (ProgrammaticLaunchOnCurrentDevice()) {
    reach::Hit("GpuLaunch.programmatic");
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    count = 2;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);  // the error stays for CheckLaunch
}
#endif

}  // namespace vt::gpu
