// GPU kernels of the norms and gated activations: RmsNorm, AddRmsNorm,
// GatedRmsNorm, L2Norm, SiluMul, SigmoidMul.
//
// Shapes (op_args.h): x, out [rows..., D] with any row strides and a unit-stride
// last dim (out may be the same view as x); weight [D] of any float dtype;
// AddRmsNorm's residual [T, D] is updated in place to residual + x (rounded to its
// dtype, and the norm reads that stored value); GatedRmsNorm's z like x;
// SigmoidMul's gate [rows..., D] or [rows..., 1].
//
// Norms: one block per row (one warp per row for rows of at most 8 x the warp
// width); the sum of squares is a block (warp) reduction in f32, then the output is
// written. Rows of up to kNormValuesPerThread x 1024 values
// (NormRowsInRegisters) are read once into registers, each thread holding up to 8
// values, every load of the row issued before any store: a decode step's rows are
// single [1, 4096] rows, and a thread walking 16 values through a load-store loop
// waits a memory latency per value, because its stores may alias its next loads
// (6.6 us per norm, 1 ms of the 9B decode step, bench/gpu_notes.md). Longer rows
// stream twice through the row (NormRows; the second pass hits L1/L2). Each thread
// touches the same columns in both passes, so an in-place out needs no barrier.
// Activations: one thread per element. All arithmetic is f32.
#include "gpu_common.cuh"
#include "vt/ops.h"

namespace vt::gpu {
namespace {

// Threads per row of the streaming row kernel: enough lanes for the row, a multiple of 64.
int RowThreads(int64_t dim) { return dim >= 1024 ? 256 : dim >= 256 ? 128 : 64; }

constexpr int kNormValuesPerThread = 8;
constexpr int kMaxNormThreads = 1024;
constexpr int64_t kMaxRegisterRow = int64_t{kNormValuesPerThread} * kMaxNormThreads;
constexpr int kNormWarpRowsThreads = 256;  // block of the one-warp-per-row kernel

// Threads of the register kernel: one per 8 values, a multiple of 64, at least 64.
int RegisterRowThreads(int64_t dim) {
  const int64_t threads = (dim + kNormValuesPerThread - 1) / kNormValuesPerThread;
  return static_cast<int>(threads <= 64 ? 64 : (threads + 63) / 64 * 64);
}

template <typename T>
struct RowNormParams {
  const T* x;
  const T* z;  // GatedRmsNorm's gate input, else null
  T* residual;  // AddRmsNorm only, else null
  T* out;
  Layout x_rows, z_rows, residual_rows, out_rows;
  const void* weight;  // null for L2Norm; [D] with any stride
  DType weight_dtype;
  int64_t weight_stride;
  int64_t dim, rows;
  float eps;
  float weight_offset;
  float scale;  // L2Norm's scale
};

enum class NormKind { kRms, kAddRms, kGatedRms, kL2 };

template <typename T, NormKind kKind>
__global__ void NormRows(RowNormParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float scratch[kMaxWarpsPerBlock];
  const int64_t row = blockIdx.x;
  const T* x = p.x + p.x_rows.Offset(row);
  T* out = p.out + p.out_rows.Offset(row);
  T* residual = kKind == NormKind::kAddRms ? p.residual + p.residual_rows.Offset(row) : nullptr;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
    float v = ToFloat(x[i]);
    if constexpr (kKind == NormKind::kAddRms) {
      const T stored = FromFloat<T>(ToFloat(residual[i]) + v);
      residual[i] = stored;
      v = ToFloat(stored);
    }
    sum_sq += v * v;
  }
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv = kKind == NormKind::kL2 ? rsqrtf(sum_sq + p.eps) * p.scale : rsqrtf(sum_sq / p.dim + p.eps);
  const T* z = kKind == NormKind::kGatedRms ? p.z + p.z_rows.Offset(row) : nullptr;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
    const float v = ToFloat(kKind == NormKind::kAddRms ? residual[i] : x[i]);
    float y = v * inv;
    if constexpr (kKind != NormKind::kL2) {
      y *= LoadAsFloat(p.weight, p.weight_dtype, i * p.weight_stride) + p.weight_offset;
    }
    if constexpr (kKind == NormKind::kGatedRms) y *= Silu(ToFloat(z[i]));
    out[i] = FromFloat<T>(y);
  }
}

// Value j of this thread is column lane + j * lanes (coalesced for each j); columns
// past the row read as 0.
template <typename T>
__device__ inline void LoadThreadValues(const T* row, int64_t dim, int lane, int lanes,
                                        float (&values)[kNormValuesPerThread]) {
#pragma unroll
  for (int j = 0; j < kNormValuesPerThread; ++j) {
    const int64_t i = lane + static_cast<int64_t>(j) * lanes;
    values[j] = i < dim ? ToFloat(row[i]) : 0.0f;
  }
}

// The norm weight's values of this thread's columns, + weight_offset, all loads issued
// before the first use (WithFloatPointer, gpu_common.cuh).
template <typename T>
__device__ inline void LoadWeightValues(const RowNormParams<T>& p, int lane, int lanes,
                                        float (&factor)[kNormValuesPerThread]) {
  WithFloatPointer(p.weight, p.weight_dtype, [&](const auto* w) {
    using W = std::remove_cv_t<std::remove_pointer_t<decltype(w)>>;
    W raw[kNormValuesPerThread];
#pragma unroll
    for (int j = 0; j < kNormValuesPerThread; ++j) {
      const int64_t i = lane + static_cast<int64_t>(j) * lanes;
      raw[j] = i < p.dim ? w[i * p.weight_stride] : W{};
    }
#pragma unroll
    for (int j = 0; j < kNormValuesPerThread; ++j) factor[j] = ToFloat(raw[j]) + p.weight_offset;
  });
}

// kPerWarp: rows of at most 8 x warp width values (the GDN and attention heads'
// q/k norms, 128-256 values; a 2048-token 9B prefill ran 153 norms at 44 us each
// with one block per short row): one warp per row, blockDim / warp rows per block,
// the sum a warp reduction. Otherwise one block per row.
template <typename T, NormKind kKind, bool kPerWarp>
__global__ void __launch_bounds__(kMaxNormThreads) NormRowsInRegisters(RowNormParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float scratch[kMaxWarpsPerBlock];
  const int lanes = kPerWarp ? kWarpSize : static_cast<int>(blockDim.x);
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int64_t row = kPerWarp ? blockIdx.x * static_cast<int64_t>(blockDim.x / kWarpSize) + threadIdx.x / kWarpSize
                               : static_cast<int64_t>(blockIdx.x);
  if (kPerWarp && row >= p.rows) return;  // no block barrier follows in the warp kernel
  const T* x = p.x + p.x_rows.Offset(row);
  T* out = p.out + p.out_rows.Offset(row);
  float v[kNormValuesPerThread];
  LoadThreadValues(x, p.dim, lane, lanes, v);
  // The weights (and z) depend neither on the sum nor on the residual: their loads
  // go out with x's, before any store (which might alias them) and before the
  // block reduction waits.
  float factor[kNormValuesPerThread];  // weight (+ offset), times silu(z) for GatedRmsNorm
  if constexpr (kKind != NormKind::kL2) {
    LoadWeightValues(p, lane, lanes, factor);
  } else {
#pragma unroll
    for (int j = 0; j < kNormValuesPerThread; ++j) factor[j] = 1.0f;
  }
  if constexpr (kKind == NormKind::kGatedRms) {
    float z[kNormValuesPerThread];
    LoadThreadValues(p.z + p.z_rows.Offset(row), p.dim, lane, lanes, z);
#pragma unroll
    for (int j = 0; j < kNormValuesPerThread; ++j) factor[j] *= Silu(z[j]);
  }
  if constexpr (kKind == NormKind::kAddRms) {
    T* residual = p.residual + p.residual_rows.Offset(row);
    float r[kNormValuesPerThread];
    LoadThreadValues(residual, p.dim, lane, lanes, r);
#pragma unroll
    for (int j = 0; j < kNormValuesPerThread; ++j) {
      const int64_t i = lane + static_cast<int64_t>(j) * lanes;
      const T stored = FromFloat<T>(r[j] + v[j]);  // the norm reads the value as stored
      v[j] = ToFloat(stored);
      if (i < p.dim) residual[i] = stored;
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormValuesPerThread; ++j) sum_sq += v[j] * v[j];
  sum_sq = kPerWarp ? WarpSum(sum_sq) : BlockSum(sum_sq, scratch);
  const float inv = kKind == NormKind::kL2 ? rsqrtf(sum_sq + p.eps) * p.scale : rsqrtf(sum_sq / p.dim + p.eps);
#pragma unroll
  for (int j = 0; j < kNormValuesPerThread; ++j) {
    const int64_t i = lane + static_cast<int64_t>(j) * lanes;
    if (i < p.dim) out[i] = FromFloat<T>(v[j] * inv * factor[j]);
  }
}

template <NormKind kKind>
void LaunchNorm(const char* op, const Tensor& x, const Tensor* z, const Tensor* residual, const Tensor* weight,
                const Tensor& out, float eps, float weight_offset, float scale) {
  gpuStream_t stream = PrepareDevice(out.device());
  const int64_t dim = x.size(-1), rows = NumRows(x);
  DispatchFloat(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    RowNormParams<T> p{};
    p.x = static_cast<const T*>(x.data());
    p.x_rows = MakeRowLayout(x, op);
    if (z != nullptr) {
      p.z = static_cast<const T*>(z->data());
      p.z_rows = MakeRowLayout(*z, op);
    }
    if (residual != nullptr) {
      p.residual = static_cast<T*>(residual->data());
      p.residual_rows = MakeRowLayout(*residual, op);
    }
    p.out = static_cast<T*>(out.data());
    p.out_rows = MakeRowLayout(out, op);
    if (weight != nullptr) {
      p.weight = weight->data();
      p.weight_dtype = weight->dtype();
      p.weight_stride = weight->stride(0);
    }
    p.dim = dim;
    p.eps = eps;
    p.weight_offset = weight_offset;
    p.scale = scale;
    p.rows = rows;
    const int warp = WarpSize(out.device());
    if (dim <= int64_t{kNormValuesPerThread} * warp) {
      const int64_t rows_per_block = kNormWarpRowsThreads / warp;
      LaunchKernel(NormRowsInRegisters<T, kKind, true>, GridFor(rows, rows_per_block, op), kNormWarpRowsThreads, 0,
                   stream, p);
    } else if (dim <= kMaxRegisterRow) {
      LaunchKernel(NormRowsInRegisters<T, kKind, false>, GridFor(rows, 1, op), RegisterRowThreads(dim), 0, stream, p);
    } else {
      LaunchKernel(NormRows<T, kKind>, GridFor(rows, 1, op), RowThreads(dim), 0, stream, p);
    }
  });
  CheckLaunch(op);
}

void RmsNormGpu(const RmsNormArgs& a) {
  LaunchNorm<NormKind::kRms>("RmsNorm", a.x, nullptr, nullptr, &a.weight, a.out, a.eps, a.weight_offset, 1.0f);
}

void AddRmsNormGpu(const AddRmsNormArgs& a) {
  LaunchNorm<NormKind::kAddRms>("AddRmsNorm", a.x, nullptr, &a.residual, &a.weight, a.out, a.eps, a.weight_offset,
                                1.0f);
}

void GatedRmsNormGpu(const GatedRmsNormArgs& a) {
  LaunchNorm<NormKind::kGatedRms>("GatedRmsNorm", a.x, &a.z, nullptr, &a.weight, a.out, a.eps, 0.0f, 1.0f);
}

void L2NormGpu(const L2NormArgs& a) {
  LaunchNorm<NormKind::kL2>("L2Norm", a.x, nullptr, nullptr, nullptr, a.out, a.eps, 0.0f, a.scale);
}

// ---- gated activations -------------------------------------------------------

template <typename T>
struct GateParams {
  const T* x;     // SiluMul: gate; SigmoidMul: x
  const T* other;  // SiluMul: up; SigmoidMul: gate (any float dtype, see gate_dtype)
  T* out;
  Layout x_rows, other_rows, out_rows;
  DType other_dtype;
  int64_t dim;
  int64_t other_dim;  // SigmoidMul: D or 1 (broadcast)
  int64_t count;
};

// kSilu: out = silu(x) * other; else out = x * sigmoid(other).
template <typename T, bool kSilu>
__global__ void GatedElements(GateParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / p.dim, col = i % p.dim;
    const float x = ToFloat(p.x[p.x_rows.Offset(row) + col]);
    const float other =
        LoadAsFloat(p.other, p.other_dtype, p.other_rows.Offset(row) + (p.other_dim == 1 ? 0 : col));
    p.out[p.out_rows.Offset(row) + col] = FromFloat<T>(kSilu ? Silu(x) * other : x * Sigmoid(other));
  }
}

template <bool kSilu>
void LaunchGated(const char* op, const Tensor& x, const Tensor& other, const Tensor& out) {
  gpuStream_t stream = PrepareDevice(out.device());
  DispatchFloat(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    GateParams<T> p{static_cast<const T*>(x.data()), static_cast<const T*>(other.data()), static_cast<T*>(out.data()),
                    MakeRowLayout(x, op), MakeRowLayout(other, op), MakeRowLayout(out, op), other.dtype(),
                    x.size(-1), other.size(-1), x.numel()};
    LaunchKernel(GatedElements<T, kSilu>, GridStrideBlocks(p.count, out.device(), op), kElementwiseThreads, 0, stream,
                 p);
  });
  CheckLaunch(op);
}

void SiluMulGpu(const SiluMulArgs& a) { LaunchGated<true>("SiluMul", a.gate, a.up, a.out); }
void SigmoidMulGpu(const SigmoidMulArgs& a) { LaunchGated<false>("SigmoidMul", a.x, a.gate, a.out); }

}  // namespace

VT_REGISTER_KERNEL(RmsNorm, VT_GPU_DEVICE, RmsNormGpu);
VT_REGISTER_KERNEL(AddRmsNorm, VT_GPU_DEVICE, AddRmsNormGpu);
VT_REGISTER_KERNEL(GatedRmsNorm, VT_GPU_DEVICE, GatedRmsNormGpu);
VT_REGISTER_KERNEL(L2Norm, VT_GPU_DEVICE, L2NormGpu);
VT_REGISTER_KERNEL(SiluMul, VT_GPU_DEVICE, SiluMulGpu);
VT_REGISTER_KERNEL(SigmoidMul, VT_GPU_DEVICE, SigmoidMulGpu);

}  // namespace vt::gpu
