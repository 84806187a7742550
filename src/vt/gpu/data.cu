// GPU kernels of the data-movement ops: Copy, Fill, Add, GatherRows.
//
// Shapes (op_args.h): Copy/Fill/Add take views of any shape and strides; Copy's
// src may be a GGUF block dtype (dequantized) and casts between any plain dtypes
// (integer pairs exactly). GatherRows: table [V, H] (rows may be strided, any
// dtype incl. block types), ids [T] i32/i64, out [T, H] float.
//
// One thread per element, grid-stride. Views are first collapsed (size-1 dims
// dropped, contiguous neighbours merged, see MakeJointLayouts), so the usual
// contiguous or row-strided cases index with one or two divisions per element.
// These kernels are memory-bound and simple on purpose; dtype is a run-time switch
// that is uniform across the launch.
#include "gpu_common.cuh"
#include "gpu_quant.cuh"
#include "vt/ops.h"

namespace vt::gpu {
namespace {

struct CopyParams {
  const void* src;
  void* dst;
  DType src_dtype, dst_dtype;
  Layout src_layout, dst_layout;
  int64_t count;
};

__global__ void CopyElements(CopyParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const bool quantized_src = IsBlockDType(p.src_dtype);
  const bool integer_pair = (p.src_dtype == DType::kI32 || p.src_dtype == DType::kI64) &&
                            (p.dst_dtype == DType::kI32 || p.dst_dtype == DType::kI64);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = p.src_layout.Offset(i), d = p.dst_layout.Offset(i);
    if (integer_pair) {
      const int64_t v = LoadIndex(p.src, p.src_dtype, s);
      if (p.dst_dtype == DType::kI64) static_cast<int64_t*>(p.dst)[d] = v;
      else static_cast<int32_t*>(p.dst)[d] = static_cast<int32_t>(v);
    } else {
      const float v = quantized_src ? DequantElement(static_cast<const uint8_t*>(p.src), p.src_dtype, s)
                                    : LoadAsFloat(p.src, p.src_dtype, s);
      StoreFromFloat(p.dst, p.dst_dtype, d, v);
    }
  }
}

void CopyGpu(const CopyArgs& a) {
  gpuStream_t stream = PrepareDevice(a.dst.device());
  const Tensor* views[2] = {&a.src, &a.dst};
  JointLayouts<2> layouts = MakeJointLayouts<2>(views, "Copy");
  CopyParams p{a.src.data(), a.dst.data(), a.src.dtype(), a.dst.dtype(), layouts.views[0], layouts.views[1],
               a.dst.numel()};
  LaunchKernel(CopyElements, GridStrideBlocks(p.count, a.dst.device(), "Copy"), kElementwiseThreads, 0, stream, p);
  CheckLaunch("Copy");
}

struct FillParams {
  void* dst;
  DType dtype;
  Layout layout;
  int64_t count;
  float float_value;
  int64_t int_value;
};

__global__ void FillElements(FillParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = p.layout.Offset(i);
    if (p.dtype == DType::kI64) static_cast<int64_t*>(p.dst)[d] = p.int_value;
    else if (p.dtype == DType::kI32) static_cast<int32_t*>(p.dst)[d] = static_cast<int32_t>(p.int_value);
    else StoreFromFloat(p.dst, p.dtype, d, p.float_value);
  }
}

void FillGpu(const FillArgs& a) {
  gpuStream_t stream = PrepareDevice(a.dst.device());
  // Integers are stored exactly (a double holds every int32 and ids up to 2^53);
  // the value is converted to an integer only for integer tensors (NaN poisons floats).
  const int64_t int_value = IsInteger(a.dst.dtype()) ? static_cast<int64_t>(a.value) : 0;
  FillParams p{a.dst.data(), a.dst.dtype(),  MakeLayout(a.dst, "Fill"),
               a.dst.numel(), static_cast<float>(a.value), int_value};
  LaunchKernel(FillElements, GridStrideBlocks(p.count, a.dst.device(), "Fill"), kElementwiseThreads, 0, stream, p);
  CheckLaunch("Fill");
}

template <typename T>
struct AddParams {
  const T* a;
  const T* b;
  T* out;
  Layout a_layout, b_layout, out_layout;
  int64_t count;
};

template <typename T>
__global__ void AddElements(AddParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float sum = ToFloat(p.a[p.a_layout.Offset(i)]) + ToFloat(p.b[p.b_layout.Offset(i)]);
    p.out[p.out_layout.Offset(i)] = FromFloat<T>(sum);
  }
}

void AddGpu(const AddArgs& a) {
  gpuStream_t stream = PrepareDevice(a.out.device());
  const Tensor* views[3] = {&a.a, &a.b, &a.out};
  JointLayouts<3> layouts = MakeJointLayouts<3>(views, "Add");
  DispatchFloat(a.out.dtype(), "Add", [&](auto tag) {
    using T = decltype(tag);
    AddParams<T> p{static_cast<const T*>(a.a.data()), static_cast<const T*>(a.b.data()), static_cast<T*>(a.out.data()),
                   layouts.views[0], layouts.views[1], layouts.views[2], a.out.numel()};
    LaunchKernel(AddElements<T>, GridStrideBlocks(p.count, a.out.device(), "Add"), kElementwiseThreads, 0, stream, p);
  });
  CheckLaunch("Add");
}

struct GatherParams {
  const void* table;
  DType table_dtype;
  int64_t table_rows, table_row_stride;
  const void* ids;
  DType ids_dtype;
  int64_t ids_stride;
  void* out;
  DType out_dtype;
  int64_t out_row_stride;
  int64_t tokens, width;
  BadIndexRecord* bad_index;
};

// An id outside [0, V) writes a NaN row instead of reading outside the table and
// is recorded for the host (gpu_runtime.h: reported at the next wait for the queue,
// so the ids are never read back here).
__global__ void GatherRowElements(GatherParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t count = p.tokens * p.width;
  const bool quantized = IsBlockDType(p.table_dtype);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / p.width, h = i % p.width;
    const int64_t id = LoadIndex(p.ids, p.ids_dtype, t * p.ids_stride);
    float v = NAN;
    if (id >= 0 && id < p.table_rows) {
      const int64_t e = id * p.table_row_stride + h;
      v = quantized ? DequantElement(static_cast<const uint8_t*>(p.table), p.table_dtype, e)
                    : LoadAsFloat(p.table, p.table_dtype, e);
    } else if (h == 0) {
      RecordBadIndex(p.bad_index, CheckedIndexOp::kGatherRows, t, id, p.table_rows, 1);
    }
    StoreFromFloat(p.out, p.out_dtype, t * p.out_row_stride + h, v);
  }
}

void GatherRowsGpu(const GatherRowsArgs& a) {
  gpuStream_t stream = PrepareDevice(a.out.device());
  GatherParams p{a.table.data(),    a.table.dtype(),  a.table.size(0), a.table.stride(0), a.ids.data(),
                 a.ids.dtype(),     a.ids.stride(0),  a.out.data(),    a.out.dtype(),     a.out.stride(0),
                 a.out.size(0),     a.out.size(1),    BadIndexRecordFor(a.out.device())};
  LaunchKernel(GatherRowElements, GridStrideBlocks(p.tokens * p.width, a.out.device(), "GatherRows"),
               kElementwiseThreads, 0, stream, p);
  CheckLaunch("GatherRows");
}

}  // namespace

VT_REGISTER_KERNEL(Copy, VT_GPU_DEVICE, CopyGpu);
VT_REGISTER_KERNEL(Fill, VT_GPU_DEVICE, FillGpu);
VT_REGISTER_KERNEL(Add, VT_GPU_DEVICE, AddGpu);
VT_REGISTER_KERNEL(GatherRows, VT_GPU_DEVICE, GatherRowsGpu);

}  // namespace vt::gpu
