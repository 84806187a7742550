// MatMul on CUDA: cuBLAS for large dense GEMMs, our kernels (src/vt/gpu/matmul.cu)
// for the rest; matmul_choice.h decides.
//
// cuBLAS is column-major, so the row-major out[M,N] = x[M,K] . w[N,K]^T is
// computed as out^T (N x M, ld = out row stride) = op(w) (N x K) . x^T (K x M):
// w is read as a K x N column-major matrix (ld = w row stride) and transposed,
// x as K x M column-major (ld = x row stride). f32 inputs use
// CUBLAS_COMPUTE_32F_PEDANTIC (true f32, never TF32, so the f32 contract
// tolerances hold); f16/bf16 inputs use f32 accumulation on the tensor cores,
// stored in out's dtype (x's, or f32: the f32 sums unrounded).
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include "gpu_runtime.h"
#include "matmul.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {
namespace {

[[noreturn]] void ThrowCublas(cublasStatus_t status, const MatMulArgs& a) {
  throw Error("vt::MatMul on " + a.out.device().ToString() + ": cuBLAS failed with " + cublasGetStatusName(status) +
              " (" + cublasGetStatusString(status) + ") for x " + a.x.Describe() + ", w " + a.w.Describe());
}

// One handle per device, bound to the device's stream; created on first use.
cublasHandle_t HandleFor(Device device, gpuStream_t stream, const MatMulArgs& a) {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  if (handles.size() <= static_cast<size_t>(device.index)) handles.resize(device.index + 1, nullptr);
  cublasHandle_t& handle = handles[device.index];
  if (handle == nullptr) {
    cublasStatus_t status = cublasCreate(&handle);
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasSetStream(handle, stream);
    if (status != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      ThrowCublas(status, a);
    }
  }
  return handle;
}

cudaDataType CudaDataType(DType dtype) {
  switch (dtype) {
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// cuBLAS takes int sizes and leading dimensions of at least the row length.
bool CublasAccepts(const MatMulArgs& a) {
  for (int64_t v : {a.x.size(0), a.w.size(0), a.x.size(1), a.x.stride(0), a.w.stride(0), a.out.stride(0)}) {
    if (v > INT_MAX) return false;
  }
  const auto rows_apart = [](const Tensor& t) { return t.size(0) == 1 || t.stride(0) >= t.size(1); };
  return rows_apart(a.x) && rows_apart(a.w) && rows_apart(a.out);
}

void CublasMatMul(const MatMulArgs& a) {
  gpuStream_t stream = PrepareDevice(a.out.device());
  cublasHandle_t handle = HandleFor(a.out.device(), stream, a);
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType type = CudaDataType(a.x.dtype()), out_type = CudaDataType(a.out.dtype());
  const cublasComputeType_t compute =
      a.x.dtype() == DType::kF32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  const auto m = static_cast<int>(a.x.size(0)), n = static_cast<int>(a.w.size(0)), k = static_cast<int>(a.x.size(1));
  // A row-major [rows, K] matrix with one row is stored with any stride; cuBLAS
  // still requires ld >= K.
  const auto ld = [k](const Tensor& t) { return static_cast<int>(t.size(0) == 1 ? k : t.stride(0)); };
  const cublasStatus_t status =
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, a.w.data(), type, ld(a.w), a.x.data(), type,
                   ld(a.x), &beta, a.out.data(), out_type, a.out.size(0) == 1 ? n : static_cast<int>(a.out.stride(0)),
                   compute, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) ThrowCublas(status, a);
  reach::Hit("MatMulGpu.cublas");
}

// Weights cuBLAS cannot read as they are: each chunk of weight rows (at most
// kDenseChunkBytes once made dense) is written by `fill(row0, part)` into a dense
// [rows, K] scratch of x's dtype, then multiplied by cuBLAS into its columns of out.
// One scratch chunk serves every round: the device's one queue runs them in order.
constexpr int64_t kDenseChunkBytes = int64_t{64} << 20;

template <typename Fill>
void ChunkedDenseMatMul(const Tensor& x, const Tensor& w, const Tensor& out, Fill&& fill) {
  const int64_t n = w.size(0), k = w.size(1);
  const int64_t chunk_rows = std::max<int64_t>(1, std::min(n, kDenseChunkBytes / (k * BytesFor(x.dtype(), 1))));
  const Tensor dense = Tensor::Empty({chunk_rows, k}, x.dtype(), out.device());
  for (int64_t row0 = 0; row0 < n; row0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, n - row0);
    const Tensor part = dense.Slice(0, 0, rows);
    fill(row0, part);
    CublasMatMul({.x = x, .w = part, .out = out.Slice(1, row0, row0 + rows)});
  }
}

// Block weights at prefill sizes, decoded into x's dtype chunk by chunk.
void DequantCublasMatMul(const MatMulArgs& a) {
  ChunkedDenseMatMul(a.x, a.w, a.out, [&](int64_t row0, const Tensor& part) { DequantizeWeightRows(a.w, row0, part); });
  reach::Hit("MatMulGpu.dequant_cublas");
}

// Float operands of two dtypes (one of them f32): the 16-bit one widened to f32
// (x whole; w chunk by chunk), cuBLAS in true f32 into out, or into an f32 scratch
// narrowed to out's dtype afterwards.
void CastCublasMatMul(const MatMulArgs& a) {
  const Device device = a.out.device();
  const int64_t m = a.x.size(0), n = a.w.size(0), k = a.x.size(1);
  Tensor x = a.x;
  if (x.dtype() != DType::kF32) {
    x = Tensor::Empty({m, k}, DType::kF32, device);
    Copy({.src = a.x, .dst = x});
  }
  const bool out_f32 = a.out.dtype() == DType::kF32;
  const Tensor out = out_f32 ? a.out : Tensor::Empty({m, n}, DType::kF32, device);
  if (a.w.dtype() == DType::kF32) {
    CublasMatMul({.x = x, .w = a.w, .out = out});
  } else {
    ChunkedDenseMatMul(x, a.w, out, [&](int64_t row0, const Tensor& part) {
      Copy({.src = a.w.Slice(0, row0, row0 + part.size(0)), .dst = part});
    });
  }
  if (!out_f32) Copy({.src = out, .dst = a.out});
  reach::Hit("MatMulGpu.cast_cublas");
}

void MatMulCuda(const MatMulArgs& a) {
  const MatMulShape shape = DescribeMatMul(a, CublasAccepts(a));
  const MatMulKernel kernel = ApplyBlockVariant(
      ApplySkinnyVariant(ChooseMatMul(shape), shape, tuning::Variant(kSkinnyVariantFamily)), shape,
      tuning::Variant(kBlockVariantFamily));
  if (kernel == MatMulKernel::kVendorBlas) {
    CublasMatMul(a);
  } else if (kernel == MatMulKernel::kDequantVendorBlas) {
    DequantCublasMatMul(a);
  } else if (kernel == MatMulKernel::kCastVendorBlas) {
    CastCublasMatMul(a);
  } else if (a.out.dtype() != a.x.dtype()) {
    MatMulCuda(WithWidenedX(a));  // f32 out from 16-bit x on our kernels (decode sizes)
  } else {
    RunOwnMatMul(a, kernel);
  }
}

}  // namespace

VT_REGISTER_KERNEL(MatMul, kCUDA, MatMulCuda);

}  // namespace vt::gpu
