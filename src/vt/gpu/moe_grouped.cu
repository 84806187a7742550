// MoeExperts for many tokens on tensor cores (CUDA): the (token, choice) pairs
// grouped by expert, each expert's weights read once per 64 of its pairs.
//
// Shapes as moe.cu: x [T, H] (strided rows), w_gate, w_up [E, I, H], w_down [E, H, I]
// (each expert's rows contiguous, any expert stride; a GGUF block dtype or bf16 /
// f16), topk_weights / topk_ids [T, k], out [T, H]; H and I multiples of 32.
//
// The per-pair kernels of moe.cu read an expert's rows once per pair routed to it:
// a 512-token prompt of the 35B-A3B shape (256 experts, 8 per token) reads each
// expert's 3 x 1 MB of Q8_0 about 16 times per layer. Here:
//   1. CountPairs: each pair takes a slot of its expert (an atomic counter; the
//      slot order within an expert does not change any result, since every pair's
//      rows are computed and written separately). Bad ids are recorded and skipped.
//   2. ScanExperts: per-expert offsets into the sorted pair list and the first
//      64-row tile of each expert.
//   3. ScatterPairs: sorted[offset[e] + slot] = pair.
//   4. GroupedGemm (gate|up): block (tile, 64 columns of I): a tile is up to 64
//      pairs of one expert; x rows are gathered into shared memory as bf16, the
//      expert's gate and up rows decoded from their dtype into shared memory 32
//      values at a time (one quant block), and both products accumulated with
//      mma.m16n8k16 (f32); the epilogue writes silu(gate) * up to hidden [T k, I].
//   5. GroupedGemm (down): the same with hidden as the rows and w_down, writing each
//      pair's down projection to y [T k, H] (f32).
//   6. CombinePairs: out[t] = sum_j w[t, j] y[t k + j] in j order (deterministic).
// Q8_0, Q4_0, Q4_K and Q5_K weights take the int8 form of steps 4 and 5
// (GroupedQmma: the tiles of quant_mma.cuh, x and hidden quantized per 32 values,
// each weight block decoded once per tile straight to int8, 16-pair tiles when
// experts average fewer than 16 pairs). HIP has no mma.sync: MoeGroupedSupported
// is false there and moe.cu keeps its per-pair kernels.
#include <type_traits>

#include "vt/reach.h"

#include "gpu_dot.cuh"
#include "gpu_mma.cuh"
#include "matmul.h"
#include "moe_grouped.h"
#include "quant_mma.cuh"

namespace vt::gpu {

#if !VT_GPU_HIP
namespace {

constexpr int kGroupRows = 64;     // pairs per tile
constexpr int kGroupCols = 64;     // output columns per block
constexpr int kGroupK = 32;        // values per K step (one quant block)
constexpr int kGroupThreads = 128;
constexpr int kGroupPitch = kGroupK + 8;  // bf16 per shared row (16 bytes of padding)

struct GroupedParams {
  const void* a;        // gate|up: x [T, H] of a_dtype, rows by token; down: hidden f32 [T k, I]
  DType a_dtype;
  int64_t a_row_stride;
  bool a_by_token;      // rows of a are tokens (pair / k), else pairs
  const void* w0;       // gate (or down)
  const void* w1;       // up, or null
  DType w_dtype;
  int64_t w0_expert_stride, w1_expert_stride, w_row_stride;  // elements
  int64_t block_elems, block_bytes;
  const int32_t* sorted_pairs;
  const int32_t* expert_offsets;  // [E + 1]
  const int32_t* tile_starts;     // [E + 1]
  int64_t experts, k, n, kdim;
  float* out;  // gate|up: hidden [T k, n]; down: y [T k, n]
};

__global__ void CountPairs(const int32_t* ids, int64_t pairs, int64_t experts, int64_t k, int32_t* counts,
                           int32_t* slots, BadIndexRecord* bad_index) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t pair = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (pair >= pairs) return;
  const int32_t e = ids[pair];
  if (e < 0 || e >= experts) {
    slots[pair] = -1;
    RecordBadIndex(bad_index, CheckedIndexOp::kMoeExperts, pair, e, experts, k);
    return;
  }
  slots[pair] = atomicAdd(&counts[e], 1);
}

// One thread: E is a few hundred at most, and this runs once per layer.
__global__ void ScanExperts(const int32_t* counts, int64_t experts, int tile_rows, int32_t* offsets,
                            int32_t* tile_starts) {
  WaitForPriorKernels();  // gpu_launch.cuh
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int32_t offset = 0, tiles = 0;
  for (int64_t e = 0; e < experts; ++e) {
    offsets[e] = offset;
    tile_starts[e] = tiles;
    offset += counts[e];
    tiles += (counts[e] + tile_rows - 1) / tile_rows;
  }
  offsets[experts] = offset;
  tile_starts[experts] = tiles;
}

__global__ void ScatterPairs(const int32_t* ids, const int32_t* slots, int64_t pairs, const int32_t* offsets,
                             int32_t* sorted) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t pair = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (pair >= pairs || slots[pair] < 0) return;
  sorted[offsets[ids[pair]] + slots[pair]] = static_cast<int32_t>(pair);
}

// Largest e with tile_starts[e] <= tile.
__device__ inline int64_t ExpertOfTile(const int32_t* tile_starts, int64_t experts, int64_t tile) {
  int64_t lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (tile_starts[mid] <= tile) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The expert of tile `tile` and its pairs sorted[first, first + count) (count <= rows).
struct TilePairs {
  int64_t expert, first, count;
};
__device__ inline TilePairs PairsOfTile(const int32_t* tile_starts, const int32_t* expert_offsets, int64_t experts,
                                        int64_t tile, int64_t rows) {
  const int64_t e = ExpertOfTile(tile_starts, experts, tile);
  const int64_t first = expert_offsets[e] + (tile - tile_starts[e]) * rows;
  const int64_t left = expert_offsets[e + 1] - first;
  return {e, first, left < rows ? left : rows};
}

template <DType kW, bool kTwo>
__global__ void __launch_bounds__(kGroupThreads) GroupedGemm(GroupedParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ __align__(16) bf16_t a_tile[kGroupRows * kGroupPitch];
  __shared__ __align__(16) bf16_t w0_tile[kGroupCols * kGroupPitch];
  __shared__ __align__(16) bf16_t w1_tile[kTwo ? kGroupCols * kGroupPitch : 8];
  __shared__ int32_t rows[kGroupRows];
  const int64_t tile = blockIdx.x;
  if (tile >= p.tile_starts[p.experts]) return;  // uniform: past the last tile
  const auto [e, first, count] = PairsOfTile(p.tile_starts, p.expert_offsets, p.experts, tile, kGroupRows);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kGroupCols;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  if (tid < kGroupRows) rows[tid] = tid < count ? p.sorted_pairs[first + tid] : -1;
  __syncthreads();

  // Thread t stages row t / 2, values (t % 2) * 16 .. + 16 of each tile.
  const int stage_row = tid / 2, stage_col = (tid % 2) * 16;
  const int32_t my_pair = rows[stage_row];
  const int64_t a_row = my_pair < 0 ? -1 : (p.a_by_token ? my_pair / p.k : my_pair);
  const int64_t w_row = n0 + stage_row;
  const bool w_valid = w_row < p.n;
  const uint8_t* w0_row = static_cast<const uint8_t*>(
      WeightRow(p.w0, e * p.w0_expert_stride + (w_valid ? w_row : 0) * p.w_row_stride, 1, p.block_elems, p.block_bytes));
  const uint8_t* w1_row =
      kTwo ? static_cast<const uint8_t*>(WeightRow(p.w1, e * p.w1_expert_stride + (w_valid ? w_row : 0) * p.w_row_stride,
                                                   1, p.block_elems, p.block_bytes))
           : nullptr;

  float acc0[kGroupCols / 8][4] = {}, acc1[kTwo ? kGroupCols / 8 : 1][4] = {};
  for (int64_t k0 = 0; k0 < p.kdim; k0 += kGroupK) {
    __syncthreads();  // the previous step's tiles are no longer read
    WithFloatPointer(p.a, p.a_dtype, [&](const auto* a) {  // the 16 loads back to back (gpu_common.cuh)
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int64_t i = k0 + stage_col + j;
        a_tile[stage_row * kGroupPitch + stage_col + j] =
            FromFloat<bf16_t>(a_row >= 0 ? ToFloat(a[a_row * p.a_row_stride + i]) : 0.0f);
      }
    });
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int64_t i = k0 + stage_col + j;
      w0_tile[stage_row * kGroupPitch + stage_col + j] = FromFloat<bf16_t>(w_valid ? WeightAt(w0_row, kW, i) : 0.0f);
      if constexpr (kTwo) {
        w1_tile[stage_row * kGroupPitch + stage_col + j] = FromFloat<bf16_t>(w_valid ? WeightAt(w1_row, kW, i) : 0.0f);
      }
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kGroupK / 16; ++ks) {
      uint32_t a[4];
      LoadMatrices(a, a_tile + (warp * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * kGroupPitch + ks * 16 + 8 * (lane / 16));
#pragma unroll
      for (int np = 0; np < kGroupCols / 16; ++np) {
        const int b_offset = (np * 16 + lane % 8 + 8 * (lane / 16)) * kGroupPitch + ks * 16 + 8 * ((lane / 8) % 2);
        uint32_t b[4];
        LoadMatrices(b, w0_tile + b_offset);
        MmaType<bf16_t>::Mma(acc0[2 * np], a, b[0], b[1]);
        MmaType<bf16_t>::Mma(acc0[2 * np + 1], a, b[2], b[3]);
        if constexpr (kTwo) {
          LoadMatrices(b, w1_tile + b_offset);
          MmaType<bf16_t>::Mma(acc1[2 * np], a, b[0], b[1]);
          MmaType<bf16_t>::Mma(acc1[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
  }

  const int quad_row = lane / 4, quad_col = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + quad_row + 8 * half;
    const int32_t pair = rows[r];
    if (pair < 0) continue;
#pragma unroll
    for (int t = 0; t < kGroupCols / 8; ++t) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t n = n0 + t * 8 + 2 * quad_col + c;
        if (n >= p.n) continue;
        const float g = acc0[t][2 * half + c];
        float value = g;
        if constexpr (kTwo) value = Silu(g) * acc1[t][2 * half + c];
        p.out[static_cast<int64_t>(pair) * p.n + n] = value;
      }
    }
  }
}

// The int8 tensor-core form of GroupedGemm for the formats quant_mma.cuh decodes:
// a tile is up to 16 kWarpsM pairs of one expert, its rows the quantized x of the
// pairs' tokens (gate|up) or the pairs' quantized hidden rows (down).
struct GroupedQmmaParams {
  const XBlock* a;         // gate|up: x quantized [T, H / 32]; down: hidden quantized [T k, I / 32]
  bool a_by_token;
  const uint8_t* w0;       // gate (or down), expert 0
  const uint8_t* w1;       // up, or null
  int64_t w0_expert_bytes, w1_expert_bytes, w_row_bytes;
  const int32_t* sorted_pairs;
  const int32_t* expert_offsets;  // [E + 1]
  const int32_t* tile_starts;     // [E + 1], in tiles of 16 kWarpsM pairs
  int64_t experts, k, n, kblocks;
  float* out;  // gate|up: hidden [T k, n] = silu(gate) * up; down: y [T k, n]
};

template <DType kW, int kWarpsM, bool kTwo>
__global__ void __launch_bounds__(kQmmaThreads) GroupedQmma(GroupedQmmaParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  using Shared = QmmaShared<kWarpsM, kTwo>;
  using Acc = QmmaAccumulators<kWarpsM, kTwo>;
  constexpr int kRows = Shared::kRows;
  __shared__ Shared sh;
  __shared__ int32_t pairs[kRows], a_rows[kRows];
  const int64_t tile = blockIdx.x;
  if (tile >= p.tile_starts[p.experts]) return;  // uniform: past the last tile
  const auto [e, first, count] = PairsOfTile(p.tile_starts, p.expert_offsets, p.experts, tile, kRows);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kQmmaCols;
  for (int r = static_cast<int>(threadIdx.x); r < kRows; r += kQmmaThreads) {
    const int32_t pair = r < count ? p.sorted_pairs[first + r] : -1;
    pairs[r] = pair;
    a_rows[r] = pair < 0 ? -1 : (p.a_by_token ? static_cast<int32_t>(pair / p.k) : pair);
  }
  QmmaOperands op{};
  op.x = p.a;
  op.x_row_blocks = p.kblocks;
  op.w[0] = p.w0 + e * p.w0_expert_bytes;
  op.w[1] = kTwo ? p.w1 + e * p.w1_expert_bytes : nullptr;
  op.w_row_bytes = p.w_row_bytes;
  op.columns = p.n;
  op.kblocks = p.kblocks;
  Acc acc;
  QmmaAccumulate<kW, kWarpsM, kTwo>(op, a_rows, n0, sh, acc);
#pragma unroll
  for (int t = 0; t < Acc::kTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int32_t pair = pairs[Acc::Row(i)];
      const int64_t n = n0 + Acc::Column(t, i);
      if (pair < 0 || n >= p.n) continue;
      float value = acc.c[0][t][i];
      if constexpr (kTwo) value = Silu(value) * acc.c[1][t][i];
      p.out[static_cast<int64_t>(pair) * p.n + n] = value;
    }
  }
}

// out[t, n] = sum_j w[t, j] * y[t k + j, n] over the valid choices, in j order.
template <typename X>
__global__ void CombinePairs(const float* y, const float* weights, const int32_t* ids, int64_t tokens, int64_t k,
                             int64_t experts, int64_t n, X* out, int64_t out_row_stride) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= tokens * n) return;
  const int64_t t = i / n, c = i % n;
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t pair = t * k + j;
    if (ids[pair] < 0 || ids[pair] >= experts) continue;
    sum += weights[pair] * y[pair * n + c];
  }
  out[t * out_row_stride + c] = FromFloat<X>(sum);
}

template <DType kW>
void LaunchGemm(const GroupedParams& p, bool two, int64_t max_tiles, gpuStream_t stream) {
  const dim3 grid(static_cast<unsigned>(max_tiles), GridFor(p.n, kGroupCols, "MoeExperts"));
  LaunchKernel(two ? GroupedGemm<kW, true> : GroupedGemm<kW, false>, grid, kGroupThreads, 0, stream, p);
}

// Calls fn(integral_constant<DType, w>) for the weight dtypes the grouped kernel decodes.
template <typename Fn>
bool DispatchGroupedWeight(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kQ8_0: fn(std::integral_constant<DType, DType::kQ8_0>{}); return true;
    case DType::kQ4_0: fn(std::integral_constant<DType, DType::kQ4_0>{}); return true;
    case DType::kQ4_K: fn(std::integral_constant<DType, DType::kQ4_K>{}); return true;
    case DType::kQ5_K: fn(std::integral_constant<DType, DType::kQ5_K>{}); return true;
    case DType::kQ6_K: fn(std::integral_constant<DType, DType::kQ6_K>{}); return true;
    case DType::kBF16: fn(std::integral_constant<DType, DType::kBF16>{}); return true;
    case DType::kF16: fn(std::integral_constant<DType, DType::kF16>{}); return true;
    default: return false;
  }
}

}  // namespace

bool MoeGroupedSupported(const MoeExpertsArgs& a) {
  const DType w = a.w_gate.dtype();
  if (a.w_up.dtype() != w || a.w_down.dtype() != w) return false;
  const bool known = DispatchGroupedWeight(w, [](auto) {});
  // Float weights only with 16-bit activations: the products run in bf16, which an
  // f32 x with f32-accurate weights would not expect.
  if (!known || (!IsBlockDType(w) && a.x.dtype() == DType::kF32)) return false;
  if (a.x.size(1) % kGroupK != 0 || a.w_gate.size(1) % kGroupK != 0) return false;
  return a.w_gate.stride(2) == 1 && a.w_up.stride(2) == 1 && a.w_down.stride(2) == 1 &&
         a.w_gate.stride(1) == a.w_up.stride(1) && a.x.stride(1) == 1;
}

bool MoeGroupedInt8(const MoeExpertsArgs& a) {
  const DType w = a.w_gate.dtype();
  return MoeGroupedSupported(a) && DispatchQmmaWeight(w, [](auto) {}) && QuantLanesRead(a.w_gate) &&
         QuantLanesRead(a.w_up) && QuantLanesRead(a.w_down) && reinterpret_cast<uintptr_t>(a.w_gate.data()) % 2 == 0 &&
         reinterpret_cast<uintptr_t>(a.w_up.data()) % 2 == 0 && reinterpret_cast<uintptr_t>(a.w_down.data()) % 2 == 0;
}

namespace {

// The int8 route: 16-pair tiles while an expert averages fewer than
// kQmmaLargeTilePairs pairs (decode steps, short prompts: a 64-pair tile would run
// three idle warps), 64-pair tiles from there.
constexpr int64_t kQmmaLargeTilePairs = 16;

template <DType kW, int kWarpsM>
void LaunchGroupedQmma(const GroupedQmmaParams& p, bool two, int64_t max_tiles, gpuStream_t stream) {
  const dim3 grid(static_cast<unsigned>(max_tiles), GridFor(p.n, kQmmaCols, "MoeExperts"));
  LaunchKernel(two ? GroupedQmma<kW, kWarpsM, true> : GroupedQmma<kW, kWarpsM, false>, grid, kQmmaThreads, 0, stream,
               p);
}

// gate|up then down on the int8 tiles; hidden and y as the bf16 route.
void RunGroupedInt8(const MoeExpertsArgs& a, const GroupedParams& sorted, int tile_rows, int64_t max_tiles,
                    const Tensor& hidden, const Tensor& y, gpuStream_t stream) {
  const Tensor x_blocks = QuantizeActivations(a.x);
  const DType w = a.w_gate.dtype();
  GroupedQmmaParams p{};
  p.sorted_pairs = sorted.sorted_pairs;
  p.expert_offsets = sorted.expert_offsets;
  p.tile_starts = sorted.tile_starts;
  p.experts = sorted.experts;
  p.k = sorted.k;
  DispatchQmmaWeight(w, [&](auto tag) {
    constexpr DType kW = decltype(tag)::value;
    const auto launch = [&](const GroupedQmmaParams& q, bool two) {
      if (tile_rows == 16) LaunchGroupedQmma<kW, 1>(q, two, max_tiles, stream);
      else LaunchGroupedQmma<kW, 4>(q, two, max_tiles, stream);
    };
    GroupedQmmaParams up = p;
    up.a = static_cast<const XBlock*>(x_blocks.data()), up.a_by_token = true;
    up.w0 = static_cast<const uint8_t*>(a.w_gate.data()), up.w1 = static_cast<const uint8_t*>(a.w_up.data());
    up.w0_expert_bytes = BytesFor(w, a.w_gate.stride(0)), up.w1_expert_bytes = BytesFor(w, a.w_up.stride(0));
    up.w_row_bytes = BytesFor(w, a.w_gate.stride(1));
    up.n = a.w_gate.size(1), up.kblocks = a.x.size(1) / kXBlockValues, up.out = hidden.data_ptr<float>();
    launch(up, true);
    const Tensor hidden_blocks = QuantizeActivations(hidden);
    GroupedQmmaParams down = p;
    down.a = static_cast<const XBlock*>(hidden_blocks.data()), down.a_by_token = false;
    down.w0 = static_cast<const uint8_t*>(a.w_down.data()), down.w1 = nullptr;
    down.w0_expert_bytes = BytesFor(w, a.w_down.stride(0)), down.w_row_bytes = BytesFor(w, a.w_down.stride(1));
    down.n = a.x.size(1), down.kblocks = a.w_gate.size(1) / kXBlockValues, down.out = y.data_ptr<float>();
    launch(down, false);
  });
}

}  // namespace

void RunMoeGrouped(const MoeExpertsArgs& a, gpuStream_t stream) {
  const Device device = a.x.device();
  const int64_t tokens = a.x.size(0), k = a.topk_ids.size(1), pairs = tokens * k;
  const int64_t experts = a.w_gate.size(0), hidden_size = a.x.size(1), inter_size = a.w_gate.size(1);
  const bool int8 = MoeGroupedInt8(a);
  const int tile_rows = !int8 || pairs >= kQmmaLargeTilePairs * experts ? kGroupRows : 16;
  const Tensor counts = Tensor::Zeros({experts}, DType::kI32, device);
  const Tensor slots = Tensor::Empty({pairs}, DType::kI32, device);
  const Tensor offsets = Tensor::Empty({experts + 1}, DType::kI32, device);
  const Tensor tile_starts = Tensor::Empty({experts + 1}, DType::kI32, device);
  const Tensor sorted = Tensor::Empty({pairs}, DType::kI32, device);
  const auto* ids = static_cast<const int32_t*>(a.topk_ids.data());
  const unsigned pair_blocks = GridFor(pairs, kElementwiseThreads, "MoeExperts");
  LaunchKernel(CountPairs, pair_blocks, kElementwiseThreads, 0, stream, ids, pairs, experts, k,
               counts.data_ptr<int32_t>(), slots.data_ptr<int32_t>(), BadIndexRecordFor(device));
  LaunchKernel(ScanExperts, 1, 32, 0, stream, counts.data_ptr<int32_t>(), experts, tile_rows,
               offsets.data_ptr<int32_t>(), tile_starts.data_ptr<int32_t>());
  LaunchKernel(ScatterPairs, pair_blocks, kElementwiseThreads, 0, stream, ids, slots.data_ptr<int32_t>(), pairs,
               offsets.data_ptr<int32_t>(), sorted.data_ptr<int32_t>());
  // Tiles: sum_e ceil(count_e / rows) <= pairs / rows + experts; blocks past the real
  // count return at once (the count stays on the device).
  const int64_t max_tiles = pairs / tile_rows + experts;
  const Tensor hidden = Tensor::Empty({pairs, inter_size}, DType::kF32, device);
  const Tensor y = Tensor::Empty({pairs, hidden_size}, DType::kF32, device);
  const DType w = a.w_gate.dtype();
  GroupedParams p{};
  p.w_dtype = w;
  p.block_elems = Info(w).block_elems;
  p.block_bytes = Info(w).block_bytes;
  p.sorted_pairs = sorted.data_ptr<int32_t>();
  p.expert_offsets = offsets.data_ptr<int32_t>();
  p.tile_starts = tile_starts.data_ptr<int32_t>();
  p.experts = experts;
  p.k = k;
  if (int8) {
    reach::Hit("MoeExpertsGpu.grouped_int8");
    RunGroupedInt8(a, p, tile_rows, max_tiles, hidden, y, stream);
  } else {
    reach::Hit("MoeExpertsGpu.grouped_bf16");
    DispatchGroupedWeight(w, [&](auto tag) {
      constexpr DType kW = decltype(tag)::value;
      GroupedParams up = p;  // gate|up: rows are tokens of x
      up.a = a.x.data(), up.a_dtype = a.x.dtype(), up.a_row_stride = a.x.stride(0), up.a_by_token = true;
      up.w0 = a.w_gate.data(), up.w1 = a.w_up.data();
      up.w0_expert_stride = a.w_gate.stride(0), up.w1_expert_stride = a.w_up.stride(0);
      up.w_row_stride = a.w_gate.stride(1);
      up.n = inter_size, up.kdim = hidden_size, up.out = hidden.data_ptr<float>();
      LaunchGemm<kW>(up, true, max_tiles, stream);
      GroupedParams down = p;  // rows are the pairs' hidden rows
      down.a = hidden.data(), down.a_dtype = DType::kF32, down.a_row_stride = inter_size, down.a_by_token = false;
      down.w0 = a.w_down.data(), down.w1 = nullptr;
      down.w0_expert_stride = a.w_down.stride(0), down.w_row_stride = a.w_down.stride(1);
      down.n = hidden_size, down.kdim = inter_size, down.out = y.data_ptr<float>();
      LaunchGemm<kW>(down, false, max_tiles, stream);
    });
  }
  DispatchFloat(a.x.dtype(), "MoeExperts", [&](auto tag) {
    using X = decltype(tag);
    LaunchKernel(CombinePairs<X>, GridFor(tokens * hidden_size, kElementwiseThreads, "MoeExperts"), kElementwiseThreads,
                 0, stream, y.data_ptr<float>(), a.topk_weights.data_ptr<float>(), ids, tokens, k, experts, hidden_size,
                 static_cast<X*>(a.out.data()), a.out.stride(0));
  });
  CheckLaunch("MoeExperts");
}

#else  // HIP: no mma.sync / ldmatrix

bool MoeGroupedSupported(const MoeExpertsArgs&) { return false; }
bool MoeGroupedInt8(const MoeExpertsArgs&) { return false; }

void RunMoeGrouped(const MoeExpertsArgs& a, gpuStream_t) {
  throw Error("vt::MoeExperts on " + a.x.device().ToString() +
              ": internal error: the grouped tensor-core kernel (mma.sync) was chosen on a HIP device");
}

#endif

}  // namespace vt::gpu
