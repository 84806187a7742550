// kQuantMma: MatMul of block weights on the int8 tensor cores (CUDA), for the batch
// sizes between the int8 GEMV and decoding the weights for cuBLAS (matmul_choice.h).
//
// x [M, K] (any float dtype, strided rows) is quantized per 32 values to XBlocks, then
//   - M <= 16 with K a multiple of 256 and 16-byte aligned weight rows (every real
//     model's projections): QuantMmaPipelined, below. These shapes are bound by the
//     weight bytes (16 rows of MMA per 34-byte block are nothing to the tensor cores),
//     so the kernel keeps kPipeStages stages of raw weight and x bytes in flight with
//     16-byte cp.async copies into shared memory, then per stage decodes the blocks to
//     int8 in shared memory (QmmaWeight::Decode, as the tiles below) and multiplies;
//     32 output columns a block (so that N = 4096 still gives 128 blocks), 8 warps.
//   - otherwise quant_mma.cuh's tiles: grid (ceil(N / 64), ceil(M / rows)), 16 rows
//     a tile up to 16 rows of x and 64 above, each weight block read once per row tile,
//     loads issued and waited for stage by stage.
// HIP has no mma.sync / cp.async: QuantMmaAccepts is false there.
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

// ---- the pipelined 16-row kernel -------------------------------------------------

constexpr int kPipeRows = 16;
constexpr int kPipeCols = 32;          // output columns a block: 4 warps x one 8-column MMA tile
constexpr int kPipeStageBlocks = 8;    // 32-value blocks of K a stage (256 values)
constexpr int kPipeStages = 4;         // stages whose copies are in flight or landed
// 8 warps: warp w multiplies column tile w % 4 over the stage's blocks 4 (w / 4)..+3,
// the two halves summed at the end. (4 warps, each over all 8 blocks, measured 69.5 us
// for Q8_0 24576 x 4096 at 16 rows on the H200 whatever the format's bytes: too few
// warps to hide the stage's barriers and shared-memory latencies.)
constexpr int kPipeThreads = 256;
constexpr int kPipeKSplit = kPipeThreads / 32 / (kPipeCols / 8);  // 2
constexpr int kPipeBlocksPerWarp = kPipeStageBlocks / kPipeKSplit;
constexpr int kPipeXPitch = kPipeStageBlocks * static_cast<int>(sizeof(XBlock)) + 16;  // 336 B: rows g, g + 1.. in different banks
constexpr int kPipeWqPitch = kPipeStageBlocks * 32 + 16;  // 272 B: column g's word t in bank 4g + t

// Bytes of one stage (256 values) of a weight row: 8 blocks of Q8_0 / Q4_0, one
// super-block of Q4_K / Q5_K; all multiples of 16, so a row's stages stay 16-byte
// aligned when the row is.
template <DType kW>
constexpr int kPipeStageBytes = kW == DType::kQ8_0 ? 8 * 34 : kW == DType::kQ4_0 ? 8 * 18 : kW == DType::kQ4_K ? 144 : 176;

template <DType kW>
struct PipeLayout {
  static constexpr int kRawPitch = kPipeStageBytes<kW> + 16;
  static constexpr size_t kWRaw = size_t{kPipeStages} * kPipeCols * kRawPitch;
  static constexpr size_t kXRaw = size_t{kPipeStages} * kPipeRows * kPipeXPitch;
  static constexpr size_t kWq = size_t{kPipeCols} * kPipeWqPitch;
  static constexpr size_t kScales = sizeof(float2) * kPipeCols * kPipeStageBlocks;
  static constexpr size_t kBytes = kWRaw + kXRaw + kWq + kScales;
};

// 16 bytes global -> shared without registers; src_bytes 0 fills zeros (src unread).
__device__ inline void CopyAsync16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(SharedAddress(shared)), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void CommitAsyncCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ inline void WaitAsyncCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// out[M <= 16, columns] for blockIdx.x's 32 columns. Warp w owns columns 8 (w % 4)..+7
// of the tile and half of each stage's blocks: per block one m16n8k32 with A (16 rows)
// read straight from the XBlocks in shared memory and B from the decoded int8 rows.
template <DType kW, typename X>
__global__ void __launch_bounds__(kPipeThreads) QuantMmaPipelinedKernel(QmmaOperands op, int64_t m, X* out,
                                                                        int64_t out_row_stride) {
  using L = PipeLayout<kW>;
  extern __shared__ uint4 pipe_shared[];
  uint8_t* w_raw = reinterpret_cast<uint8_t*>(pipe_shared);
  uint8_t* x_raw = w_raw + L::kWRaw;
  uint8_t* wq = x_raw + L::kXRaw;
  auto* w_scale = reinterpret_cast<float2*>(wq + L::kWq);  // [column][block]: (scale, min)
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kPipeCols;
  const int b_first = (warp / (kPipeCols / 8)) * kPipeBlocksPerWarp;
  const int64_t stages = op.kblocks / kPipeStageBlocks;

  const auto issue = [&](int64_t stage) {
    const int slot = static_cast<int>(stage % kPipeStages);
    constexpr int kWChunks = kPipeStageBytes<kW> / 16;
    uint8_t* w_dst = w_raw + slot * kPipeCols * L::kRawPitch;
    for (int item = tid; item < kPipeCols * kWChunks; item += kPipeThreads) {
      const int col = item / kWChunks, chunk = item % kWChunks;
      const bool valid = n0 + col < op.columns;
      const uint8_t* src = op.w[0] + (valid ? (n0 + col) * op.w_row_bytes + stage * kPipeStageBytes<kW> + chunk * 16 : 0);
      CopyAsync16(w_dst + col * L::kRawPitch + chunk * 16, src, valid);
    }
    constexpr int kXChunks = kPipeStageBlocks * static_cast<int>(sizeof(XBlock)) / 16;
    uint8_t* x_dst = x_raw + slot * kPipeRows * kPipeXPitch;
    const auto* x_bytes = reinterpret_cast<const uint8_t*>(op.x);
    for (int item = tid; item < kPipeRows * kXChunks; item += kPipeThreads) {
      const int r = item / kXChunks, chunk = item % kXChunks;
      const bool valid = r < m;
      const int64_t offset = valid ? (r * op.x_row_blocks + stage * kPipeStageBlocks) * static_cast<int64_t>(sizeof(XBlock)) + chunk * 16 : 0;
      CopyAsync16(x_dst + r * kPipeXPitch + chunk * 16, x_bytes + offset, valid);
    }
  };

  for (int s = 0; s < kPipeStages - 1; ++s) {
    if (s < stages) issue(s);
    CommitAsyncCopies();  // empty groups keep the count of groups per stage fixed
  }
  float acc[4] = {};
  const int g = lane / 4, t = lane % 4, c0 = (warp % (kPipeCols / 8)) * 8;
  for (int64_t stage = 0; stage < stages; ++stage) {
    WaitAsyncCopies<kPipeStages - 2>();  // this stage's copies have landed (this thread's)...
    __syncthreads();                     // ...and everyone's; the previous stage is no longer read
    if (stage + kPipeStages - 1 < stages) issue(stage + kPipeStages - 1);
    CommitAsyncCopies();
    const int slot = static_cast<int>(stage % kPipeStages);
    const uint8_t* w_src = w_raw + slot * kPipeCols * L::kRawPitch;
    for (int item = tid; item < kPipeCols * kPipeStageBlocks; item += kPipeThreads) {
      const int col = item / kPipeStageBlocks, b = item % kPipeStageBlocks;
      uint32_t q[8];
      float scale, min;
      QmmaWeight<kW>::Decode(w_src + col * L::kRawPitch, b, q, &scale, &min);
      auto* dst = reinterpret_cast<uint4*>(wq + col * kPipeWqPitch + b * 32);
      dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
      dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
      w_scale[col * kPipeStageBlocks + b] = make_float2(scale, min);
    }
    __syncthreads();
    const uint8_t* x_src = x_raw + slot * kPipeRows * kPipeXPitch;
    const auto* w_col = reinterpret_cast<const uint32_t*>(wq + (c0 + g) * kPipeWqPitch);
#pragma unroll
    for (int i = 0; i < kPipeBlocksPerWarp; ++i) {
      const int b = b_first + i;
      const XBlock& x_lo = reinterpret_cast<const XBlock*>(x_src + g * kPipeXPitch)[b];
      const XBlock& x_hi = reinterpret_cast<const XBlock*>(x_src + (g + 8) * kPipeXPitch)[b];
      const uint32_t a[4] = {static_cast<uint32_t>(x_lo.qs[t]), static_cast<uint32_t>(x_hi.qs[t]),
                             static_cast<uint32_t>(x_lo.qs[t + 4]), static_cast<uint32_t>(x_hi.qs[t + 4])};
      int32_t c[4];
      MmaInt8(c, a, w_col[b * 8 + t], w_col[b * 8 + t + 4]);
      ScaleInto<QmmaWeight<kW>::kHasMin>(acc, c, make_float2(x_lo.d, x_lo.s), make_float2(x_hi.d, x_hi.s),
                                         w_scale[(c0 + 2 * t) * kPipeStageBlocks + b],
                                         w_scale[(c0 + 2 * t + 1) * kPipeStageBlocks + b]);
    }
  }
  // The second half of the warps hands its sums to the first (through the decoded
  // weights' buffer, no longer read once everyone passes the barrier).
  static_assert(kPipeKSplit == 2, "the sums of two halves of the warps");
  __syncthreads();
  auto* partial = reinterpret_cast<float4*>(wq);
  const int half_thread = tid % (kPipeThreads / 2);
  if (tid >= kPipeThreads / 2) partial[half_thread] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  if (tid >= kPipeThreads / 2) return;
  const float4 other = partial[half_thread];
  acc[0] += other.x;
  acc[1] += other.y;
  acc[2] += other.z;
  acc[3] += other.w;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = g + 8 * (i / 2), col = n0 + c0 + 2 * t + i % 2;
    if (row < m && col < op.columns) out[row * out_row_stride + col] = FromFloat<X>(acc[i]);
  }
}

bool PipelinedTakes(const MatMulArgs& a) {
  const int64_t k = a.x.size(1);
  return a.x.size(0) <= kPipeRows && k % (kPipeStageBlocks * kXBlockValues) == 0 &&
         reinterpret_cast<uintptr_t>(a.w.data()) % 16 == 0 && BytesFor(a.w.dtype(), a.w.stride(0)) % 16 == 0;
}

template <DType kW>
void LaunchQuantMmaPipelined(const MatMulArgs& a, const QmmaOperands& op, gpuStream_t stream) {
  const size_t shared = PipeLayout<kW>::kBytes;
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    const auto kernel = &QuantMmaPipelinedKernel<kW, X>;
    CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(shared)),
             "raising the shared-memory limit of MatMul's pipelined int8 kernel");
    kernel<<<GridFor(op.columns, kPipeCols, "MatMul"), kPipeThreads, shared, stream>>>(
        op, a.x.size(0), static_cast<X*>(a.out.data()), a.out.stride(0));
  });
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
    if (PipelinedTakes(a)) {
      reach::Hit("MatMulGpu.quant_mma.pipelined");
      LaunchQuantMmaPipelined<kW>(a, op, stream);
    } else if (a.x.size(0) <= kQuantMmaSmallTileRows) {
      reach::Hit("MatMulGpu.quant_mma.tiles");
      LaunchQuantMma<kW, 1>(a, op, stream);
    } else {
      reach::Hit("MatMulGpu.quant_mma.tiles");
      LaunchQuantMma<kW, 4>(a, op, stream);
    }
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
