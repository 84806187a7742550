// GPU kernels of the mixture-of-experts ops: MoeRouter, MoeExperts.
//
// Shapes (op_args.h): MoeRouter logits [T, E] float (strided rows) -> topk_weights
// [T, k] f32, topk_ids [T, k] i32. MoeExperts x [T, H]; w_gate, w_up [E, I, H],
// w_down [E, H, I] of any MatMul weight dtype (each expert's rows contiguous, the
// expert stride free); topk_weights / topk_ids [T, k]; out [T, H].
//
// Router: one warp per token up to 8 x warp-width experts (RouterWarpRows: the row
// in registers, a picked expert masked out), else one block per token (RouterRows:
// round r picks the largest logit strictly after round r-1's pick in the order
// logit descending, id ascending, with no per-expert scratch). Softmax is
// monotonic, so the top-k is taken on the logits; ties go to the lower id both
// ways. Probabilities come from the row's max and sum in f32.
//
// Experts: two launches, no atomics (deterministic). ExpertHidden: one warp per
// (token, choice, intermediate row) computes silu(gate . x) * (up . x) into an f32
// workspace [T, k, I]; ExpertDown: one warp per (token, hidden row) sums
// w_j * (down_j . h_j) over the token's k choices. Block-format weights that the
// int8 dot lanes read (gpu_quant_dot.cuh: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) are dotted
// with x and h quantized to 8 bits per 32 values, as MatMul's GEMV does (x by each
// ExpertHidden block into its shared memory when the row fits, so no launch before); other
// weights are decoded from their dtype element by element (gpu_dot.cuh). An expert id outside [0, E) is skipped
// and recorded for the host (gpu_runtime.h: reported at the device's next wait for
// its queue), so the ids are never read back here. Many tokens (pairs >= 32 x experts)
// take the grouped tensor-core kernels of moe_grouped.cu instead (CUDA).
#include <string>
#include <type_traits>

#include "gpu_dot.cuh"
#include "gpu_quant_dot.cuh"
#include "matmul.h"
#include "moe_grouped.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {
namespace {

template <typename T>
struct RouterParams {
  const T* logits;
  int64_t row_stride, experts, k;
  float* weights;
  int32_t* ids;
  bool renormalize;
};

constexpr int kRouterThreads = 128;

// The better of two (logit, id) candidates: larger logit, then lower id.
__device__ inline void KeepBetter(float& value, int& id, float other_value, int other_id) {
  if (other_id >= 0 && (id < 0 || other_value > value || (other_value == value && other_id < id))) {
    value = other_value;
    id = other_id;
  }
}

template <typename T>
__global__ void __launch_bounds__(kRouterThreads) RouterRows(RouterParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float scratch[kMaxWarpsPerBlock];
  __shared__ float pick_values[kMaxWarpsPerBlock];
  __shared__ int pick_ids[kMaxWarpsPerBlock];
  __shared__ float previous_value;
  __shared__ int previous_id;
  const int64_t token = blockIdx.x;
  const T* row = p.logits + token * p.row_stride;
  float local_max = -INFINITY;
  for (int64_t e = threadIdx.x; e < p.experts; e += blockDim.x) local_max = fmaxf(local_max, ToFloat(row[e]));
  const float row_max = BlockMax(local_max, scratch);
  float local_sum = 0.0f;
  for (int64_t e = threadIdx.x; e < p.experts; e += blockDim.x) local_sum += expf(ToFloat(row[e]) - row_max);
  const float row_sum = BlockSum(local_sum, scratch);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  float picked_sum = 0.0f;  // meaningful in thread 0
  for (int64_t r = 0; r < p.k; ++r) {
    float best = -INFINITY;
    int best_id = -1;
    for (int64_t e = threadIdx.x; e < p.experts; e += blockDim.x) {
      const float v = ToFloat(row[e]);
      const bool after_previous = r == 0 || v < previous_value || (v == previous_value && e > previous_id);
      if (after_previous) KeepBetter(best, best_id, v, static_cast<int>(e));
    }
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
      KeepBetter(best, best_id, ShuffleXor(best, offset), ShuffleXor(best_id, offset));
    }
    if (lane == 0) {
      pick_values[warp] = best;
      pick_ids[warp] = best_id;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < static_cast<int>(blockDim.x / kWarpSize); ++w) {
        KeepBetter(best, best_id, pick_values[w], pick_ids[w]);
      }
      const float prob = expf(best - row_max) / row_sum;
      p.weights[token * p.k + r] = prob;
      p.ids[token * p.k + r] = best_id;
      picked_sum += prob;
      previous_value = best;
      previous_id = best_id;
    }
    __syncthreads();
  }
  if (p.renormalize && threadIdx.x == 0) {
    for (int64_t r = 0; r < p.k; ++r) p.weights[token * p.k + r] /= picked_sum;
  }
}

// Up to this many logits a lane, a token's row fits one warp's registers
// (kRouterWarpValues x warp width: 256 experts on CUDA, 512 on HIP), and the warp
// kernel takes it: k rounds of a warp arg-max by shuffles, no block barrier. The
// block kernel above took 10.2 us a token for 256 experts and k = 8 on an H200
// (ncu, one 35B-A3B decode step: 7% of the step), its rounds each two barriers.
constexpr int kRouterWarpValues = 8;

// One warp per token, blockDim / warp tokens per block. Lane l holds logits
// l, l + warp, ...; a picked logit's bit is cleared in its lane's `open` mask.
template <typename T>
__global__ void __launch_bounds__(kRouterThreads) RouterWarpRows(RouterParams<T> p, int64_t tokens) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (token >= tokens) return;  // whole warps leave together; no block barrier follows
  const T* row = p.logits + token * p.row_stride;
  float values[kRouterWarpValues];
  unsigned open = 0;
  float local_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kRouterWarpValues; ++j) {
    const int64_t e = lane + static_cast<int64_t>(j) * kWarpSize;
    values[j] = e < p.experts ? ToFloat(row[e]) : -INFINITY;
    if (e < p.experts) {
      open |= 1u << j;
      local_max = fmaxf(local_max, values[j]);
    }
  }
  const float row_max = WarpMax(local_max);
  float local_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kRouterWarpValues; ++j) {
    if (open & (1u << j)) local_sum += expf(values[j] - row_max);
  }
  const float row_sum = WarpSum(local_sum);
  float picked_sum = 0.0f;
  for (int64_t r = 0; r < p.k; ++r) {
    float best = -INFINITY;
    int best_id = -1, best_slot = -1;
#pragma unroll
    for (int j = 0; j < kRouterWarpValues; ++j) {  // ids ascend with j: a tie keeps the lower one
      if ((open & (1u << j)) && (best_id < 0 || values[j] > best)) {
        best = values[j];
        best_id = lane + j * kWarpSize;
        best_slot = j;
      }
    }
    float winner = best;
    int winner_id = best_id;
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
      KeepBetter(winner, winner_id, ShuffleXor(winner, offset), ShuffleXor(winner_id, offset));
    }
    if (winner_id == best_id && best_id >= 0) open &= ~(1u << best_slot);
    const float prob = expf(winner - row_max) / row_sum;
    picked_sum += prob;
    if (lane == 0) {
      p.weights[token * p.k + r] = prob;
      p.ids[token * p.k + r] = winner_id;
    }
  }
  if (p.renormalize && lane == 0) {
    for (int64_t r = 0; r < p.k; ++r) p.weights[token * p.k + r] /= picked_sum;
  }
}

void MoeRouterGpu(const MoeRouterArgs& a) {
  gpuStream_t stream = PrepareDevice(a.logits.device());
  const int64_t tokens = a.logits.size(0), experts = a.logits.size(1);
  const int warp = WarpSize(a.logits.device());
  const bool per_warp = experts <= int64_t{kRouterWarpValues} * warp;
  reach::Hit(per_warp ? "MoeRouterGpu.warp_rows" : "MoeRouterGpu.block_rows");
  DispatchFloat(a.logits.dtype(), "MoeRouter", [&](auto tag) {
    using T = decltype(tag);
    RouterParams<T> p{static_cast<const T*>(a.logits.data()), a.logits.stride(0), experts,
                      a.topk_weights.size(1), a.topk_weights.data_ptr<float>(),
                      static_cast<int32_t*>(a.topk_ids.data()), a.renormalize};
    if (per_warp) {
      const int64_t tokens_per_block = kRouterThreads / warp;
      LaunchKernel(RouterWarpRows<T>, GridFor(tokens, tokens_per_block, "MoeRouter"), kRouterThreads, 0, stream, p,
                   tokens);
    } else {
      LaunchKernel(RouterRows<T>, GridFor(tokens, 1, "MoeRouter"), kRouterThreads, 0, stream, p);
    }
  });
  CheckLaunch("MoeRouter");
}

// ---- experts -----------------------------------------------------------------------

template <typename X>
struct ExpertParams {
  const X* x;
  X* out;
  WeightMatrix gate, up, down;  // row r of expert e is row e * rows_per_expert + r, see ExpertRow
  int64_t gate_expert_stride, up_expert_stride, down_expert_stride;  // elements
  const float* topk_weights;
  const int32_t* topk_ids;
  float* hidden;  // [T, k, I]
  const XBlock* x_blocks;       // x quantized, [T, H / 32] (quantized routes only)
  const XBlock* hidden_blocks;  // hidden quantized, [T * k, I / 32] (quantized down route only)
  int64_t tokens, k, experts, hidden_size, inter_size;
  int64_t x_row_stride, out_row_stride;
  BadIndexRecord* bad_index;
};

constexpr int kExpertThreads = 128;

__device__ inline const void* ExpertRow(const WeightMatrix& w, int64_t expert_stride, int64_t expert, int64_t row) {
  return WeightRow(w.data, expert * expert_stride + row * w.row_stride, 1, w.block_elems, w.block_bytes);
}

// gate . x and up . x of hidden row i of an expert: decoded element by element
// (Lane = void) or by the int8 lanes against the quantized x row.
template <typename Lane, typename X>
__device__ inline void GateUp(const ExpertParams<X>& p, int64_t token, const XBlock* x_row_blocks, int64_t expert,
                              int64_t i, float* g, float* u) {
  const void* gate_row = ExpertRow(p.gate, p.gate_expert_stride, expert, i);
  const void* up_row = ExpertRow(p.up, p.up_expert_stride, expert, i);
  if constexpr (std::is_void_v<Lane>) {
    const X* x = p.x + token * p.x_row_stride;
    *g = WarpDotRow(gate_row, p.gate.dtype, x, p.hidden_size);
    *u = WarpDotRow(up_row, p.up.dtype, x, p.hidden_size);
  } else {
    const int blocks = static_cast<int>(p.hidden_size / Lane::kValues);
    *g = WarpQuantDotRow<Lane>(static_cast<const uint8_t*>(gate_row), blocks, x_row_blocks);
    *u = WarpQuantDotRow<Lane>(static_cast<const uint8_t*>(up_row), blocks, x_row_blocks);
  }
}

// x's row of XBlocks in a block's shared memory up to this size (H <= 19,660): each
// block quantizes its token's row (a few KB from L2) instead of a launch before.
constexpr int64_t kExpertSharedXMaxBytes = 24 * 1024;

// grid: (T * k, ceil(I / warps)); each warp computes hidden row i of one pair. With
// the int8 lanes and p.x_blocks null, the block first quantizes its token's x row
// into dynamic shared memory.
template <typename Lane, typename X>
__global__ void __launch_bounds__(kExpertThreads) ExpertHidden(ExpertParams<X> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t pair = blockIdx.x, token = pair / p.k;
  const XBlock* x_row_blocks = nullptr;
  if constexpr (!std::is_void_v<Lane>) {
    const int64_t blocks_per_row = p.hidden_size / kXBlockValues;
    if (p.x_blocks != nullptr) {
      x_row_blocks = p.x_blocks + token * blocks_per_row;
    } else {
      extern __shared__ uint4 expert_shared[];
      auto* shared_x = reinterpret_cast<XBlock*>(expert_shared);
      QuantizeXRows(p.x + token * p.x_row_stride, p.x_row_stride, blocks_per_row, blocks_per_row, shared_x,
                    threadIdx.x, blockDim.x);
      __syncthreads();
      x_row_blocks = shared_x;
    }
  }
  const int64_t warps = blockDim.x / kWarpSize;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * warps + threadIdx.x / kWarpSize;
  if (i >= p.inter_size) return;
  const int64_t expert = p.topk_ids[pair];
  float h = 0.0f;
  if (expert >= 0 && expert < p.experts) {
    float g, u;
    GateUp<Lane>(p, token, x_row_blocks, expert, i, &g, &u);
    h = Silu(g) * u;
  } else if (i == 0 && threadIdx.x % kWarpSize == 0) {
    RecordBadIndex(p.bad_index, CheckedIndexOp::kMoeExperts, pair, expert, p.experts, p.k);
  }
  if (threadIdx.x % kWarpSize == 0) p.hidden[pair * p.inter_size + i] = h;
}

// grid: (T, ceil(H / warps)); each warp computes out[token, n].
template <typename Lane, typename X>
__global__ void __launch_bounds__(kExpertThreads) ExpertDown(ExpertParams<X> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t token = blockIdx.x;
  const int64_t warps = blockDim.x / kWarpSize;
  const int64_t n = static_cast<int64_t>(blockIdx.y) * warps + threadIdx.x / kWarpSize;
  if (n >= p.hidden_size) return;
  float sum = 0.0f;
  for (int64_t j = 0; j < p.k; ++j) {
    const int64_t pair = token * p.k + j;
    const int64_t expert = p.topk_ids[pair];
    if (expert < 0 || expert >= p.experts) continue;
    const void* row = ExpertRow(p.down, p.down_expert_stride, expert, n);
    float dot;
    if constexpr (std::is_void_v<Lane>) {
      dot = WarpDotRow(row, p.down.dtype, p.hidden + pair * p.inter_size, p.inter_size);
    } else {
      dot = WarpQuantDotRow<Lane>(static_cast<const uint8_t*>(row), static_cast<int>(p.inter_size / Lane::kValues),
                                  p.hidden_blocks + pair * (p.inter_size / kXBlockValues));
    }
    sum += p.topk_weights[pair] * dot;
  }
  if (threadIdx.x % kWarpSize == 0) p.out[token * p.out_row_stride + n] = FromFloat<X>(sum);
}

// Calls launch(lane) with the int8 lane type of `dtype` when `quantized`, else with
// a void* (LaneOf: decode element by element).
template <typename Launch>
void LaunchWithLane(bool quantized, DType dtype, Launch&& launch) {
  if (!quantized || !DispatchQuantLane(dtype, launch)) launch(static_cast<void*>(nullptr));
}

template <typename T>
using LaneOf = std::conditional_t<std::is_pointer_v<T>, void, T>;

// Whether the grouped kernels run (moe_grouped.cu): by default where they take the
// operands and the experts average at least kGroupedMinPairsPerExpert pairs (bf16
// tiles) or kGroupedInt8MinPairsPerExpert (int8 tiles). On the H200 with the
// 35B-A3B shape in Q8_0 (256 experts, 8 per token) the bf16 tiles took a 2048-token
// prompt (64 pairs an expert) from 2,328 to 4,074 tokens/s, but were slower at 16
// pairs an expert (a 512-token prompt: 1,823 against 2,084) and at 2 (64-sequence
// decode steps: 703 against 1,531 total tokens/s): they decode each expert's rows
// element by element, where the per-pair kernels' int8 lanes read a row per pair.
// The int8 tiles decode a weight block once per tile to int8 with word loads, so
// they read each touched expert once where the per-pair kernels read it once per
// pair: they run from one pair an expert on average. vt::tuning family
// "gpu.moe_experts" forces "grouped" (where supported) or "per_pair".
constexpr int64_t kGroupedMinPairsPerExpert = 32;  // between the measured 16 (slower) and 64 (faster)
constexpr int64_t kGroupedInt8MinPairsPerExpert = 1;

// At one token (batch-1 decode) the staged int8 GEMV (matmul_quant_staged.cu) reads
// the chosen experts' rows in 16-byte pieces, two launches and an activation pass in
// between; the per-pair kernels give a warp one row of an expert each (H200, 35B-A3B
// Q8_0 decode: ExpertHidden 14.8 us and ExpertDown 14 us a layer for 26.7 MB, ~0.9
// TB/s). "staged" forces it where it takes the shapes (one token only).
std::string MoeVariant() {
  std::string variant = tuning::Variant("gpu.moe_experts");
  if (!variant.empty() && variant != "grouped" && variant != "per_pair" && variant != "staged") {
    throw Error("vt::MoeExperts: unknown variant '" + variant +
                "' forced for gpu.moe_experts (known: grouped, per_pair, staged)");
  }
  return variant;
}

bool UseStagedExperts(const MoeExpertsArgs& a, const std::string& variant) {
  return (variant.empty() || variant == "staged") && StagedExpertsTake(a);
}

bool UseGroupedExperts(const MoeExpertsArgs& a, const std::string& variant) {
  if (variant == "per_pair" || !MoeGroupedSupported(a)) return false;
  const int64_t min_pairs = MoeGroupedInt8(a) ? kGroupedInt8MinPairsPerExpert : kGroupedMinPairsPerExpert;
  return variant == "grouped" || a.topk_ids.numel() >= min_pairs * a.w_gate.size(0);
}

// act[j I + i] = weights[j] SiLU(gate_up[2 j I + i]) gate_up[2 j I + I + i] of the
// token's pair j (an expert id out of range: 0, as the per-pair kernels leave it out);
// with shared_logit, pair k is the shared expert with weight sigmoid(*shared_logit).
template <typename G>
__global__ void ExpertActivations(const float* gate_up, const float* weights, const int32_t* ids, int64_t k,
                                  int64_t inter, int64_t experts, const G* shared_logit, float* act) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t pairs = k + (shared_logit != nullptr ? 1 : 0);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs * inter;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i / inter, c = i % inter;
    const bool valid = j == k || (ids[j] >= 0 && ids[j] < experts);
    const float weight = j == k ? 1.0f / (1.0f + expf(-ToFloat(*shared_logit))) : weights[j];
    act[i] = valid ? weight * Silu(gate_up[2 * j * inter + c]) * gate_up[2 * j * inter + inter + c] : 0.0f;
  }
}

// With `fold_shared` the shared expert is pair k of both passes (StagedExpertsTakeShared).
void RunStagedExperts(const MoeExpertsArgs& a, bool fold_shared, gpuStream_t stream) {
  const int64_t k = a.topk_ids.size(1), inter = a.w_gate.size(1), pairs = k + (fold_shared ? 1 : 0);
  const Tensor gate_up = Tensor::Empty({1, 2 * pairs * inter}, DType::kF32, a.x.device());
  RunStagedExpertGateUp(a, gate_up);
  const Tensor act = Tensor::Empty({1, pairs * inter}, DType::kF32, a.x.device());
  const DType logit_dtype = fold_shared ? a.shared_gate_logits.dtype() : DType::kF32;
  DispatchFloat(logit_dtype, "MoeExperts", [&](auto tag) {
    using G = decltype(tag);
    LaunchKernel(ExpertActivations<G>, GridStrideBlocks(pairs * inter, a.x.device(), "MoeExperts"),
                 kElementwiseThreads, 0, stream, gate_up.data_ptr<float>(), a.topk_weights.data_ptr<float>(),
                 static_cast<const int32_t*>(a.topk_ids.data()), k, inter, a.w_gate.size(0),
                 fold_shared ? static_cast<const G*>(a.shared_gate_logits.data()) : nullptr, act.data_ptr<float>());
  });
  CheckLaunch("MoeExperts");
  RunStagedExpertDown(a, act);
}

// The shared expert by the generic ops where the routed kernels do not fold it in:
// out += sigmoid(g) * down_s(silu(gate_s x) * up_s x), each step rounded to x's dtype
// (as SparseMoe ran it before MoeExperts took the shared expert).
void AddSharedExpert(const MoeExpertsArgs& a) {
  reach::Hit("MoeExpertsGpu.shared_separate");
  const int64_t tokens = a.x.size(0), inter = a.shared_w_gate.size(0), hidden = a.x.size(1);
  const Device device = a.x.device();
  const Tensor &gate = a.shared_w_gate, &up = a.shared_w_up;
  const Tensor gate_up = Tensor::Empty({tokens, 2 * inter}, a.x.dtype(), device);  // [T, Is | Is]
  const bool up_follows_gate = gate.storage() == up.storage() && gate.stride(0) == up.stride(0) &&
                               up.offset() == gate.offset() + inter * gate.stride(0);
  if (up_follows_gate) {
    MatMul({.x = a.x, .w = gate.AsStrided({2 * inter, hidden}, gate.strides(), gate.offset()), .out = gate_up});
  } else {
    MatMul({.x = a.x, .w = gate, .out = gate_up.Slice(1, 0, inter)});
    MatMul({.x = a.x, .w = up, .out = gate_up.Slice(1, inter, 2 * inter)});
  }
  const Tensor act = Tensor::Empty({tokens, inter}, a.x.dtype(), device);
  SiluMul({.gate = gate_up.Slice(1, 0, inter), .up = gate_up.Slice(1, inter, 2 * inter), .out = act});
  const Tensor shared = Tensor::Empty({tokens, hidden}, a.x.dtype(), device);
  MatMul({.x = act, .w = a.shared_w_down, .out = shared});
  SigmoidMul({.x = shared, .gate = a.shared_gate_logits, .out = shared});
  Add({.a = a.out, .b = shared, .out = a.out});
}

void RunPerPairExperts(const MoeExpertsArgs& a, gpuStream_t stream) {
  reach::Hit("MoeExpertsGpu.per_pair");
  const int64_t tokens = a.x.size(0), k = a.topk_ids.size(1);
  const int64_t hidden_size = a.x.size(1), inter_size = a.w_gate.size(1);
  Tensor hidden = Tensor::Empty({tokens, k, inter_size}, DType::kF32, a.x.device());  // [T, k, I]
  const int warps = kExpertThreads / WarpSize(a.x.device());
  const bool quantized_gate_up = QuantLanesRead(a.w_gate) && QuantLanesRead(a.w_up);
  const size_t x_row_bytes = static_cast<size_t>(hidden_size / kXBlockValues) * sizeof(XBlock);
  const bool x_shared = quantized_gate_up && static_cast<int64_t>(x_row_bytes) <= kExpertSharedXMaxBytes;
  if (quantized_gate_up) reach::Hit(x_shared ? "MoeExpertsGpu.per_pair.x_shared" : "MoeExpertsGpu.per_pair.x_separate");
  const Tensor x_blocks = quantized_gate_up && !x_shared ? QuantizeActivations(a.x) : Tensor();
  DispatchFloat(a.x.dtype(), "MoeExperts", [&](auto tag) {
    using X = decltype(tag);
    ExpertParams<X> p{static_cast<const X*>(a.x.data()),
                      static_cast<X*>(a.out.data()),
                      MakeWeightMatrix(a.w_gate.data(), a.w_gate.dtype(), a.w_gate.stride(1)),
                      MakeWeightMatrix(a.w_up.data(), a.w_up.dtype(), a.w_up.stride(1)),
                      MakeWeightMatrix(a.w_down.data(), a.w_down.dtype(), a.w_down.stride(1)),
                      a.w_gate.stride(0),
                      a.w_up.stride(0),
                      a.w_down.stride(0),
                      a.topk_weights.data_ptr<float>(),
                      static_cast<const int32_t*>(a.topk_ids.data()),
                      hidden.data_ptr<float>(),
                      x_blocks.defined() ? static_cast<const XBlock*>(x_blocks.data()) : nullptr,
                      nullptr,
                      tokens,
                      k,
                      a.w_gate.size(0),
                      hidden_size,
                      inter_size,
                      a.x.stride(0),
                      a.out.stride(0),
                      BadIndexRecordFor(a.x.device())};
    const dim3 hidden_grid(GridFor(tokens * k, 1, "MoeExperts"), GridFor(inter_size, warps, "MoeExperts"));
    const auto launch_hidden = [&](auto lane) {
      LaunchKernel(ExpertHidden<LaneOf<decltype(lane)>, X>, hidden_grid, kExpertThreads, x_shared ? x_row_bytes : 0,
                   stream, p);
    };
    LaunchWithLane(quantized_gate_up, a.w_gate.dtype(), launch_hidden);
    const bool quantized_down = QuantLanesRead(a.w_down);
    Tensor hidden_blocks;
    if (quantized_down) {
      hidden_blocks = QuantizeActivations(hidden.View({tokens * k, inter_size}));
      p.hidden_blocks = static_cast<const XBlock*>(hidden_blocks.data());
    }
    const dim3 down_grid(GridFor(tokens, 1, "MoeExperts"), GridFor(hidden_size, warps, "MoeExperts"));
    LaunchWithLane(quantized_down, a.w_down.dtype(), [&](auto lane) {
      LaunchKernel(ExpertDown<LaneOf<decltype(lane)>, X>, down_grid, kExpertThreads, 0, stream, p);
    });
  });
  CheckLaunch("MoeExperts");
}

void MoeExpertsGpu(const MoeExpertsArgs& a) {
  if (a.num_experts != 0 && a.num_experts != a.w_gate.size(0)) {
    // Tensor and expert parallelism run on the CPU backend only (docs/distributed.md).
    throw Error("vt::MoeExperts on " + a.x.device().ToString() + ": a slice of the experts (expert_begin " +
                std::to_string(a.expert_begin) + ", " + std::to_string(a.w_gate.size(0)) + " of num_experts " +
                std::to_string(a.num_experts) + ": expert parallelism) is not supported on GPUs");
  }
  gpuStream_t stream = PrepareDevice(a.x.device());
  const std::string variant = MoeVariant();
  const bool shared = a.shared_w_gate.defined();
  if (UseStagedExperts(a, variant)) {
    reach::Hit("MoeExpertsGpu.staged");
    const bool fold_shared = shared && StagedExpertsTakeShared(a);
    if (fold_shared) reach::Hit("MoeExpertsGpu.staged.shared_folded");
    RunStagedExperts(a, fold_shared, stream);
    if (shared && !fold_shared) AddSharedExpert(a);
    return;
  }
  if (UseGroupedExperts(a, variant)) {
    reach::Hit("MoeExpertsGpu.grouped");
    RunMoeGrouped(a, stream);
    if (shared) AddSharedExpert(a);
    return;
  }
  RunPerPairExperts(a, stream);
  if (shared) AddSharedExpert(a);
}

}  // namespace

VT_REGISTER_KERNEL(MoeRouter, VT_GPU_DEVICE, MoeRouterGpu);
VT_REGISTER_KERNEL(MoeExperts, VT_GPU_DEVICE, MoeExpertsGpu);

}  // namespace vt::gpu
