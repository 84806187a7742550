// GPU kernels of the sampling helpers: LogSoftmax, Argmax.
//
// Shapes (op_args.h): LogSoftmax x [rows..., V] float (strided rows) -> out f32 of
// the same shape (out may be x itself when x is f32). Argmax x [R, V] float ->
// out [R] i32, the first index of the largest value.
//
// One block per row: the row max and the sum of exponentials are block reductions
// in f32, then each thread writes x - max - log(sum) for the same columns it read
// (so an in-place out needs no barrier). Argmax reduces (value, index) pairs with
// ties going to the lower index, over chunks of a row in parallel (see ArgmaxGpu).
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
  WaitForPriorKernels();  // gpu_launch.cuh
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
    LaunchKernel(LogSoftmaxRows<T>, GridFor(NumRows(a.x), 1, "LogSoftmax"), kRowThreads, 0, stream, p);
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
  int64_t row_stride, width;
  int64_t chunk;               // values per block of the first pass
  float* partial_values;       // [R, chunks] (two passes only)
  int32_t* partial_indices;    // [R, chunks]
  int32_t* out;                // [R] (one pass only)
  const uint32_t* allowed;     // [R, allowed_words] bitmask, or null: every index
  int64_t allowed_words;
};

// The best (value, index) of the block's threads (ties: lower index) into thread 0.
__device__ inline void BlockBest(float& best, int64_t& best_index) {
  __shared__ float values[kMaxWarpsPerBlock];
  __shared__ int64_t indices[kMaxWarpsPerBlock];
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
    for (int w = 1; w < static_cast<int>(blockDim.x / kWarpSize); ++w) KeepLarger(best, best_index, values[w], indices[w]);
  }
}

// grid (R, chunks): block (r, c) takes values [c chunk, (c + 1) chunk) of row r.
// One chunk: the result goes to out; several: to the partials for ArgmaxOfPartials.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) ArgmaxChunks(ArgmaxParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t row = blockIdx.x, begin = static_cast<int64_t>(blockIdx.y) * p.chunk;
  const int64_t end = begin + p.chunk < p.width ? begin + p.chunk : p.width;
  const T* x = p.x + row * p.row_stride;
  float best = -INFINITY;
  int64_t best_index = -1;
  const uint32_t* allowed = p.allowed ? p.allowed + row * p.allowed_words : nullptr;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (allowed && !((allowed[i >> 5] >> (i & 31)) & 1u)) continue;
    KeepLarger(best, best_index, ToFloat(x[i]), i);
  }
  BlockBest(best, best_index);
  if (threadIdx.x != 0) return;
  if (gridDim.y == 1) {
    p.out[row] = static_cast<int32_t>(best_index < 0 ? 0 : best_index);
  } else {
    p.partial_values[row * gridDim.y + blockIdx.y] = best;
    p.partial_indices[row * gridDim.y + blockIdx.y] = static_cast<int32_t>(best_index);
  }
}

// grid R: the row's chunk results, in chunk order, reduced to its index.
__global__ void __launch_bounds__(kRowThreads) ArgmaxOfPartials(const float* values, const int32_t* indices,
                                                                int64_t chunks, int32_t* out) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t row = blockIdx.x;
  float best = -INFINITY;
  int64_t best_index = -1;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    KeepLarger(best, best_index, values[row * chunks + c], indices[row * chunks + c]);
  }
  BlockBest(best, best_index);
  if (threadIdx.x == 0) out[row] = static_cast<int32_t>(best_index < 0 ? 0 : best_index);
}

// A row of a vocabulary (248320 values) read by one block is latency-bound on one
// multiprocessor; chunks of kArgmaxChunk values spread it over the device, and a
// second small launch combines the chunks. Rows up to one chunk take one launch.
constexpr int64_t kArgmaxChunk = 8192;

void ArgmaxGpu(const ArgmaxArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const int64_t rows = a.x.size(0), width = a.x.size(1);
  const int64_t chunks = (width + kArgmaxChunk - 1) / kArgmaxChunk;
  Tensor partial_values, partial_indices;
  if (chunks > 1) {
    partial_values = Tensor::Empty({rows, chunks}, DType::kF32, a.x.device());
    partial_indices = Tensor::Empty({rows, chunks}, DType::kI32, a.x.device());
  }
  DispatchFloat(a.x.dtype(), "Argmax", [&](auto tag) {
    using T = decltype(tag);
    ArgmaxParams<T> p{static_cast<const T*>(a.x.data()),
                      a.x.stride(0),
                      width,
                      kArgmaxChunk,
                      chunks > 1 ? partial_values.data_ptr<float>() : nullptr,
                      chunks > 1 ? static_cast<int32_t*>(partial_indices.data()) : nullptr,
                      static_cast<int32_t*>(a.out.data()),
                      a.allowed.defined() ? static_cast<const uint32_t*>(a.allowed.data()) : nullptr,
                      a.allowed.defined() ? a.allowed.size(1) : 0};
    const dim3 grid(GridFor(rows, 1, "Argmax"), GridFor(chunks, 1, "Argmax"));
    LaunchKernel(ArgmaxChunks<T>, grid, kRowThreads, 0, stream, p);
  });
  if (chunks > 1) {
    LaunchKernel(ArgmaxOfPartials, GridFor(rows, 1, "Argmax"), kRowThreads, 0, stream, partial_values.data_ptr<float>(),
                 static_cast<const int32_t*>(partial_indices.data()), chunks, static_cast<int32_t*>(a.out.data()));
  }
  CheckLaunch("Argmax");
}

}  // namespace

VT_REGISTER_KERNEL(LogSoftmax, VT_GPU_DEVICE, LogSoftmaxGpu);
VT_REGISTER_KERNEL(Argmax, VT_GPU_DEVICE, ArgmaxGpu);

}  // namespace vt::gpu
