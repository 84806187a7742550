// GPU kernels of the sampling helpers: LogSoftmax, Argmax.
//
// Shapes (op_args.h): LogSoftmax x [rows..., V] float (strided rows) -> out f32 of
// the same shape (out may be x itself when x is f32). Argmax x [R, V] float ->
// out [R] i32, the first index of the largest value.
//
// One block per row: the row max and the sum of exponentials are block reductions
// in f32, then each thread writes x - max - log(sum) for the same columns it read
// (so an in-place out needs no barrier). Argmax reduces (value, index) pairs with
// ties going to the lower index.
#include "gpu_common.cuh"
#include "vt/ops.h"

namespace vt::gpu {
namespace {

constexpr int kRowThreads = 256;

template <typename T>
struct SoftmaxParams {
  const T* x;
  float* out;
  Layout x_rows, out_rows;
  int64_t width;
};

template <typename T>
__global__ void __launch_bounds__(kRowThreads) LogSoftmaxRows(SoftmaxParams<T> p) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  const T* x = p.x + p.x_rows.Offset(blockIdx.x);
  float* out = p.out + p.out_rows.Offset(blockIdx.x);
  float local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) local_max = fmaxf(local_max, ToFloat(x[i]));
  const float row_max = BlockMax(local_max, scratch);
  float local_sum = 0.0f;
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) local_sum += expf(ToFloat(x[i]) - row_max);
  const float log_sum = logf(BlockSum(local_sum, scratch));
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) out[i] = ToFloat(x[i]) - row_max - log_sum;
}

void LogSoftmaxGpu(const LogSoftmaxArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  DispatchFloat(a.x.dtype(), "LogSoftmax", [&](auto tag) {
    using T = decltype(tag);
    SoftmaxParams<T> p{static_cast<const T*>(a.x.data()), a.out.data_ptr<float>(), MakeRowLayout(a.x, "LogSoftmax"),
                       MakeRowLayout(a.out, "LogSoftmax"), a.x.size(-1)};
    LogSoftmaxRows<T><<<GridFor(NumRows(a.x), 1, "LogSoftmax"), kRowThreads, 0, stream>>>(p);
  });
  CheckLaunch("LogSoftmax");
}

// The better of two candidates: larger value, then lower index.
__device__ inline void KeepLarger(float& value, int64_t& index, float other_value, int64_t other_index) {
  if (other_index >= 0 && (index < 0 || other_value > value || (other_value == value && other_index < index))) {
    value = other_value;
    index = other_index;
  }
}

template <typename T>
struct ArgmaxParams {
  const T* x;
  int32_t* out;
  int64_t row_stride, width;
};

template <typename T>
__global__ void __launch_bounds__(kRowThreads) ArgmaxRows(ArgmaxParams<T> p) {
  __shared__ float values[kMaxWarpsPerBlock];
  __shared__ int64_t indices[kMaxWarpsPerBlock];
  const T* x = p.x + blockIdx.x * p.row_stride;
  float best = -INFINITY;
  int64_t best_index = -1;
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) KeepLarger(best, best_index, ToFloat(x[i]), i);
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const float other = ShuffleXor(best, offset);
    const int other_index = ShuffleXor(static_cast<int>(best_index), offset);  // V < 2^31
    KeepLarger(best, best_index, other, other_index);
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    values[warp] = best;
    indices[warp] = best_index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / kWarpSize); ++w) {
      KeepLarger(best, best_index, values[w], indices[w]);
    }
    p.out[blockIdx.x] = static_cast<int32_t>(best_index < 0 ? 0 : best_index);
  }
}

void ArgmaxGpu(const ArgmaxArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  DispatchFloat(a.x.dtype(), "Argmax", [&](auto tag) {
    using T = decltype(tag);
    ArgmaxParams<T> p{static_cast<const T*>(a.x.data()), static_cast<int32_t*>(a.out.data()), a.x.stride(0),
                      a.x.size(1)};
    ArgmaxRows<T><<<GridFor(a.x.size(0), 1, "Argmax"), kRowThreads, 0, stream>>>(p);
  });
  CheckLaunch("Argmax");
}

}  // namespace

VT_REGISTER_KERNEL(LogSoftmax, VT_GPU_DEVICE, LogSoftmaxGpu);
VT_REGISTER_KERNEL(Argmax, VT_GPU_DEVICE, ArgmaxGpu);

}  // namespace vt::gpu
