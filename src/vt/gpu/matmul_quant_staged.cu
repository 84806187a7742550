// kQuantGemvStaged: MatMul of block weights (Q8_0, Q4_0, Q4_K, Q5_K) at the decode
// rows (CUDA), out[M, N] = x[M, K] . w[N, K]^T with M <= kQuantGemvStagedMaxRows, K a
// multiple of 256 and 16-byte aligned weight rows (every such model's projections and
// LM head). The Q8_0 case is described below; the other formats differ only in a
// stage's bytes and their decode (StagedFormat). The same kernel reads MoeExperts'
// chosen experts at one token (StagedRows: the group or stage addresses follow the
// expert ids; docs/gpu_kernels.md §3).
//
// Why not the dot lanes of matmul_quant.cu: a Q8_0 block is 34 bytes, so a lane that
// reads its part of a block straight from global memory issues 2-byte loads, and a
// warp's load touches 3-4 cache lines for 64 bytes of weights. At one row that kernel
// is bound by the L1's load wavefronts per weight byte (0.56 of the copy bandwidth on
// an H200, bench/gpu_notes.md), not by DRAM. Here every weight byte moves in 16-byte
// pieces:
//   - a block of kStagedWarps warps owns kStagedCols = 16 output columns at a time;
//     the grid is the blocks the device holds, walking the column groups;
//   - warp w takes stages w, w + kStagedWarps, ... of K (a stage: 256 values, 272
//     bytes of each of the 16 rows); 16-byte cp.async copies put a stage of the 16
//     rows in one of the warp's kStagedDepth slots, the rows back to back, so piece p
//     of a slot lands at byte 16p. A warp's stages of successive column groups form
//     one stream: kStagedDepth - 1 stages are in flight while one is multiplied,
//     across group boundaries;
//   - lanes 2c and 2c + 1 share column c, each reading its half of the stage (4 blocks,
//     136 bytes) as 17 8-byte shared loads (the 16 lanes of a half-warp fall in 16
//     different bank pairs) and decoding its blocks from registers at offsets known at
//     compile time (every lane's blocks sit at the same offsets). x, quantized into
//     shared memory by each block at the start (the q words 16-byte aligned, the
//     scales apart), is read at two addresses a warp (near-broadcasts); dp4a does 4
//     products an instruction;
//   - the warps' sums of a column group meet in shared memory (two buffers, so one
//     barrier a group).
// The first version (32 columns, a whole stage a lane, two slots a warp) ran Q8_0
// 24576 x 4096 at one row in 34.6 us (0.72 of copy): Nsight Compute showed 8 warps an
// SM issuing on 32% of cycles (790 instructions a warp-stage, most of them the copy
// addressing) and DRAM 67% busy. This one runs it in 33.9 us (0.74) with 7.9M
// instructions instead of 9.7M: still issue-latency bound with 8 warps an SM (see
// kStagedWeightBytes).
// HIP has no cp.async: QuantGemvStagedTakes is false there.
#include <string>
#include <string_view>
#include <utility>

#include "gpu_mma.cuh"
#include "gpu_quant_dot.cuh"
#include "gpu_runtime.h"
#include "matmul.h"
#include "quant_mma.cuh"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {

#if !VT_GPU_HIP
namespace {

constexpr int kStagedCols = 16;  // two lanes an output column
constexpr int kStagedWarps = 8;
constexpr int kStagedThreads = kStagedWarps * kWarpSize;
constexpr int kStagedStageValues = 256;                          // values of K a stage
constexpr int kStagedStageXBlocks = kStagedStageValues / kXBlockValues;  // 8: a lane's half is 4
// Slots of all warps of a block: one slot a warp being multiplied, the rest in flight.
// kBlocksPerSm 1 (the default): 136 KB (Q8_0: 4 slots of 4,352 bytes a warp, ~100 KB
// in flight an SM); measured on the H200 (Q8_0 24576 x 4096, one row) at 0.74 of the
// copy bandwidth with DRAM 66% busy: Nsight Compute showed its 8 warps an SM stalled
// 7.4 cycles an instruction (2 a scheduler), issue-bound rather than short of bytes in
// flight. kBlocksPerSm 2: half the slots a block, two blocks an SM (16 warps, Q8_0 2
// slots a warp, ~70 KB in flight), the next thing to measure: compiled and in the
// contract test, not yet run on a GPU. vt::tuning family "gpu.quant_gemv_staged"
// forces "one_block" or "two_blocks" (vt_gpu_bench compares them).
template <int kBlocksPerSm>
constexpr size_t kStagedWeightBytes = 139264 / kBlocksPerSm;
constexpr std::string_view kStagedVariantFamily = "gpu.quant_gemv_staged";
// x in shared memory: a row's q words, 16 bytes of padding after every 4 blocks (so
// that the two halves of a stage, which a quarter-warp reads together, start in
// different banks), then M x K / 32 floats of d and of s: 1.375 M K bytes. With the
// slots it must fit the 227 KB an SM gives a block: one row up to K = 47,662, eight
// up to 5,957.
constexpr size_t kStagedMaxXBytes = 64 * 1024;

// Words of a row's q and the position of block kb's first word in it.
__host__ __device__ constexpr int64_t StagedXWords(int64_t blocks) { return blocks * 8 + blocks / 4 * 4; }
__device__ inline int StagedXBlockWord(int kb) { return kb * 8 + kb / 4 * 4; }

size_t StagedXBytes(int64_t m, int64_t k) {
  const int64_t blocks = k / kXBlockValues;
  return static_cast<size_t>(m * StagedXWords(blocks) * 4 + 2 * m * blocks * 4);
}

template <int kRows>
constexpr size_t kStagedPartialBytes = sizeof(float) * 2 * kStagedWarps * kRows * kStagedCols;

// x of the lane's 4 blocks: q words (32 a block-quad, contiguous; rows `words` apart),
// d and s (rows `blocks` apart).
struct StagedX {
  const int32_t* q;
  const float* d;
  const float* s;
  int words, blocks;
  // sum over the 8 words of x block j (0..3) of row r, dp4a with w[0..7].
  __device__ int Dot8(int r, int j, const int (&w)[8]) const {
    const auto* x4 = reinterpret_cast<const int4*>(q + r * words + 8 * j);
    const int4 lo = x4[0], hi = x4[1];
    int sum = Dp4a(w[0], lo.x, 0);
    sum = Dp4a(w[1], lo.y, sum);
    sum = Dp4a(w[2], lo.z, sum);
    sum = Dp4a(w[3], lo.w, sum);
    sum = Dp4a(w[4], hi.x, sum);
    sum = Dp4a(w[5], hi.y, sum);
    sum = Dp4a(w[6], hi.z, sum);
    return Dp4a(w[7], hi.w, sum);
  }
  __device__ float D(int r, int j) const { return d[r * blocks + j]; }
  __device__ float S(int r, int j) const { return s[r * blocks + j]; }
};

// A weight format's stage: its bytes in a row (a multiple of 16, so rows of a slot
// stay 16-byte aligned), and Dot: lane half h's values of the stage (x blocks 4h..4h+3)
// of the column whose stage bytes start at `row` (shared memory), dotted with x for
// every row into acc. Rows of a slot are kStageBytes apart: an odd number of 16-byte
// units, so the 4 columns x 2 halves of a quarter-warp fall in different bank groups.
template <DType kW>
struct StagedFormat;

// kWords words of shared memory at p (8-byte aligned) into registers, 8 bytes a load.
template <int kWords>
__device__ inline void LoadWords8(const uint8_t* p, uint32_t (&words)[kWords]) {
  const auto* src = reinterpret_cast<const uint2*>(p);
#pragma unroll
  for (int c = 0; c < kWords / 2; ++c) {
    const uint2 v = src[c];
    words[2 * c] = v.x;
    words[2 * c + 1] = v.y;
  }
}
// The 16-bit half and the 32-bit word at byte `offset` (even) of words; offsets are
// compile-time constants in the unrolled loops, so these fold to a register or a
// funnel shift.
template <int kWords>
__device__ inline float HalfAt(const uint32_t (&words)[kWords], int offset) {
  const uint32_t w = words[offset / 4];
  return HalfBitsToFloat(static_cast<uint16_t>(offset % 4 == 0 ? w & 0xffffu : w >> 16));
}
template <int kWords>
__device__ inline uint32_t WordAt(const uint32_t (&words)[kWords], int offset) {
  const int word = offset / 4;
  return offset % 4 == 0 ? words[word] : __funnelshift_r(words[word], words[word + 1], 16);
}

// Q8_0: 8 blocks of [d f16][32 x int8]; half h = blocks 4h..4h+3, 136 bytes at 136h,
// read as 17 8-byte loads (the 16 lanes of a half-warp in 16 different bank pairs).
template <>
struct StagedFormat<DType::kQ8_0> {
  static constexpr int kStageBytes = 8 * 34;
  template <int kRows>
  static __device__ void Dot(const uint8_t* row, int half, const StagedX& x, int m, float (&acc)[kRows]) {
    uint32_t words[34];
    LoadWords8(row + 136 * half, words);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      // Block b: its scale at byte 34b, its int8 at 34b + 2 (2 bytes into a word for
      // even b, word-aligned for odd b).
      const float d = HalfAt(words, 34 * b);
      int q[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = static_cast<int>(WordAt(words, 34 * b + 2 + 4 * i));
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < m) acc[r] += d * x.D(r, b) * static_cast<float>(x.Dot8(r, b, q));  // m uniform across the block
      }
    }
  }
};

// Q4_0: 8 blocks of [d f16][16 bytes: value i low nibble of byte i, i + 16 high];
// values n - 8. Half h = blocks 4h..4h+3, 72 bytes at 72h (9 8-byte loads).
template <>
struct StagedFormat<DType::kQ4_0> {
  static constexpr int kStageBytes = 8 * 18;
  template <int kRows>
  static __device__ void Dot(const uint8_t* row, int half, const StagedX& x, int m, float (&acc)[kRows]) {
    uint32_t words[18];
    LoadWords8(row + 72 * half, words);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float d = HalfAt(words, 18 * b);  // scale at 18b; nibbles at 18b + 2 (unaligned for even b)
      int q[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t v = WordAt(words, 18 * b + 2 + 4 * i);
        q[i] = static_cast<int>(v & 0x0f0f0f0fu);             // values 4i..4i+3
        q[4 + i] = static_cast<int>((v >> 4) & 0x0f0f0f0fu);  // values 16 + 4i..
      }
      // sum (n - 8) x = d_x sum n q - 8 s
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < m) acc[r] += d * (x.D(r, b) * static_cast<float>(x.Dot8(r, b, q)) - 8.0f * x.S(r, b));
      }
    }
  }
};

// Q4_K / Q5_K: one super-block of [d f16][dmin f16][12 bytes of 6-bit scales and mins]
// ([Q5_K: 32 bytes qh])[128 bytes of nibbles]; group g of 64 values reads nibble bytes
// 32g.., its low nibbles sub-block 2g, high nibbles 2g + 1 (docs/quantized_matmul.md).
// Half h = groups 2h, 2h + 1 = sub-blocks (x blocks) 4h..4h+3: the 16-byte header,
// [Q5_K: all of qh,] and 64 nibble bytes, in 16-byte loads.
template <bool kFiveBits>
struct StagedKQuant {
  static constexpr int kStageBytes = kFiveBits ? 176 : 144;
  static constexpr int kNibbles = kFiveBits ? 48 : 16;
  template <int kRows>
  static __device__ void Dot(const uint8_t* row, int half, const StagedX& x, int m, float (&acc)[kRows]) {
    const uint4 header = *reinterpret_cast<const uint4*>(row);
    uint32_t nib[16];
    const auto* src = reinterpret_cast<const uint4*>(row + kNibbles + 64 * half);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const uint4 v = src[c];
      nib[4 * c] = v.x;
      nib[4 * c + 1] = v.y;
      nib[4 * c + 2] = v.z;
      nib[4 * c + 3] = v.w;
    }
    uint32_t qh[8] = {};
    if constexpr (kFiveBits) {
      const auto* h = reinterpret_cast<const uint4*>(row + 16);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 v = h[c];
        qh[4 * c] = v.x;
        qh[4 * c + 1] = v.y;
        qh[4 * c + 2] = v.z;
        qh[4 * c + 3] = v.w;
      }
    }
    const float d = HalfBitsToFloat(static_cast<uint16_t>(header.x & 0xffffu));
    const float dmin = HalfBitsToFloat(static_cast<uint16_t>(header.x >> 16));
    // Scales and mins of sub-blocks 4h..4h+3, a byte each (packed bytes 0-3 = header.y,
    // 4-7 = .z, 8-11 = .w): j < 4 takes the low 6 bits of bytes j and j + 4; j >= 4
    // joins the nibbles of byte j + 4 with the top 2 bits of bytes j - 4 and j.
    const uint32_t scales = half == 0 ? header.y & 0x3f3f3f3fu
                                      : (header.w & 0x0f0f0f0fu) | (((header.y >> 6) & 0x03030303u) << 4);
    const uint32_t mins = half == 0 ? header.z & 0x3f3f3f3fu
                                    : ((header.w >> 4) & 0x0f0f0f0fu) | (((header.z >> 6) & 0x03030303u) << 4);
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // sub-block 4h + j: group 2h + j / 2, high nibbles for odd j
      const int group = 2 * half + j / 2;
      int q[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t v = (nib[8 * (j / 2) + i] >> (4 * (j % 2))) & 0x0f0f0f0fu;
        if constexpr (kFiveBits) v |= ((qh[i] >> (2 * group + j % 2)) & 0x01010101u) << 4;
        q[i] = static_cast<int>(v);
      }
      const float scale = d * static_cast<float>((scales >> (8 * j)) & 0xffu);
      const float min = dmin * static_cast<float>((mins >> (8 * j)) & 0xffu);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < m) acc[r] += scale * x.D(r, j) * static_cast<float>(x.Dot8(r, j, q)) - min * x.S(r, j);
      }
    }
  }
};
template <>
struct StagedFormat<DType::kQ4_K> : StagedKQuant<false> {};
template <>
struct StagedFormat<DType::kQ5_K> : StagedKQuant<true> {};

template <DType kW>
constexpr int kStagedChunksPerRow = StagedFormat<kW>::kStageBytes / 16;
template <DType kW>
constexpr int kStagedPieces = kStagedCols * kStagedChunksPerRow<kW>;  // 16-byte copies a slot
template <DType kW>
constexpr int kStagedCopiesPerLane = (kStagedPieces<kW> + kWarpSize - 1) / kWarpSize;
template <DType kW>
constexpr size_t kStagedSlotBytes = size_t{kStagedCols} * StagedFormat<kW>::kStageBytes;
template <DType kW, int kBlocksPerSm>
constexpr int kStagedDepth = static_cast<int>(kStagedWeightBytes<kBlocksPerSm> / (kStagedWarps * kStagedSlotBytes<kW>));
static_assert(kStagedDepth<DType::kQ8_0, 1> == 4 && kStagedDepth<DType::kQ8_0, 2> == 2 && kStagedDepth<DType::kQ4_K, 2> == 3);

// Where a (column group, stage) item's weight bytes come from: one dense weight
// matrix, or the chosen experts' rows of MoeExperts at one token (matmul.h): the
// gate|up pass reads, for pair j of the token, expert ids[j]'s I gate rows and then
// its I up rows as output columns 2jI.., the down pass reads expert ids[j]'s rows
// n of down [H, I] as stages jI/256.. of a row of K = kI (x: the pairs' weighted
// activations back to back).
enum class StagedRows { kDense, kExpertGateUp, kExpertDown };

// x [m, K] of type X, out [m, N] of type Y.
template <typename X, typename Y>
struct StagedParams {
  const uint8_t* w;
  int64_t w_row_bytes;
  const X* x;
  int64_t x_row_stride;
  Y* out;
  int64_t out_row_stride;
  int n, m, stages, x_blocks_per_row;
  // Expert rows (kDense: unused): row r of expert e of a part starts at
  // part + e * expert_bytes + r * w_row_bytes (part: w, or w_up for the up rows).
  const int32_t* expert_ids;  // [k] the token's experts
  const uint8_t* w_up;
  int64_t expert_bytes;
  int part_rows;          // kExpertGateUp: I
  int stages_per_expert;  // kExpertDown: I / 256
  int experts, pairs;     // ids outside [0, experts) read zeros and (gate|up pass) are recorded
  BadIndexRecord* bad_index;
  // The shared expert as pair `pairs` (after the routed ones), or null: its gate and
  // up rows (kExpertGateUp) or its down rows (kExpertDown, in w_shared), with the
  // routed experts' row bytes.
  const uint8_t* w_shared;
  const uint8_t* w_shared_up;
};

template <DType kW, typename X, typename Y, int kRows, int kBlocksPerSm, StagedRows kMode>
__global__ void __launch_bounds__(kStagedThreads, kBlocksPerSm) QuantGemvStagedKernel(StagedParams<X, Y> p) {
  using Format = StagedFormat<kW>;
  constexpr int kDepth = kStagedDepth<kW, kBlocksPerSm>, kChunks = kStagedChunksPerRow<kW>;
  constexpr size_t kWeightBytes = kStagedWeightBytes<kBlocksPerSm>;
  constexpr size_t kSlotBytes = kStagedSlotBytes<kW>;
  extern __shared__ uint4 staged_shared[];
  auto* slots = reinterpret_cast<uint8_t*>(staged_shared);
  const int x_words = static_cast<int>(StagedXWords(p.x_blocks_per_row));
  auto* xq = reinterpret_cast<int32_t*>(slots + kWeightBytes);
  auto* xd = reinterpret_cast<float*>(xq + p.m * x_words);
  auto* xs = xd + p.m * p.x_blocks_per_row;
  auto* partial = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(xs) + (p.m * p.x_blocks_per_row * 4 + 15) / 16 * 16);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarpSize, warp = tid / kWarpSize;

  const int groups = (p.n + kStagedCols - 1) / kStagedCols;
  const int first_group = static_cast<int>(blockIdx.x), group_step = static_cast<int>(gridDim.x);
  const int my_groups = first_group < groups ? (groups - 1 - first_group) / group_step + 1 : 0;
  // This warp's stages of a group and its stream of (group, stage) items.
  const int per_group = p.stages > warp ? (p.stages - 1 - warp) / kStagedWarps + 1 : 0;
  const int items = my_groups * per_group;
  uint8_t* my_slots = slots + static_cast<size_t>(warp) * kDepth * kSlotBytes;
  // Piece lane + 32 j of a slot: row (lane + 32 j) / kChunks of the group, 16-byte
  // chunk (lane + 32 j) % kChunks of its stage, landing at byte 16 (lane + 32 j) of
  // the slot: the same offsets in every group and stage.
  uint32_t src_offset[kStagedCopiesPerLane<kW>];
#pragma unroll
  for (int j = 0; j < kStagedCopiesPerLane<kW>; ++j) {
    const int piece = lane + kWarpSize * j;
    src_offset[j] = static_cast<uint32_t>((piece / kChunks) * p.w_row_bytes + (piece % kChunks) * 16);
  }

  const auto issue = [&](int item) {
    const int group = first_group + (item / per_group) * group_step;
    const int stage = warp + kStagedWarps * (item % per_group);
    const uint8_t* base;
    int live_rows = min(kStagedCols, p.n - group * kStagedCols);  // rows past N read nothing
    if constexpr (kMode == StagedRows::kDense) {
      base = p.w + static_cast<int64_t>(group) * kStagedCols * p.w_row_bytes +
             static_cast<int64_t>(stage) * Format::kStageBytes;
    } else if constexpr (kMode == StagedRows::kExpertGateUp) {
      // part_rows is a multiple of 16: a group's rows lie in one part of one pair.
      const int row = group * kStagedCols, pair = row / (2 * p.part_rows), r = row % (2 * p.part_rows);
      const uint8_t* part;
      if (pair == p.pairs) {  // the shared expert (only with w_shared: n covers it)
        part = r < p.part_rows ? p.w_shared : p.w_shared_up;
      } else {
        const int expert = p.expert_ids[pair];
        if (expert < 0 || expert >= p.experts) live_rows = 0;
        part = (r < p.part_rows ? p.w : p.w_up) + static_cast<int64_t>(expert) * p.expert_bytes;
      }
      base = part + static_cast<int64_t>(r % p.part_rows) * p.w_row_bytes + static_cast<int64_t>(stage) * Format::kStageBytes;
    } else {
      const int pair = stage / p.stages_per_expert;
      const uint8_t* part;
      if (pair == p.pairs) {  // the shared expert's down rows
        part = p.w_shared;
      } else {
        const int expert = p.expert_ids[pair];
        if (expert < 0 || expert >= p.experts) live_rows = 0;
        part = p.w + static_cast<int64_t>(expert) * p.expert_bytes;
      }
      base = part + static_cast<int64_t>(group) * kStagedCols * p.w_row_bytes +
             static_cast<int64_t>(stage % p.stages_per_expert) * Format::kStageBytes;
    }
    const int live_pieces = live_rows * kChunks;
    const uint32_t dst = SharedAddress(my_slots + static_cast<size_t>(item % kDepth) * kSlotBytes);
#pragma unroll
    for (int j = 0; j < kStagedCopiesPerLane<kW>; ++j) {
      const int piece = lane + kWarpSize * j;
      if (piece < kStagedPieces<kW>) {
        const bool valid = piece < live_pieces;
        CopyAsync16(dst + 16 * piece, valid ? base + src_offset[j] : p.w, valid);
      }
    }
  };

  // A dense weight's first stages are requested before the wait for the kernel ahead
  // (gpu_launch.cuh): they stream in while it finishes; x is its output. Experts'
  // rows follow the ids that kernel wrote.
  if constexpr (kMode != StagedRows::kDense) {
    WaitForPriorKernels();
    if (kMode == StagedRows::kExpertGateUp && blockIdx.x == 0 && tid < p.pairs) {
      const int expert = p.expert_ids[tid];
      if (expert < 0 || expert >= p.experts) {
        RecordBadIndex(p.bad_index, CheckedIndexOp::kMoeExperts, tid, expert, p.experts, p.pairs);
      }
    }
  }
  for (int item = 0; item < kDepth - 1; ++item) {
    if (item < items) issue(item);
    CommitAsyncCopies();  // empty groups keep one group an item
  }
  if constexpr (kMode == StagedRows::kDense) WaitForPriorKernels();
  QuantizeXRowsTo(p.x, p.x_row_stride, p.x_blocks_per_row, static_cast<int64_t>(p.m) * p.x_blocks_per_row, tid,
                  kStagedThreads, [&](int64_t g, int part, const uint32_t (&packed)[2], float d, float s) {
                    const int row = static_cast<int>(g / p.x_blocks_per_row), block = static_cast<int>(g % p.x_blocks_per_row);
                    int32_t* q = xq + row * x_words + StagedXBlockWord(block) + 2 * part;
                    q[0] = static_cast<int32_t>(packed[0]);
                    q[1] = static_cast<int32_t>(packed[1]);
                    if (part == 0) {
                      xd[g] = d;
                      xs[g] = s;
                    }
                  });
  __syncthreads();  // x quantized
  const int column = lane / 2, half = lane % 2;
  int item = 0;
  for (int g = 0; g < my_groups; ++g) {
    float acc[kRows] = {};
    for (int s = 0; s < per_group; ++s, ++item) {
      WaitAsyncCopies<kDepth - 2>();  // this item's copies (this lane's) landed...
      __syncwarp();                   // ...and the warp's; the slot issued next is no longer read
      if (item + kDepth - 1 < items) issue(item + kDepth - 1);
      CommitAsyncCopies();
      const int block0 = (warp + kStagedWarps * s) * kStagedStageXBlocks + 4 * half;  // x block of the lane's first
      const StagedX x{xq + StagedXBlockWord(block0), xd + block0, xs + block0, x_words, p.x_blocks_per_row};
      Format::template Dot<kRows>(my_slots + static_cast<size_t>(item % kDepth) * kSlotBytes + column * Format::kStageBytes,
                                  half, x, p.m, acc);
    }
    float* buffer = partial + (g % 2) * kStagedWarps * kRows * kStagedCols;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sum = acc[r] + ShuffleXor(acc[r], 1);
      if (half == 0) buffer[(warp * kRows + r) * kStagedCols + column] = sum;
    }
    __syncthreads();
    // The other buffer is written only after the next group's barrier, by which time
    // these sums have been read.
    if (tid < kRows * kStagedCols) {
      const int r = tid / kStagedCols, c = tid % kStagedCols;
      const int out_column = (first_group + g * group_step) * kStagedCols + c;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kStagedWarps; ++w) sum += buffer[(w * kRows + r) * kStagedCols + c];
      if (r < p.m && out_column < p.n) p.out[r * p.out_row_stride + out_column] = FromFloat<Y>(sum);
    }
  }
}

template <DType kW, typename X, typename Y, int kRows, int kBlocksPerSm, StagedRows kMode = StagedRows::kDense>
void LaunchStaged(const StagedParams<X, Y>& p, Device device, gpuStream_t stream) {
  const auto kernel = &QuantGemvStagedKernel<kW, X, Y, kRows, kBlocksPerSm, kMode>;
  const size_t x_bytes = (StagedXBytes(p.m, static_cast<int64_t>(p.x_blocks_per_row) * kXBlockValues) + 15) / 16 * 16;
  const size_t shared = kStagedWeightBytes<kBlocksPerSm> + x_bytes + kStagedPartialBytes<kRows>;
  CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared)),
           "raising the shared-memory limit of MatMul's staged int8 GEMV");
  const int64_t resident = static_cast<int64_t>(MultiprocessorCount(device)) *
                           ResidentBlocksPerMultiprocessor(reinterpret_cast<const void*>(kernel), kStagedThreads, device, shared);
  const int64_t groups = (p.n + kStagedCols - 1) / kStagedCols;
  const auto grid = static_cast<unsigned>(std::max<int64_t>(1, std::min(groups, resident)));
  LaunchKernel(kernel, grid, kStagedThreads, shared, stream, p);
}

// The staged GEMV reads the formats the int8 tiles decode (quant_mma.cuh's
// DispatchQmmaWeight: Q8_0, Q4_0, Q4_K, Q5_K), each with a StagedFormat above.
template <typename Fn>
bool DispatchStagedFormat(DType dtype, Fn&& fn) {
  return DispatchQmmaWeight(dtype, std::forward<Fn>(fn));
}

}  // namespace

bool QuantGemvStagedTakes(const MatMulArgs& a) {
  const int64_t m = a.x.size(0), k = a.x.size(1);
  static_assert(kStagedStageValues == 256, "stages of WeightRowsSplitIn16ByteStages");
  return DispatchStagedFormat(a.w.dtype(), [](auto) {}) && m <= kQuantGemvStagedMaxRows &&
         WeightRowsSplitIn16ByteStages(a) && StagedXBytes(m, k) <= kStagedMaxXBytes && a.w.size(0) <= INT32_MAX &&
         kStagedCols * BytesFor(a.w.dtype(), a.w.stride(0)) <= UINT32_MAX;
}

void RunQuantGemvStaged(const MatMulArgs& a) {
  reach::Hit("MatMulGpu.quant_gemv_staged");
  const std::string variant = tuning::Variant(kStagedVariantFamily);
  if (!variant.empty() && variant != "one_block" && variant != "two_blocks") {
    throw Error("vt::MatMul: unknown variant '" + variant + "' forced for " + std::string(kStagedVariantFamily) +
                " (known: one_block, two_blocks)");
  }
  const bool two_blocks = variant == "two_blocks";
  gpuStream_t stream = PrepareDevice(a.out.device());
  const int64_t m = a.x.size(0), k = a.x.size(1);
  DispatchFloat(a.x.dtype(), "MatMul", [&](auto tag) {
    using X = decltype(tag);
    StagedParams<X, X> p{};
    p.w = static_cast<const uint8_t*>(a.w.data());
    p.w_row_bytes = BytesFor(a.w.dtype(), a.w.stride(0));
    p.x = static_cast<const X*>(a.x.data());
    p.x_row_stride = a.x.stride(0);
    p.out = static_cast<X*>(a.out.data());
    p.out_row_stride = a.out.stride(0);
    p.n = static_cast<int>(a.w.size(0));
    p.m = static_cast<int>(m);
    p.stages = static_cast<int>(k / kStagedStageValues);
    p.x_blocks_per_row = static_cast<int>(k / kXBlockValues);
    static_assert(kQuantGemvStagedMaxRows == 8, "the row templates cover 1 to kQuantGemvStagedMaxRows");
    const auto launch = [&](auto format, auto blocks_per_sm) {
      constexpr DType kW = decltype(format)::value;
      constexpr int kB = decltype(blocks_per_sm)::value;
      if (m == 1) {
        LaunchStaged<kW, X, X, 1, kB>(p, a.out.device(), stream);
      } else if (m == 2) {
        LaunchStaged<kW, X, X, 2, kB>(p, a.out.device(), stream);
      } else if (m <= 4) {
        LaunchStaged<kW, X, X, 4, kB>(p, a.out.device(), stream);
      } else {
        LaunchStaged<kW, X, X, 8, kB>(p, a.out.device(), stream);
      }
    };
    DispatchStagedFormat(a.w.dtype(), [&](auto format) {
      if (two_blocks) {
        launch(format, std::integral_constant<int, 2>{});
      } else {
        launch(format, std::integral_constant<int, 1>{});
      }
    });
  });
  CheckLaunch("MatMul");
}

bool StagedExpertsTake(const MoeExpertsArgs& a) {
  const DType dtype = a.w_down.dtype();
  if (a.x.size(0) != 1 || a.w_gate.dtype() != dtype || a.w_up.dtype() != dtype ||
      !DispatchStagedFormat(dtype, [](auto) {})) {
    return false;
  }
  const int64_t hidden = a.x.size(1), inter = a.w_gate.size(1), k = a.topk_ids.size(1);
  const auto aligned = [&](const Tensor& w) {
    return reinterpret_cast<uintptr_t>(w.data()) % 16 == 0 && BytesFor(dtype, w.stride(0)) % 16 == 0 &&
           BytesFor(dtype, w.stride(1)) % 16 == 0;
  };
  return hidden % kStagedStageValues == 0 && inter % kStagedStageValues == 0 && k <= kStagedThreads &&
         aligned(a.w_gate) && aligned(a.w_up) && aligned(a.w_down) && a.w_up.stride(0) == a.w_gate.stride(0) &&
         a.w_up.stride(1) == a.w_gate.stride(1) && StagedXBytes(1, hidden) <= kStagedMaxXBytes &&
         StagedXBytes(1, k * inter) <= kStagedMaxXBytes && 2 * k * inter <= INT32_MAX &&
         a.w_gate.size(0) <= INT32_MAX && kStagedCols * BytesFor(dtype, a.w_down.stride(1)) <= UINT32_MAX &&
         kStagedCols * BytesFor(dtype, a.w_gate.stride(1)) <= UINT32_MAX;
}

bool StagedExpertsTakeShared(const MoeExpertsArgs& a) {
  const DType dtype = a.w_down.dtype();
  const Tensor &gate = a.shared_w_gate, &up = a.shared_w_up, &down = a.shared_w_down;
  const auto same_rows = [&](const Tensor& shared, const Tensor& routed) {
    return shared.dtype() == dtype && reinterpret_cast<uintptr_t>(shared.data()) % 16 == 0 &&
           shared.stride(0) == routed.stride(1);
  };
  const int64_t k = a.topk_ids.size(1), inter = a.w_gate.size(1);
  return gate.defined() && gate.size(0) == inter && same_rows(gate, a.w_gate) && same_rows(up, a.w_up) &&
         same_rows(down, a.w_down) && StagedXBytes(1, (k + 1) * inter) <= kStagedMaxXBytes &&
         2 * (k + 1) * inter <= INT32_MAX;
}

void RunStagedExpertGateUp(const MoeExpertsArgs& a, const Tensor& gate_up) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const DType dtype = a.w_gate.dtype();
  const int64_t hidden = a.x.size(1), inter = a.w_gate.size(1), k = a.topk_ids.size(1);
  DispatchFloat(a.x.dtype(), "MoeExperts", [&](auto tag) {
    using X = decltype(tag);
    StagedParams<X, float> p{};
    p.w = static_cast<const uint8_t*>(a.w_gate.data());
    p.w_up = static_cast<const uint8_t*>(a.w_up.data());
    p.w_row_bytes = BytesFor(dtype, a.w_gate.stride(1));
    p.expert_bytes = BytesFor(dtype, a.w_gate.stride(0));
    p.x = static_cast<const X*>(a.x.data());
    p.x_row_stride = a.x.stride(0);
    p.out = gate_up.data_ptr<float>();
    p.out_row_stride = gate_up.stride(0);
    p.n = static_cast<int>(gate_up.size(1));  // 2kI, or 2(k + 1)I with the shared expert
    if (p.n == 2 * (k + 1) * inter) {
      p.w_shared = static_cast<const uint8_t*>(a.shared_w_gate.data());
      p.w_shared_up = static_cast<const uint8_t*>(a.shared_w_up.data());
    }
    p.m = 1;
    p.stages = static_cast<int>(hidden / kStagedStageValues);
    p.x_blocks_per_row = static_cast<int>(hidden / kXBlockValues);
    p.expert_ids = static_cast<const int32_t*>(a.topk_ids.data());
    p.part_rows = static_cast<int>(inter);
    p.experts = static_cast<int>(a.w_gate.size(0));
    p.pairs = static_cast<int>(k);
    p.bad_index = BadIndexRecordFor(a.x.device());
    DispatchStagedFormat(dtype, [&](auto format) {
      LaunchStaged<decltype(format)::value, X, float, 1, 1, StagedRows::kExpertGateUp>(p, a.x.device(), stream);
    });
  });
  CheckLaunch("MoeExperts");
}

void RunStagedExpertDown(const MoeExpertsArgs& a, const Tensor& activations) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const DType dtype = a.w_down.dtype();
  const int64_t inter = a.w_down.size(2), k = a.topk_ids.size(1);
  DispatchFloat(a.out.dtype(), "MoeExperts", [&](auto tag) {
    using Y = decltype(tag);
    StagedParams<float, Y> p{};
    p.w = static_cast<const uint8_t*>(a.w_down.data());
    p.w_row_bytes = BytesFor(dtype, a.w_down.stride(1));
    p.expert_bytes = BytesFor(dtype, a.w_down.stride(0));
    p.x = activations.data_ptr<float>();
    p.x_row_stride = activations.stride(0);
    p.out = static_cast<Y*>(a.out.data());
    p.out_row_stride = a.out.stride(0);
    p.n = static_cast<int>(a.w_down.size(1));
    p.m = 1;
    const int64_t pairs = activations.size(1) / inter;  // k, or k + 1 with the shared expert
    if (pairs == k + 1) p.w_shared = static_cast<const uint8_t*>(a.shared_w_down.data());
    p.stages = static_cast<int>(pairs * inter / kStagedStageValues);
    p.x_blocks_per_row = static_cast<int>(pairs * inter / kXBlockValues);
    p.expert_ids = static_cast<const int32_t*>(a.topk_ids.data());
    p.stages_per_expert = static_cast<int>(inter / kStagedStageValues);
    p.experts = static_cast<int>(a.w_down.size(0));
    p.pairs = static_cast<int>(k);
    DispatchStagedFormat(dtype, [&](auto format) {
      LaunchStaged<decltype(format)::value, float, Y, 1, 1, StagedRows::kExpertDown>(p, a.x.device(), stream);
    });
  });
  CheckLaunch("MoeExperts");
}

#else  // HIP: no cp.async

bool QuantGemvStagedTakes(const MatMulArgs&) { return false; }

void RunQuantGemvStaged(const MatMulArgs& a) {
  throw Error("vt::MatMul on " + a.x.device().ToString() +
              ": internal error: the staged int8 GEMV (cp.async) was chosen on a HIP device");
}

bool StagedExpertsTake(const MoeExpertsArgs&) { return false; }
bool StagedExpertsTakeShared(const MoeExpertsArgs&) { return false; }

void RunStagedExpertGateUp(const MoeExpertsArgs& a, const Tensor&) {
  throw Error("vt::MoeExperts on " + a.x.device().ToString() +
              ": internal error: the staged int8 GEMV (cp.async) was chosen on a HIP device");
}
void RunStagedExpertDown(const MoeExpertsArgs& a, const Tensor& t) { RunStagedExpertGateUp(a, t); }

#endif

}  // namespace vt::gpu
