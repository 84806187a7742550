// kQuantMma: MatMul of block weights on the int8 tensor cores (CUDA), for the batch
// sizes between the int8 GEMV and decoding the weights for cuBLAS (matmul_choice.h).
//
// x [M, K] (any float dtype, strided rows) is quantized per 32 values to XBlocks;
// the grid is (ceil(N / 64), ceil(M / rows)) blocks of quant_mma.cuh tiles, 16 rows
// a tile up to 16 rows of x and 64 above, so that a small batch does not run three
// idle warps per tile. Each weight block is read from memory once per row tile.
// HIP has no mma.sync: QuantMmaAccepts is false there.
#include "matmul.h"
#include "quant_mma.cuh"
#include "vt/reach.h"

namespace vt::gpu {

#if !VT_GPU_HIP
namespace {

template <DType kW, int kWarpsM, typename X>
__global__ void __launch_bounds__(kQmmaThreads) QuantMmaKernel(QmmaOperands op, int64_t m, X* out,
                                                               int64_t out_row_stride) {
  using Shared = QmmaShared<kWarpsM, false>;
  using Acc = QmmaAccumulators<kWarpsM, false>;
  __shared__ Shared sh;
  __shared__ int32_t rows[Shared::kRows];
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * Shared::kRows;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kQmmaCols;
  for (int r = static_cast<int>(threadIdx.x); r < Shared::kRows; r += kQmmaThreads) {
    rows[r] = m0 + r < m ? static_cast<int32_t>(m0 + r) : -1;
  }
  Acc acc;
  QmmaAccumulate<kW, kWarpsM, false>(op, rows, n0, sh, acc);
#pragma unroll
  for (int t = 0; t < Acc::kTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = m0 + Acc::Row(i), col = n0 + Acc::Column(t, i);
      if (row < m && col < op.columns) out[row * out_row_stride + col] = FromFloat<X>(acc.c[0][t][i]);
    }
  }
}

template <DType kW, int kWarpsM>
void LaunchQuantMma(const MatMulArgs& a, const QmmaOperands& op, gpuStream_t stream) {
  const int64_t m = a.x.size(0);
  const dim3 grid(GridFor(op.columns, kQmmaCols, "MatMul"), GridFor(m, 16 * kWarpsM, "MatMul"));
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    QuantMmaKernel<kW, kWarpsM, X>
        <<<grid, kQmmaThreads, 0, stream>>>(op, m, static_cast<X*>(a.out.data()), a.out.stride(0));
  });
}

}  // namespace

bool QuantMmaAccepts(const MatMulArgs& a) {
  if (!DispatchQmmaWeight(a.w.dtype(), [](auto) {})) return false;
  // The lanes' alignment conditions are the tiles' too (2-byte blocks, 4-byte K-quant rows).
  return QuantLanesRead(a.w) && reinterpret_cast<uintptr_t>(a.w.data()) % 2 == 0;
}

void RunQuantMma(const MatMulArgs& a) {
  reach::Hit("MatMulGpu.quant_mma");
  const Tensor xq = QuantizeActivations(a.x);
  gpuStream_t stream = PrepareDevice(a.out.device());
  QmmaOperands op{};
  op.x = static_cast<const XBlock*>(xq.data());
  op.x_row_blocks = a.x.size(1) / kXBlockValues;
  op.w[0] = static_cast<const uint8_t*>(a.w.data());
  op.w_row_bytes = BytesFor(a.w.dtype(), a.w.stride(0));
  op.columns = a.w.size(0);
  op.kblocks = a.x.size(1) / kXBlockValues;
  DispatchQmmaWeight(a.w.dtype(), [&](auto tag) {
    constexpr DType kW = decltype(tag)::value;
    if (a.x.size(0) <= kQuantMmaSmallTileRows) LaunchQuantMma<kW, 1>(a, op, stream);
    else LaunchQuantMma<kW, 4>(a, op, stream);
  });
  CheckLaunch("MatMul");
}

#else  // HIP: no mma.sync / ldmatrix

bool QuantMmaAccepts(const MatMulArgs&) { return false; }

void RunQuantMma(const MatMulArgs& a) {
  throw Error("vt::MatMul on " + a.x.device().ToString() +
              ": internal error: the int8 tensor-core kernel (mma.sync) was chosen on a HIP device");
}

#endif

}  // namespace vt::gpu
