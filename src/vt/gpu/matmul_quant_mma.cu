// kQuantMma: MatMul of block weights on the int8 tensor cores (CUDA), for the batch
// sizes between the int8 GEMV and decoding the weights for cuBLAS (matmul_choice.h).
//
// x [M, K] (any float dtype, strided rows) is quantized per 32 values to XBlocks, then
//   - M <= 16 with K a multiple of 256 and 16-byte aligned weight rows (every real
//     model's projections): QuantMmaPipelined, below. These shapes are bound by the
//     weight bytes (16 rows of MMA per 34-byte block are nothing to the tensor cores),
//     so the kernel keeps kPipeStages stages of raw weight and x bytes in flight with
//     16-byte cp.async copies into shared memory, then per stage decodes the blocks to
//     int8 in shared memory (QmmaWeight::Decode, as the tiles below; Q8_0's bytes are
//     the operand as stored) and multiplies; 32 output columns a block (so that
//     N = 4096 still gives 128 blocks), one warp per 32-value block of a stage.
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
  WaitForPriorKernels();  // gpu_launch.cuh
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
constexpr int kPipeCols = 32;          // output columns a block: four 8-column MMA tiles
constexpr int kPipeStageBlocks = 8;    // 32-value blocks of K a stage (256 values)
constexpr int kPipeStages = 4;         // stages whose copies are in flight or landed
// One warp per block of the stage, each over all four column tiles, the warps' sums
// added at the end: the A fragment and x's scales are read from shared memory once
// per block, not once per tile. Measured on the H200 (Nsight Compute, Q8_0 24576 x
// 4096 at 16 rows): with warps splitting the columns instead, shared memory (72% busy)
// bound the kernel at 0.35 of the copy bandwidth, DRAM at 33%.
constexpr int kPipeThreads = kPipeStageBlocks * 32;
constexpr int kPipeTiles = kPipeCols / 8;
constexpr int kPipeXPitch = kPipeStageBlocks * static_cast<int>(sizeof(XBlock)) + 16;  // 336 B: rows g in different banks
constexpr int kPipeWqPitch = kPipeStageBlocks * 32 + 16;  // 272 B: column g's word t in bank 4g + t

// Bytes of one stage (256 values) of a weight row: 8 blocks of Q8_0 / Q4_0, one
// super-block of Q4_K / Q5_K; all multiples of 16, so a row's stages stay 16-byte
// aligned when the row is.
template <DType kW>
constexpr int kPipeStageBytes = kW == DType::kQ8_0 ? 8 * 34 : kW == DType::kQ4_0 ? 8 * 18 : kW == DType::kQ4_K ? 144 : 176;

// Q8_0's int8 values are the MMA's operand as stored: its B fragments and scales are
// read from the raw copy, with no decode pass. Other formats are decoded per stage
// into int8 rows (wq) and (scale, min) pairs first.
template <DType kW>
constexpr bool kPipeRawOperand = kW == DType::kQ8_0;

template <DType kW>
struct PipeLayout {
  // Q8_0: 304 B = 76 words, so the 8 columns g of a fragment load fall in banks 12g + t.
  static constexpr int kRawPitch = kPipeRawOperand<kW> ? 304 : kPipeStageBytes<kW> + 16;
  static constexpr size_t kWRaw = size_t{kPipeStages} * kPipeCols * kRawPitch;
  static constexpr size_t kXRaw = size_t{kPipeStages} * kPipeRows * kPipeXPitch;
  static constexpr size_t kWq = kPipeRawOperand<kW> ? 0 : size_t{kPipeCols} * kPipeWqPitch;
  static constexpr size_t kScales = kPipeRawOperand<kW> ? 0 : sizeof(float2) * kPipeCols * kPipeStageBlocks;
  static constexpr size_t kBytes = kWRaw + kXRaw + kWq + kScales;
  // The warps' sums at the end, in the raw weights' space (no longer read by then).
  static_assert(kWRaw >= sizeof(float) * kPipeStageBlocks * kPipeRows * kPipeCols);
};

// A 32-bit word at a 2-byte aligned shared address (one load when it is 4-byte aligned).
__device__ inline uint32_t SharedWordAt2(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 2) == 0) return *reinterpret_cast<const uint32_t*>(p);
  const auto* half = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(half[0]) | (static_cast<uint32_t>(half[1]) << 16);
}

// out[M <= 16, columns] for blockIdx.x's 32 columns. Warp w takes block w of each
// stage: one m16n8k32 per column tile with A (16 rows) read straight from the XBlocks
// in shared memory and B from the raw Q8_0 bytes or the decoded int8 rows.
template <DType kW, typename X>
__global__ void __launch_bounds__(kPipeThreads, 3) QuantMmaPipelinedKernel(QmmaOperands op, int64_t m, X* out,
                                                                           int64_t out_row_stride) {
  WaitForPriorKernels();  // gpu_launch.cuh
  using L = PipeLayout<kW>;
  constexpr bool kRaw = kPipeRawOperand<kW>;
  extern __shared__ uint4 pipe_shared[];
  uint8_t* w_raw = reinterpret_cast<uint8_t*>(pipe_shared);
  uint8_t* x_raw = w_raw + L::kWRaw;
  uint8_t* wq = x_raw + L::kXRaw;
  auto* w_scale = reinterpret_cast<float2*>(wq + L::kWq);  // [column][block]: (scale, min)
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, b = tid / 32;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kPipeCols;
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
  float acc[kPipeTiles][4] = {};
  const int g = lane / 4, t = lane % 4;
  for (int64_t stage = 0; stage < stages; ++stage) {
    WaitAsyncCopies<kPipeStages - 2>();  // this stage's copies have landed (this thread's)...
    __syncthreads();                     // ...and everyone's; the previous stage is no longer read
    if (stage + kPipeStages - 1 < stages) issue(stage + kPipeStages - 1);
    CommitAsyncCopies();
    const int slot = static_cast<int>(stage % kPipeStages);
    const uint8_t* w_src = w_raw + slot * kPipeCols * L::kRawPitch;
    if constexpr (!kRaw) {
      for (int item = tid; item < kPipeCols * kPipeStageBlocks; item += kPipeThreads) {
        const int col = item / kPipeStageBlocks, j = item % kPipeStageBlocks;
        uint32_t q[8];
        float scale, min;
        QmmaWeight<kW>::Decode(w_src + col * L::kRawPitch, j, q, &scale, &min);
        auto* dst = reinterpret_cast<uint4*>(wq + col * kPipeWqPitch + j * 32);
        dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
        dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
        w_scale[col * kPipeStageBlocks + j] = make_float2(scale, min);
      }
      __syncthreads();
    }
    const uint8_t* x_src = x_raw + slot * kPipeRows * kPipeXPitch;
    const XBlock& x_lo = reinterpret_cast<const XBlock*>(x_src + g * kPipeXPitch)[b];
    const XBlock& x_hi = reinterpret_cast<const XBlock*>(x_src + (g + 8) * kPipeXPitch)[b];
    const uint32_t a[4] = {static_cast<uint32_t>(x_lo.qs[t]), static_cast<uint32_t>(x_hi.qs[t]),
                           static_cast<uint32_t>(x_lo.qs[t + 4]), static_cast<uint32_t>(x_hi.qs[t + 4])};
    const float2 xs_lo = make_float2(x_lo.d, x_lo.s), xs_hi = make_float2(x_hi.d, x_hi.s);
#pragma unroll
    for (int tile = 0; tile < kPipeTiles; ++tile) {
      const int col = tile * 8 + g, c_col = tile * 8 + 2 * t;  // B's column; C's first column
      uint32_t b0, b1;
      float2 w0, w1;
      if constexpr (kRaw) {  // Q8_0 block: [d f16][32 x int8]
        const uint8_t* block = w_src + col * L::kRawPitch + 34 * b;
        b0 = SharedWordAt2(block + 2 + 4 * t);
        b1 = SharedWordAt2(block + 18 + 4 * t);
        const uint8_t* d0 = w_src + c_col * L::kRawPitch + 34 * b;
        w0 = make_float2(HalfBitsToFloat(*reinterpret_cast<const uint16_t*>(d0)), 0.0f);
        w1 = make_float2(HalfBitsToFloat(*reinterpret_cast<const uint16_t*>(d0 + L::kRawPitch)), 0.0f);
      } else {
        const auto* w_col = reinterpret_cast<const uint32_t*>(wq + col * kPipeWqPitch + b * 32);
        b0 = w_col[t];
        b1 = w_col[t + 4];
        w0 = w_scale[c_col * kPipeStageBlocks + b];
        w1 = w_scale[(c_col + 1) * kPipeStageBlocks + b];
      }
      int32_t c[4];
      MmaInt8(c, a, b0, b1);
      ScaleInto<QmmaWeight<kW>::kHasMin>(acc[tile], c, xs_lo, xs_hi, w0, w1);
    }
  }
  // The warps' sums: partial[warp][row][col] in the raw weights' space, then each
  // thread adds up two of the tile's 512 outputs.
  __syncthreads();
  auto* partial = reinterpret_cast<float*>(w_raw);
  constexpr int kOutputs = kPipeRows * kPipeCols;
#pragma unroll
  for (int tile = 0; tile < kPipeTiles; ++tile) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      partial[b * kOutputs + (g + 8 * (i / 2)) * kPipeCols + tile * 8 + 2 * t + i % 2] = acc[tile][i];
    }
  }
  __syncthreads();
  for (int o = tid; o < kOutputs; o += kPipeThreads) {
    const int64_t row = o / kPipeCols, col = n0 + o % kPipeCols;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kPipeStageBlocks; ++w) sum += partial[w * kOutputs + o];
    if (row < m && col < op.columns) out[row * out_row_stride + col] = FromFloat<X>(sum);
  }
}

}  // namespace

bool QuantMmaPipelinedTakes(const MatMulArgs& a) {
  static_assert(kPipeStageBlocks * kXBlockValues == 256, "stages of WeightRowsSplitIn16ByteStages");
  return a.x.size(0) <= kPipeRows && WeightRowsSplitIn16ByteStages(a);
}

namespace {

template <DType kW>
void LaunchQuantMmaPipelined(const MatMulArgs& a, const QmmaOperands& op, gpuStream_t stream) {
  const size_t shared = PipeLayout<kW>::kBytes;
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    const auto kernel = &QuantMmaPipelinedKernel<kW, X>;
    CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(shared)),
             "raising the shared-memory limit of MatMul's pipelined int8 kernel");
    LaunchKernel(kernel, GridFor(op.columns, kPipeCols, "MatMul"), kPipeThreads, shared, stream, op, a.x.size(0),
                 static_cast<X*>(a.out.data()), a.out.stride(0));
  });
}

template <DType kW, int kWarpsM>
void LaunchQuantMma(const MatMulArgs& a, const QmmaOperands& op, gpuStream_t stream) {
  const int64_t m = a.x.size(0);
  const dim3 grid(GridFor(op.columns, kQmmaCols, "MatMul"), GridFor(m, 16 * kWarpsM, "MatMul"));
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    LaunchKernel(QuantMmaKernel<kW, kWarpsM, X>, grid, kQmmaThreads, 0, stream, op, m, static_cast<X*>(a.out.data()),
                 a.out.stride(0));
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
    if (QuantMmaPipelinedTakes(a)) {
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
bool QuantMmaPipelinedTakes(const MatMulArgs&) { return false; }

void RunQuantMma(const MatMulArgs& a) {
  throw Error("vt::MatMul on " + a.x.device().ToString() +
              ": internal error: the int8 tensor-core kernel (mma.sync) was chosen on a HIP device");
}

#endif

}  // namespace vt::gpu
