// Device helpers shared by the kernel families: strided layouts passed by value,
// element loads/stores by run-time dtype, warp and block reductions, and the
// host-side dispatch from a vt::DType to a kernel template's element type.
#pragma once

#include <cstdint>
#include <string>

#include "gpu_compat.h"
#include "gpu_launch.cuh"
#include "gpu_runtime.h"
#include "vt/dtype.h"
#include "vt/tensor.h"

namespace vt::gpu {

inline constexpr int kMaxDims = 8;

// Sizes and strides (in elements) of a view, small enough to pass to a kernel by
// value. Offset(flat) maps a row-major flat index of the view to an element offset.
struct Layout {
  int ndim = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};

  __host__ __device__ int64_t Offset(int64_t flat) const {
    int64_t offset = 0;
    for (int d = ndim - 1; d > 0; --d) {
      offset += (flat % size[d]) * stride[d];
      flat /= size[d];
    }
    return ndim > 0 ? offset + flat * stride[0] : 0;
  }
};

// Layouts of several same-shaped views, with size-1 dims dropped and adjacent dims
// merged where every view stores them contiguously (most copies become 1-D or 2-D,
// which keeps the per-element index arithmetic short).
template <int N>
struct JointLayouts {
  Layout views[N];
};

template <int N>
JointLayouts<N> MakeJointLayouts(const Tensor* const (&tensors)[N], const char* op) {
  const Shape& shape = tensors[0]->shape();
  JointLayouts<N> out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (shape[d] == 1) continue;
    bool merge = out.views[0].ndim > 0;
    for (int t = 0; merge && t < N; ++t) {
      const Layout& l = out.views[t];
      merge = l.stride[l.ndim - 1] == shape[d] * tensors[t]->stride(d);
    }
    for (int t = 0; t < N; ++t) {
      Layout& l = out.views[t];
      if (merge) {
        l.size[l.ndim - 1] *= shape[d];
        l.stride[l.ndim - 1] = tensors[t]->stride(d);
      } else {
        if (l.ndim == kMaxDims) {
          throw Error(DescribeForError(op, *tensors[t]) + " has more than " + std::to_string(kMaxDims) +
                      " non-mergeable dims, which the GPU kernels do not index");
        }
        l.size[l.ndim] = shape[d];
        l.stride[l.ndim] = tensors[t]->stride(d);
        ++l.ndim;
      }
    }
  }
  return out;
}

inline Layout MakeLayout(const Tensor& t, const char* op) {
  const Tensor* views[1] = {&t};
  return MakeJointLayouts<1>(views, op).views[0];
}

// Layout of the rows of t (every dim but the last): Offset(r) is where row r starts.
inline Layout MakeRowLayout(const Tensor& t, const char* op) {
  if (t.ndim() <= 1) return Layout{};
  return MakeLayout(t.Slice(-1, 0, 1).Select(-1, 0), op);
}

inline int64_t NumRows(const Tensor& t) { return t.ndim() == 0 ? 1 : t.numel() / t.size(-1); }

__host__ __device__ inline bool IsBlockDType(DType dtype) {
  return dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 && dtype != DType::kI32 &&
         dtype != DType::kI64;
}

// ---- element access by run-time dtype (dtype is uniform across a launch) --------

// f(p) with `base` as a typed pointer of the float dtype `dtype` (f32, f16, else bf16).
// For loops of loads: one switch outside the loop lets the loads issue back to back,
// where LoadAsFloat's switch per value puts each load in a branch of its own and the
// thread waits a memory latency per value (7 us for a [1, 4096] AddRmsNorm).
template <typename F>
__device__ inline void WithFloatPointer(const void* base, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(static_cast<const float*>(base)); break;
    case DType::kF16: f(static_cast<const f16_t*>(base)); break;
    default: f(static_cast<const bf16_t*>(base)); break;
  }
}

__device__ inline float LoadAsFloat(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kF16: return ToFloat(static_cast<const f16_t*>(base)[i]);
    case DType::kBF16: return ToFloat(static_cast<const bf16_t*>(base)[i]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    case DType::kI64: return static_cast<float>(static_cast<const int64_t*>(base)[i]);
    default: return 0.0f;  // block dtypes are decoded by DequantElement
  }
}

__device__ inline void StoreFromFloat(void* base, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kF16: static_cast<f16_t*>(base)[i] = FromFloat<f16_t>(v); break;
    case DType::kBF16: static_cast<bf16_t*>(base)[i] = FromFloat<bf16_t>(v); break;
    case DType::kI32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    default: break;
  }
}

__device__ inline int64_t LoadIndex(const void* base, DType dtype, int64_t i) {
  return dtype == DType::kI64 ? static_cast<const int64_t*>(base)[i]
                              : static_cast<int64_t>(static_cast<const int32_t*>(base)[i]);
}

// Records the first out-of-range index of the device (gpu_runtime.h): the first
// thread to flip `found` writes the rest; the host reads the record only after the
// queue has finished, so no fence is needed.
__device__ inline void RecordBadIndex(BadIndexRecord* record, CheckedIndexOp op, int64_t position, int64_t value,
                                      int64_t bound, int64_t columns) {
  if (atomicCAS(&record->found, 0, 1) != 0) return;
  record->op = static_cast<int32_t>(op);
  record->position = position;
  record->value = value;
  record->bound = bound;
  record->columns = columns;
}

// ---- reductions ------------------------------------------------------------------

__device__ inline float WarpSum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) v += ShuffleXor(v, offset);
  return v;
}

__device__ inline float WarpMax(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) v = fmaxf(v, ShuffleXor(v, offset));
  return v;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple of
// the warp width; `scratch` is __shared__ float[kMaxWarpsPerBlock]. The leading
// barrier lets back-to-back reductions reuse the same scratch.
__device__ inline float BlockSum(float v, float* scratch) {
  v = WarpSum(v);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarpSize) ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

__device__ inline float BlockMax(float v, float* scratch) {
  v = WarpMax(v);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarpSize) ? scratch[lane] : -INFINITY;
  return WarpMax(v);
}

__device__ inline float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ inline float Silu(float x) { return x / (1.0f + expf(-x)); }

// ---- host: element type of a float dtype -----------------------------------------

// Calls fn(T{}) with T = float, f16_t or bf16_t for the dtype.
template <typename Fn>
void DispatchFloat(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(float{}); return;
    case DType::kF16: fn(f16_t{}); return;
    case DType::kBF16: fn(bf16_t{}); return;
    default:
      throw Error(std::string("vt::") + op + " on " + DeviceTypeName(kGpuDeviceType) + ": dtype " + DTypeName(dtype) +
                  " has no GPU kernel (expected f32, f16 or bf16)");
  }
}

}  // namespace vt::gpu
