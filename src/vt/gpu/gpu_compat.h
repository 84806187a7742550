// One kernel source for CUDA (nvcc) and HIP (clang++-15 -x hip, HIP 5.2).
//
// This header is the only place that knows which of the two compiles the file:
//   - runtime names: gpuMalloc, gpuStream_t, ... (launches use <<<>>> on both);
//   - the device type kernels register under (kGpuDeviceType: kCUDA or kROCM);
//   - the warp width as a compile-time constant of each device target
//     (kWarpSize: 32 on NVIDIA and RDNA, 64 on CDNA). The host pass of a HIP build
//     covers several targets at once, so host code never uses kWarpSize: block sizes
//     are multiples of 64, which suits every width;
//   - shuffles: CUDA's __shfl_xor_sync / __shfl_sync and HIP 5.2's __shfl_xor / __shfl
//     behind ShuffleXor and ShuffleFrom;
//   - cache hints: LoadOnce16 (streaming loads on CUDA);
//   - 16-bit floats: bf16_t and f16_t with ToFloat / FromFloat<T>.
// Shared kernels use nothing else from either runtime: no cub, no *_sync
// intrinsics, no __activemask / __ballot_sync.
#pragma once

#include <cstdint>

#include "vt/device.h"

#if defined(__HIP__)
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define VT_GPU_HIP 1
#define VT_GPU_DEVICE kROCM  // the DeviceType the shared kernels register under
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#define VT_GPU_DEVICE kCUDA
#endif

namespace vt::gpu {

#if VT_GPU_HIP
inline constexpr DeviceType kGpuDeviceType = DeviceType::kROCM;
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using bf16_t = hip_bfloat16;
using f16_t = __half;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr auto gpuMemcpyHostToDevice = hipMemcpyHostToDevice;
inline constexpr auto gpuMemcpyDeviceToHost = hipMemcpyDeviceToHost;
inline constexpr auto gpuMemcpyDeviceToDevice = hipMemcpyDeviceToDevice;
inline constexpr auto gpuStreamNonBlocking = hipStreamNonBlocking;
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuMemGetInfo hipMemGetInfo
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuDeviceProp_t hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
using gpuEvent_t = hipEvent_t;
inline constexpr unsigned gpuEventDisableTiming = hipEventDisableTiming;
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventDestroy hipEventDestroy
#define gpuHostAllocPortable(ptr, bytes) hipHostMalloc(ptr, bytes, hipHostMallocPortable)
#define gpuFreeHost hipHostFree
#else
inline constexpr DeviceType kGpuDeviceType = DeviceType::kCUDA;
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using bf16_t = __nv_bfloat16;
using f16_t = __half;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr auto gpuMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr auto gpuMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr auto gpuMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
inline constexpr auto gpuStreamNonBlocking = cudaStreamNonBlocking;
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuMemGetInfo cudaMemGetInfo
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuDeviceProp_t cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
using gpuEvent_t = cudaEvent_t;
inline constexpr unsigned gpuEventDisableTiming = cudaEventDisableTiming;
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventDestroy cudaEventDestroy
#define gpuHostAllocPortable(ptr, bytes) cudaHostAlloc(ptr, bytes, cudaHostAllocPortable)
#define gpuFreeHost cudaFreeHost
#endif

// Warp (wavefront) width of the target being compiled, for device code only.
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#elif VT_GPU_HIP
inline constexpr int kWarpSize = 64;  // host pass of a HIP build: never used by host code
#else
inline constexpr int kWarpSize = 32;
#endif
// Most warps a block of 1024 threads can have on any target (scratch arrays use it).
inline constexpr int kMaxWarpsPerBlock = 1024 / 32;

__device__ inline float ShuffleXor(float value, int lane_mask) {
#if VT_GPU_HIP
  return __shfl_xor(value, lane_mask);
#else
  return __shfl_xor_sync(0xffffffffu, value, lane_mask);
#endif
}

__device__ inline int ShuffleXor(int value, int lane_mask) {
#if VT_GPU_HIP
  return __shfl_xor(value, lane_mask);
#else
  return __shfl_xor_sync(0xffffffffu, value, lane_mask);
#endif
}

// `value` of lane `source_lane` of the warp, to every lane.
__device__ inline float ShuffleFrom(float value, int source_lane) {
#if VT_GPU_HIP
  return __shfl(value, source_lane);
#else
  return __shfl_sync(0xffffffffu, value, source_lane);
#endif
}

// A 16-byte load of data read once per kernel (decode weights): CUDA's streaming
// hint (evict first) keeps it from displacing reused data in L1; HIP: a plain load.
__device__ inline uint4 LoadOnce16(const uint4* p) {
#if VT_GPU_HIP
  return *p;
#else
  return __ldcs(p);
#endif
}

// A hint that `p`'s cache line will be read soon: fetched into L2 (CUDA); HIP: nothing.
__device__ inline void PrefetchToL2(const void* p) {
#if VT_GPU_HIP
  (void)p;
#else
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// ---- 16-bit floats -----------------------------------------------------------

__host__ __device__ inline float ToFloat(float v) { return v; }
__device__ inline float ToFloat(f16_t v) { return __half2float(v); }
#if VT_GPU_HIP
__host__ __device__ inline float ToFloat(bf16_t v) { return static_cast<float>(v); }
#else
__device__ inline float ToFloat(bf16_t v) { return __bfloat162float(v); }
#endif

template <typename T>
__device__ inline T FromFloat(float v);
template <>
__device__ inline float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ inline f16_t FromFloat<f16_t>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ inline bf16_t FromFloat<bf16_t>(float v) {
#if VT_GPU_HIP
  return bf16_t(v);  // round to nearest even, like vt::F32ToBf16
#else
  return __float2bfloat16_rn(v);
#endif
}

// An f16 stored as raw bits (GGUF block scales) -> f32.
__device__ inline float HalfBitsToFloat(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

}  // namespace vt::gpu
