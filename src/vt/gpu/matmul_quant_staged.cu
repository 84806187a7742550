// kQuantGemvStaged: MatMul of Q8_0 weights at the decode rows (CUDA), out[M, N] =
// x[M, K] . w[N, K]^T with M <= kQuantGemvStagedMaxRows, K a multiple of 256 and
// 16-byte aligned weight rows (every Q8_0 model's projections and LM head).
//
// Why not the dot lanes of matmul_quant.cu: a Q8_0 block is 34 bytes, so a lane that
// reads its part of a block straight from global memory issues 2-byte loads, and a
// warp's load touches 3-4 cache lines for 64 bytes of weights. At one row that kernel
// is bound by the L1's load wavefronts per weight byte (0.57 of the copy bandwidth on
// an H200, bench/gpu_notes.md), not by DRAM. Here every weight byte moves in 16-byte
// pieces:
//   - a block of kStagedWarps warps owns kStagedCols = 32 output columns at a time;
//     the grid is the blocks the device holds, walking the column groups;
//   - warp w takes stages w, w + kStagedWarps, ... of K (a stage: 256 values, 272
//     bytes of each of the 32 rows); 16-byte cp.async copies put a stage of all 32
//     rows in one of the warp's kStagedDepth slots. A warp's stages of successive
//     column groups form one stream, so the next group's copies are in flight while
//     this group's last stage is multiplied;
//   - lane c then reads column c's 272 bytes as 17 16-byte shared loads (rows 272 bytes
//     = 17 x 16 apart: 17 is odd, so the 8 lanes of a quarter-warp fall in 8 different
//     16-byte bank groups) and decodes the 8 blocks from registers at offsets known at
//     compile time (every lane's blocks sit at the same offsets). x, quantized to
//     XBlocks into shared memory by each block at the start, is read by all lanes of a
//     warp at one address (a broadcast); dp4a does 4 products an instruction;
//   - the warps' sums of a column group meet in shared memory (two buffers, so one
//     barrier a group).
// HIP has no cp.async: QuantGemvStagedTakes is false there.
#include "gpu_mma.cuh"
#include "gpu_quant_dot.cuh"
#include "gpu_runtime.h"
#include "matmul.h"
#include "vt/reach.h"

namespace vt::gpu {

#if !VT_GPU_HIP
namespace {

constexpr int kStagedCols = 32;  // one output column a lane
constexpr int kStagedWarps = 8;
constexpr int kStagedThreads = kStagedWarps * kWarpSize;
constexpr int kStagedStageBlocks = 8;                          // 32-value Q8_0 blocks a stage (256 values)
constexpr int kStagedStageBytes = kStagedStageBlocks * 34;     // 272 bytes of a row a stage
constexpr int kStagedChunks = kStagedStageBytes / 16;          // 17 16-byte pieces
constexpr int kStagedWords = kStagedStageBytes / 4;            // 68
// Slots a warp: the stage being multiplied and the next one in flight. Eight warps of
// two 8,704-byte slots keep ~70 KB in flight an SM (the H200's copy bandwidth needs
// ~30 KB at its latency) and leave room for x; a third slot would not fit with x.
constexpr int kStagedDepth = 2;
constexpr size_t kStagedSlotBytes = size_t{kStagedCols} * kStagedStageBytes;
constexpr size_t kStagedWeightBytes = kStagedSlotBytes * kStagedDepth * kStagedWarps;
// x's XBlocks (M x K / 32 x 40 bytes) must fit beside the slots: one row up to K =
// 52,428, eight up to 6,553.
constexpr size_t kStagedMaxXBytes = 64 * 1024;

template <int kRows>
constexpr size_t kStagedPartialBytes = sizeof(float) * 2 * kStagedWarps * kRows * kStagedCols;

template <typename X>
struct StagedParams {
  const uint8_t* w;
  int64_t w_row_bytes;
  const X* x;
  int64_t x_row_stride;
  X* out;
  int64_t out_row_stride;
  int n, m, stages, x_blocks_per_row;
};

// The stage's 8 Q8_0 blocks of one column (68 words of shared memory, 16-byte aligned)
// dotted with x's 8 XBlocks of the stage for every row: acc[r] += sum_b d_w d_x (q_w . q_x).
template <int kRows>
__device__ inline void DotStage(const uint4* column, const XBlock* x, int x_blocks_per_row, int m,
                                float (&acc)[kRows]) {
  uint32_t words[kStagedWords];
#pragma unroll
  for (int c = 0; c < kStagedChunks; ++c) {
    const uint4 v = column[c];
    words[4 * c] = v.x;
    words[4 * c + 1] = v.y;
    words[4 * c + 2] = v.z;
    words[4 * c + 3] = v.w;
  }
#pragma unroll
  for (int b = 0; b < kStagedStageBlocks; ++b) {
    // Block b: its f16 scale at byte 34b, its 32 int8 at 34b + 2 (2 bytes into a word
    // for even b, word-aligned for odd b).
    const int offset = 34 * b;
    const uint32_t scale_word = words[offset / 4];
    const float d = HalfBitsToFloat(static_cast<uint16_t>(offset % 4 == 0 ? scale_word & 0xffffu : scale_word >> 16));
    int q[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int word = (offset + 2) / 4 + i;
      q[i] = (offset + 2) % 4 == 0 ? static_cast<int>(words[word])
                                   : static_cast<int>(__funnelshift_r(words[word], words[word + 1], 16));
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r < m) {  // uniform across the block
        const XBlock& xb = x[r * x_blocks_per_row + b];
        const auto* xq = reinterpret_cast<const int2*>(xb.qs);
        int sum = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int2 pair = xq[i];
          sum = Dp4a(q[2 * i], pair.x, sum);
          sum = Dp4a(q[2 * i + 1], pair.y, sum);
        }
        acc[r] += d * xb.d * static_cast<float>(sum);
      }
    }
  }
}

template <typename X, int kRows>
__global__ void __launch_bounds__(kStagedThreads, 1) QuantGemvStagedKernel(StagedParams<X> p) {
  extern __shared__ uint4 staged_shared[];
  auto* slots = reinterpret_cast<uint8_t*>(staged_shared);
  auto* x_shared = reinterpret_cast<XBlock*>(slots + kStagedWeightBytes);
  const size_t x_bytes = sizeof(XBlock) * static_cast<size_t>(p.m) * p.x_blocks_per_row;
  auto* partial = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(x_shared) + (x_bytes + 15) / 16 * 16);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarpSize, warp = tid / kWarpSize;

  QuantizeXRows(p.x, p.x_row_stride, p.x_blocks_per_row, static_cast<int64_t>(p.m) * p.x_blocks_per_row, x_shared,
                tid, kStagedThreads);

  const int groups = (p.n + kStagedCols - 1) / kStagedCols;
  const int first_group = static_cast<int>(blockIdx.x), group_step = static_cast<int>(gridDim.x);
  const int my_groups = first_group < groups ? (groups - 1 - first_group) / group_step + 1 : 0;
  // This warp's stages of a group and its stream of (group, stage) items.
  const int per_group = p.stages > warp ? (p.stages - 1 - warp) / kStagedWarps + 1 : 0;
  const int items = my_groups * per_group;
  uint8_t* my_slots = slots + static_cast<size_t>(warp) * kStagedDepth * kStagedSlotBytes;

  const auto issue = [&](int item) {
    const int group = first_group + (item / per_group) * group_step;
    const int stage = warp + kStagedWarps * (item % per_group);
    uint8_t* dst = my_slots + static_cast<size_t>(item % kStagedDepth) * kStagedSlotBytes;
    for (int piece = lane; piece < kStagedCols * kStagedChunks; piece += kWarpSize) {
      const int row = piece / kStagedChunks, chunk = piece % kStagedChunks;
      const int column = group * kStagedCols + row;
      const bool valid = column < p.n;
      const uint8_t* src =
          valid ? p.w + column * p.w_row_bytes + static_cast<int64_t>(stage) * kStagedStageBytes + chunk * 16 : p.w;
      CopyAsync16(dst + row * kStagedStageBytes + chunk * 16, src, valid);
    }
  };

  for (int item = 0; item < kStagedDepth - 1; ++item) {
    if (item < items) issue(item);
    CommitAsyncCopies();  // empty groups keep one group an item
  }
  __syncthreads();  // x quantized
  int item = 0;
  for (int g = 0; g < my_groups; ++g) {
    float acc[kRows] = {};
    for (int s = 0; s < per_group; ++s, ++item) {
      WaitAsyncCopies<kStagedDepth - 2>();  // this item's copies (this lane's) landed...
      __syncwarp();                         // ...and the warp's; the previous slot is no longer read
      if (item + kStagedDepth - 1 < items) issue(item + kStagedDepth - 1);
      CommitAsyncCopies();
      const int stage = warp + kStagedWarps * s;
      const auto* column = reinterpret_cast<const uint4*>(my_slots + static_cast<size_t>(item % kStagedDepth) * kStagedSlotBytes +
                                                          lane * kStagedStageBytes);
      DotStage<kRows>(column, x_shared + stage * kStagedStageBlocks, p.x_blocks_per_row, p.m, acc);
    }
    float* buffer = partial + (g % 2) * kStagedWarps * kRows * kStagedCols;
#pragma unroll
    for (int r = 0; r < kRows; ++r) buffer[(warp * kRows + r) * kStagedCols + lane] = acc[r];
    __syncthreads();
    // The other buffer is written only after the next group's barrier, by which time
    // these sums have been read.
    if (tid < kRows * kStagedCols) {
      const int r = tid / kStagedCols, c = tid % kStagedCols;
      const int column = (first_group + g * group_step) * kStagedCols + c;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kStagedWarps; ++w) sum += buffer[(w * kRows + r) * kStagedCols + c];
      if (r < p.m && column < p.n) p.out[r * p.out_row_stride + column] = FromFloat<X>(sum);
    }
  }
}

template <typename X, int kRows>
void LaunchStaged(const StagedParams<X>& p, Device device, gpuStream_t stream) {
  const auto kernel = &QuantGemvStagedKernel<X, kRows>;
  const size_t x_bytes = (sizeof(XBlock) * static_cast<size_t>(p.m) * p.x_blocks_per_row + 15) / 16 * 16;
  const size_t shared = kStagedWeightBytes + x_bytes + kStagedPartialBytes<kRows>;
  CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared)),
           "raising the shared-memory limit of MatMul's staged int8 GEMV");
  const int64_t resident = static_cast<int64_t>(MultiprocessorCount(device)) *
                           ResidentBlocksPerMultiprocessor(reinterpret_cast<const void*>(kernel), kStagedThreads, device, shared);
  const int64_t groups = (p.n + kStagedCols - 1) / kStagedCols;
  const auto grid = static_cast<unsigned>(std::max<int64_t>(1, std::min(groups, resident)));
  kernel<<<grid, kStagedThreads, shared, stream>>>(p);
}

}  // namespace

bool QuantGemvStagedTakes(const MatMulArgs& a) {
  const int64_t m = a.x.size(0), k = a.x.size(1);
  const int64_t x_bytes = m * (k / kXBlockValues) * static_cast<int64_t>(sizeof(XBlock));
  return a.w.dtype() == DType::kQ8_0 && m <= kQuantGemvStagedMaxRows && k % (kStagedStageBlocks * kXBlockValues) == 0 &&
         x_bytes <= static_cast<int64_t>(kStagedMaxXBytes) && a.w.size(0) <= INT32_MAX &&
         reinterpret_cast<uintptr_t>(a.w.data()) % 16 == 0 && BytesFor(a.w.dtype(), a.w.stride(0)) % 16 == 0;
}

void RunQuantGemvStaged(const MatMulArgs& a) {
  reach::Hit("MatMulGpu.quant_gemv_staged");
  gpuStream_t stream = PrepareDevice(a.out.device());
  const int64_t m = a.x.size(0), k = a.x.size(1);
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    const StagedParams<X> p{static_cast<const uint8_t*>(a.w.data()),
                            BytesFor(a.w.dtype(), a.w.stride(0)),
                            static_cast<const X*>(a.x.data()),
                            a.x.stride(0),
                            static_cast<X*>(a.out.data()),
                            a.out.stride(0),
                            static_cast<int>(a.w.size(0)),
                            static_cast<int>(m),
                            static_cast<int>(k / (kStagedStageBlocks * kXBlockValues)),
                            static_cast<int>(k / kXBlockValues)};
    static_assert(kQuantGemvStagedMaxRows == 8, "the row templates cover 1 to kQuantGemvStagedMaxRows");
    if (m == 1) {
      LaunchStaged<X, 1>(p, a.out.device(), stream);
    } else if (m == 2) {
      LaunchStaged<X, 2>(p, a.out.device(), stream);
    } else if (m <= 4) {
      LaunchStaged<X, 4>(p, a.out.device(), stream);
    } else {
      LaunchStaged<X, 8>(p, a.out.device(), stream);
    }
  });
  CheckLaunch("MatMul");
}

#else  // HIP: no cp.async

bool QuantGemvStagedTakes(const MatMulArgs&) { return false; }

void RunQuantGemvStaged(const MatMulArgs& a) {
  throw Error("vt::MatMul on " + a.x.device().ToString() +
              ": internal error: the staged int8 GEMV (cp.async) was chosen on a HIP device");
}

#endif

}  // namespace vt::gpu
