// Reading weight rows of any MatMul weight dtype (f32/f16/bf16 or a GGUF block
// type) inside kernels: WeightAt decodes one value, WarpDotRow is a warp's dot
// product of one weight row with one activation row (lanes take interleaved
// elements, so a warp reads consecutive bytes of the row; a warp-sum finishes).
#pragma once

#include "gpu_common.cuh"
#include "gpu_quant.cuh"

namespace vt::gpu {

__device__ inline float WeightAt(const void* row, DType dtype, int64_t i) {
  return IsBlockDType(dtype) ? DequantElement(static_cast<const uint8_t*>(row), dtype, i) : LoadAsFloat(row, dtype, i);
}

// Address of weight row `r` of a matrix whose rows are `row_stride` elements apart.
__host__ __device__ inline const void* WeightRow(const void* base, int64_t r, int64_t row_stride, int64_t block_elems,
                                                 int64_t block_bytes) {
  return static_cast<const uint8_t*>(base) + ElementBytes(r * row_stride, block_elems, block_bytes);
}

// sum_k w_row[k] * x[k] over one warp; every lane gets the result.
template <typename X>
__device__ inline float WarpDotRow(const void* w_row, DType w_dtype, const X* x, int64_t length) {
  float partial = 0.0f;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t i = lane; i < length; i += kWarpSize) partial += WeightAt(w_row, w_dtype, i) * ToFloat(x[i]);
  return WarpSum(partial);
}

// A weight matrix passed to a kernel: base address, row stride (elements) and the
// dtype's block geometry (1 element in its own size for plain dtypes).
struct WeightMatrix {
  const void* data;
  DType dtype;
  int64_t row_stride;
  int64_t block_elems, block_bytes;

  __device__ const void* Row(int64_t r) const { return WeightRow(data, r, row_stride, block_elems, block_bytes); }
};

inline WeightMatrix MakeWeightMatrix(const void* data, DType dtype, int64_t row_stride) {
  return WeightMatrix{data, dtype, row_stride, Info(dtype).block_elems, Info(dtype).block_bytes};
}

}  // namespace vt::gpu
