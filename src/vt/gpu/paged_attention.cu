// GPU PagedAttention: causal GQA attention of a varlen batch over paged K/V caches,
// decode and prefill alike.
//
// Shapes (op_args.h): q, out [T, Nq, D] (strided rows); k_cache, v_cache
// [blocks, block_size, Nkv, D] views with any strides; block_tables [B, max_blocks]
// i32; seq_lens [B]; query_start_loc [B + 1]. Row t of sequence b sits at position
// seq_lens[b] - q_len_b + (t - query_start_loc[b]) and attends to keys 0..position.
// Query head h reads kv head h / (Nq / Nkv). D is any value in [1, 256]. q/out and
// the caches may have different float dtypes (kernels are instantiated per cache
// dtype; the query row is read, and the output row written, once).
//
// paged_attention_choice.h says which variant runs (decode: kGroupsSplitKv where
// its vector loads fit, prefill: kQueryTiles, otherwise the row kernels).
//
// kRowsOnePass / kRowsSplitKv: one block of 128 threads per (row, query head[,
// partition]). The block walks its keys in tiles of 64: each warp scores whole
// keys (lanes split D, a warp-sum finishes the dot product; K reads are coalesced
// along D), the block takes the tile's max and
// softmax weights (online softmax in f32), then every thread accumulates its own
// output dims over the tile's V rows (coalesced across threads). The scaled query
// and the tile's scores and key addresses live in shared memory (about 1.8 KB,
// fine for every target's LDS). A block id outside the cache masks its keys
// instead of reading outside the cache.
//
// kQueryTiles (prefill): one block of 256 threads per (16 query rows of one
// sequence, head). The rows share every key and value they read: a tile of 16 keys
// is staged in shared memory as f32 (K, then V in the same buffer), thread
// (row r, key j) = (t / 16, t % 16) scores one pair, the 16 threads of a row take
// its online softmax with shuffles, and thread (r, c) accumulates dims c, c + 16,
// ... of row r. Row-per-block reads each K/V row once per query row (a 2048-token
// 9B prefill: 12.6 ms per attention layer on the H200); a tile reads it once per
// 16. Blocks find their (sequence, tile) by walking query_start_loc; the grid has
// ceil(T / 16) + B blocks, enough for any split of T rows into B sequences.
//
// kGroupsSplitKv (decode): one block of 128 threads per (row, kv head, partition)
// for all Nq / Nkv query heads of the group, K/V rows read once per group with
// 16-byte loads; layout and merge order at PagedAttentionGroups. Why it is faster
// on the row kernels' worst case, a 9B decode (Nq 16, Nkv 4, D 256, bf16): they read
// every K/V row 4 times (once per query head) with 2-byte loads, in 16 heads x 16
// partitions at batch 1, ctx 8192 (0.05 of copy bandwidth measured); the group
// kernel reads each row once, 512 bytes per warp load, in 4 kv heads x 128
// partitions.
#include <cstring>
#include <type_traits>

#include "gpu_common.cuh"
#include "paged_attention_choice.h"
#include "paged_attention_mma.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt::gpu {
namespace {

constexpr int kKeyTile = 64;
constexpr int kMaxDimsPerThread = kPagedAttentionMaxHeadDim / kPagedAttentionThreads;

// T is the cache dtype; q and out have their own (run-time) dtype, read and written
// once per row.
template <typename T>
struct AttentionParams {
  const void* q;
  const T* k_cache;
  const T* v_cache;
  void* out;
  DType q_dtype, out_dtype;
  float* partials;  // split: [T, Nq, P, D + 2] as (acc[D], max, sum); else null
  const int32_t* block_tables;
  const int32_t* seq_lens;
  const int32_t* query_start_loc;
  int64_t q_strides[2], out_strides[2];         // token, head
  int64_t k_strides[3], v_strides[3];           // block, offset, head
  int64_t block_table_stride;
  int64_t num_seqs, num_heads, kv_group, head_dim, block_size, num_cache_blocks, max_blocks_per_seq;
  int64_t partition_size, num_partitions;
  float scale;
};

// Largest b with query_start_loc[b] <= row (the sequence holding `row`).
__device__ inline int64_t SequenceOfRow(const int32_t* query_start_loc, int64_t num_seqs, int64_t row) {
  int64_t lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (query_start_loc[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

struct RowState {
  float max = -INFINITY;
  float sum = 0.0f;
  float acc[kMaxDimsPerThread] = {};
};

// Scores one tile of keys [first, first + count) into scores[] and records each
// key's element offset (or -1 when its block id is outside the cache).
template <typename T>
__device__ void ScoreTile(const AttentionParams<T>& p, int64_t seq, int64_t kv_head, int64_t first, int count,
                          const float* q, float* scores, int64_t* key_rows) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  for (int j = warp; j < count; j += num_warps) {
    const int64_t position = first + j;
    const int64_t table_index = position / p.block_size;
    const int64_t block =
        table_index < p.max_blocks_per_seq ? p.block_tables[seq * p.block_table_stride + table_index] : -1;
    const bool valid = block >= 0 && block < p.num_cache_blocks;
    const int64_t offset = position % p.block_size;
    float partial = 0.0f;
    if (valid) {
      const T* k = p.k_cache + block * p.k_strides[0] + offset * p.k_strides[1] + kv_head * p.k_strides[2];
      for (int64_t d = lane; d < p.head_dim; d += kWarpSize) partial += q[d] * ToFloat(k[d]);
    }
    const float score = WarpSum(partial);
    if (lane == 0) {
      scores[j] = valid ? score : -INFINITY;
      key_rows[j] = valid ? block * p.v_strides[0] + offset * p.v_strides[1] + kv_head * p.v_strides[2] : -1;
    }
  }
}

// Folds the scored tile into the running softmax state of this thread's dims.
template <typename T>
__device__ void AccumulateTile(const AttentionParams<T>& p, int count, float* scores, const int64_t* key_rows,
                               float* scratch, RowState& state) {
  const int tid = static_cast<int>(threadIdx.x);
  const float score = tid < count ? scores[tid] : -INFINITY;
  const float tile_max = BlockMax(score, scratch);
  const float new_max = fmaxf(state.max, tile_max);
  if (new_max == -INFINITY) return;  // every key so far masked: nothing to add (uniform across the block)
  const float correction = state.max == -INFINITY ? 0.0f : expf(state.max - new_max);
  const float weight = tid < count ? expf(score - new_max) : 0.0f;
  if (tid < count) scores[tid] = weight;
  state.sum = state.sum * correction + BlockSum(weight, scratch);  // its barriers publish scores[]
  state.max = new_max;
#pragma unroll
  for (int r = 0; r < kMaxDimsPerThread; ++r) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
    if (d < p.head_dim) {
      float acc = state.acc[r] * correction;
      for (int j = 0; j < count; ++j) {
        if (key_rows[j] >= 0) acc += scores[j] * ToFloat(p.v_cache[key_rows[j] + d]);
      }
      state.acc[r] = acc;
    }
  }
}

template <typename T, bool kSplit>
__global__ void __launch_bounds__(kPagedAttentionThreads) PagedAttentionRows(AttentionParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float q[kPagedAttentionMaxHeadDim];
  __shared__ float scores[kKeyTile];
  __shared__ int64_t key_rows[kKeyTile];
  __shared__ float scratch[kMaxWarpsPerBlock];
  const int64_t row = blockIdx.x, head = blockIdx.y, partition = blockIdx.z;
  const int64_t seq = SequenceOfRow(p.query_start_loc, p.num_seqs, row);
  const int64_t q_len = p.query_start_loc[seq + 1] - p.query_start_loc[seq];
  const int64_t position = p.seq_lens[seq] - q_len + (row - p.query_start_loc[seq]);
  const int64_t context = position + 1;  // keys 0..position
  const int64_t begin = kSplit ? partition * p.partition_size : 0;
  const int64_t end_raw = kSplit ? begin + p.partition_size : context;
  const int64_t end = end_raw < context ? end_raw : context;
  const int64_t kv_head = head / p.kv_group;

  const int64_t q_row = row * p.q_strides[0] + head * p.q_strides[1];
  for (int64_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    q[d] = LoadAsFloat(p.q, p.q_dtype, q_row + d) * p.scale;
  }
  __syncthreads();

  RowState state;
  for (int64_t first = begin; first < end; first += kKeyTile) {
    const int count = static_cast<int>(end - first < kKeyTile ? end - first : kKeyTile);
    ScoreTile(p, seq, kv_head, first, count, q, scores, key_rows);
    __syncthreads();
    AccumulateTile(p, count, scores, key_rows, scratch, state);
    __syncthreads();  // scores[] and key_rows[] are rewritten by the next tile
  }

  if constexpr (kSplit) {
    float* partial = p.partials + ((row * p.num_heads + head) * p.num_partitions + partition) * (p.head_dim + 2);
#pragma unroll
    for (int r = 0; r < kMaxDimsPerThread; ++r) {
      const int64_t d = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
      if (d < p.head_dim) partial[d] = state.acc[r];
    }
    if (threadIdx.x == 0) {
      partial[p.head_dim] = state.max;
      partial[p.head_dim + 1] = state.sum;
    }
  } else {
    const int64_t out_row = row * p.out_strides[0] + head * p.out_strides[1];
    const float inv_sum = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;  // a row with no visible key writes 0
#pragma unroll
    for (int r = 0; r < kMaxDimsPerThread; ++r) {
      const int64_t d = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
      if (d < p.head_dim) StoreFromFloat(p.out, p.out_dtype, out_row + d, state.acc[r] * inv_sum);
    }
  }
}

// out[row, head] = sum_p acc_p * e^(max_p - M) / sum_p sum_p * e^(max_p - M), for
// both split variants. Warp w takes partitions w, w + warps, ... (lane l dims l,
// l + warp width, ...: a partition's loads coalesced, four partitions in flight),
// then the warps add up through shared memory. The group kernel's many partitions
// (up to kGroupsMaxPartitions) are read in parallel, not one after another.
template <typename T>
__global__ void __launch_bounds__(kPagedAttentionThreads) CombinePartitions(AttentionParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  constexpr int kWarpsMax = kPagedAttentionThreads / 32, kDimsPerLane = kPagedAttentionMaxHeadDim / 32;
  __shared__ float warp_acc[kWarpsMax][kPagedAttentionMaxHeadDim];
  __shared__ float warp_total[kWarpsMax];
  __shared__ float scratch[kMaxWarpsPerBlock];
  const int64_t row = blockIdx.x, head = blockIdx.y, D = p.head_dim, pitch = D + 2;
  const float* partials = p.partials + (row * p.num_heads + head) * p.num_partitions * pitch;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / kWarpSize;
  float local_max = -INFINITY;
  for (int64_t part = tid; part < p.num_partitions; part += blockDim.x) {
    local_max = fmaxf(local_max, partials[part * pitch + D]);
  }
  const float global_max = BlockMax(local_max, scratch);
  float acc[kDimsPerLane] = {}, total = 0.0f;
#pragma unroll 4
  for (int64_t part = warp; part < p.num_partitions; part += num_warps) {
    const float* partial = partials + part * pitch;
    const float part_max = partial[D];
    if (part_max == -INFINITY) continue;  // a partition past the row's context, or fully masked
    const float factor = expf(part_max - global_max);
    total += partial[D + 1] * factor;
#pragma unroll
    for (int r = 0; r < kDimsPerLane; ++r) {
      const int64_t d = lane + static_cast<int64_t>(r) * kWarpSize;
      if (d < D) acc[r] += partial[d] * factor;
    }
  }
#pragma unroll
  for (int r = 0; r < kDimsPerLane; ++r) {
    const int64_t d = lane + static_cast<int64_t>(r) * kWarpSize;
    if (d < D) warp_acc[warp][d] = acc[r];
  }
  if (lane == 0) warp_total[warp] = total;
  __syncthreads();
  float all = 0.0f;
  for (int w = 0; w < num_warps; ++w) all += warp_total[w];
  const float inv_total = all > 0.0f ? 1.0f / all : 0.0f;
  const int64_t out_row = row * p.out_strides[0] + head * p.out_strides[1];
  for (int64_t d = tid; d < D; d += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < num_warps; ++w) sum += warp_acc[w][d];
    StoreFromFloat(p.out, p.out_dtype, out_row + d, sum * inv_total);
  }
}

// ---- kGroupsSplitKv -------------------------------------------------------------
//
// One block of 128 threads per (row, kv head, partition). The block's threads form
// sub-warps of kLanes lanes, one key each per step:
//
//   lane l of a sub-warp holds dims [(c * kLanes + l) * W, + W) for c < kChunks,
//   W = 16 / sizeof(T) (one 16-byte load per chunk), so a sub-warp reads a whole
//   K or V row in kChunks coalesced loads; kLanes = 8/16/32 for up to 64/128/256
//   bf16 dims (a 32-lane warp takes 4/2/1 keys at a time).
//   sub-warp s of the block takes keys begin + s, begin + s + num_slots, ...
//   (kKeysPerStep of them per step, their K and V loads issued together).
//
// Each lane keeps, for the kGroup query heads of the kv head, its dims of q
// (scaled) and of the weighted V sum, and the running max and sum (the same in
// every lane of the sub-warp: scores are summed over the sub-warp with xor
// shuffles). At the end the sub-warps of a warp merge their states with shuffles
// and the warps theirs through shared memory [warps][kGroup][D + 2] (D acc, max,
// sum). Query heads past p.kv_group (kGroup rounds the group up to a power of two)
// are computed on zero q and never written.

// out[0 .. 16 / sizeof(T)) <- one 16-byte load at `at` (16-byte aligned).
template <typename T>
__device__ inline void LoadVector(const T* at, float* out) {
  constexpr int kWidth = 16 / sizeof(T);
  const uint4 raw = *reinterpret_cast<const uint4*>(at);
  T values[kWidth];
  memcpy(values, &raw, sizeof(values));
#pragma unroll
  for (int i = 0; i < kWidth; ++i) out[i] = ToFloat(values[i]);
}

// (max, sum, acc) <- the merge of two softmax states over disjoint keys.
template <int kDims>
__device__ inline void MergeState(float& max, float& sum, float (&acc)[kDims], float other_max, float other_sum,
                                  const float (&other_acc)[kDims]) {
  const float new_max = fmaxf(max, other_max);
  const float mine = max == -INFINITY ? 0.0f : expf(max - new_max);
  const float theirs = other_max == -INFINITY ? 0.0f : expf(other_max - new_max);
  sum = sum * mine + other_sum * theirs;
#pragma unroll
  for (int i = 0; i < kDims; ++i) acc[i] = acc[i] * mine + other_acc[i] * theirs;
  max = new_max;
}

template <typename T, int kLanes, int kChunks, int kGroup>
__global__ void __launch_bounds__(kPagedAttentionThreads) PagedAttentionGroups(AttentionParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  constexpr int kWidth = 16 / sizeof(T), kDims = kChunks * kWidth;
  constexpr int kKeysPerStep = kGroup >= 8 ? 2 : 4;
  extern __shared__ float groups_shared[];  // [warps][kGroup][D + 2]
  const int64_t row = blockIdx.x, kv_head = blockIdx.y, partition = blockIdx.z;
  const int64_t seq = SequenceOfRow(p.query_start_loc, p.num_seqs, row);
  const int64_t q_len = p.query_start_loc[seq + 1] - p.query_start_loc[seq];
  const int64_t context = p.seq_lens[seq] - q_len + (row - p.query_start_loc[seq]) + 1;
  const int64_t begin = partition * p.partition_size;
  const int64_t partition_end = begin + p.partition_size;
  const int64_t end = p.num_partitions == 1 || partition_end > context ? context : partition_end;
  const int64_t D = p.head_dim;
  const int tid = static_cast<int>(threadIdx.x), sub_lane = tid % kLanes, slot = tid / kLanes;
  const int num_slots = static_cast<int>(blockDim.x) / kLanes;

  float q[kGroup][kDims], acc[kGroup][kDims] = {}, max[kGroup], sum[kGroup];
  // The group's q values, every load issued before the first use (WithFloatPointer).
  WithFloatPointer(p.q, p.q_dtype, [&](const auto* qp) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const int64_t q_row = row * p.q_strides[0] + (kv_head * p.kv_group + g) * p.q_strides[1];
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int64_t d0 = static_cast<int64_t>(c * kLanes + sub_lane) * kWidth;
#pragma unroll
        for (int i = 0; i < kWidth; ++i) {
          q[g][c * kWidth + i] = g < p.kv_group && d0 < D ? ToFloat(qp[q_row + d0 + i]) * p.scale : 0.0f;
        }
      }
    }
  });
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    max[g] = -INFINITY;
    sum[g] = 0.0f;
  }

  for (int64_t base = begin; base < end; base += static_cast<int64_t>(num_slots) * kKeysPerStep) {
    float k[kKeysPerStep][kDims], v[kKeysPerStep][kDims];
    bool valid[kKeysPerStep];
#pragma unroll
    for (int j = 0; j < kKeysPerStep; ++j) {
      // Positions are below 2^31 (seq_lens are i32): 32-bit division, cheaper per key.
      const int key = static_cast<int>(base) + j * num_slots + slot, block_size = static_cast<int>(p.block_size);
      const int table_index = key / block_size, offset = key % block_size;
      const int64_t block = key < end && table_index < p.max_blocks_per_seq
                                ? p.block_tables[seq * p.block_table_stride + table_index]
                                : -1;
      valid[j] = block >= 0 && block < p.num_cache_blocks;  // masked keys are never read
      const int64_t k_at = valid[j] ? block * p.k_strides[0] + offset * p.k_strides[1] + kv_head * p.k_strides[2] : 0;
      const int64_t v_at = valid[j] ? block * p.v_strides[0] + offset * p.v_strides[1] + kv_head * p.v_strides[2] : 0;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int64_t d0 = static_cast<int64_t>(c * kLanes + sub_lane) * kWidth;
        if (valid[j] && d0 < D) {
          LoadVector(p.k_cache + k_at + d0, &k[j][c * kWidth]);
          LoadVector(p.v_cache + v_at + d0, &v[j][c * kWidth]);
        } else {
#pragma unroll
          for (int i = 0; i < kWidth; ++i) k[j][c * kWidth + i] = v[j][c * kWidth + i] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float score[kKeysPerStep];
#pragma unroll
      for (int j = 0; j < kKeysPerStep; ++j) {
        float partial = 0.0f;
#pragma unroll
        for (int i = 0; i < kDims; ++i) partial += q[g][i] * k[j][i];
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset >>= 1) partial += ShuffleXor(partial, offset);
        score[j] = valid[j] ? partial : -INFINITY;
      }
      float new_max = max[g];
#pragma unroll
      for (int j = 0; j < kKeysPerStep; ++j) new_max = fmaxf(new_max, score[j]);
      const float correction = max[g] == -INFINITY ? 0.0f : expf(max[g] - new_max);
      sum[g] *= correction;
#pragma unroll
      for (int i = 0; i < kDims; ++i) acc[g][i] *= correction;
#pragma unroll
      for (int j = 0; j < kKeysPerStep; ++j) {
        const float weight = score[j] == -INFINITY ? 0.0f : expf(score[j] - new_max);
        sum[g] += weight;
#pragma unroll
        for (int i = 0; i < kDims; ++i) acc[g][i] += weight * v[j][i];
      }
      max[g] = new_max;
    }
  }

  // Sub-warps of a warp merge (every lane ends with the warp's state for its dims).
#pragma unroll
  for (int offset = kLanes; offset < kWarpSize; offset <<= 1) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float other_acc[kDims];
#pragma unroll
      for (int i = 0; i < kDims; ++i) other_acc[i] = ShuffleXor(acc[g][i], offset);
      MergeState(max[g], sum[g], acc[g], ShuffleXor(max[g], offset), ShuffleXor(sum[g], offset), other_acc);
    }
  }
  const int lane = tid % kWarpSize, warp = tid / kWarpSize, num_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const int64_t pitch = D + 2;
  if (lane < kLanes) {
    float* mine = groups_shared + static_cast<int64_t>(warp) * kGroup * pitch;
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int64_t d0 = static_cast<int64_t>(c * kLanes + sub_lane) * kWidth;
#pragma unroll
        for (int i = 0; i < kWidth; ++i) {
          if (d0 < D) mine[g * pitch + d0 + i] = acc[g][c * kWidth + i];
        }
      }
      if (lane == 0) {
        mine[g * pitch + D] = max[g];
        mine[g * pitch + D + 1] = sum[g];
      }
    }
  }
  __syncthreads();

  // Warps merge; thread i takes (head g, dim d) = (i / D, i % D).
  for (int64_t i = tid; i < p.kv_group * D; i += blockDim.x) {
    const int64_t g = i / D, d = i % D, head = kv_head * p.kv_group + g;
    float block_max = -INFINITY;
    for (int w = 0; w < num_warps; ++w) block_max = fmaxf(block_max, groups_shared[(w * kGroup + g) * pitch + D]);
    float total = 0.0f, out = 0.0f;
    for (int w = 0; w < num_warps; ++w) {
      const float* state = groups_shared + (w * kGroup + g) * pitch;
      if (state[D] == -INFINITY) continue;  // a warp without visible keys
      const float factor = expf(state[D] - block_max);
      total += state[D + 1] * factor;
      out += state[d] * factor;
    }
    if (p.num_partitions == 1) {
      const float inv_total = total > 0.0f ? 1.0f / total : 0.0f;  // a row with no visible key writes 0
      StoreFromFloat(p.out, p.out_dtype, row * p.out_strides[0] + head * p.out_strides[1] + d, out * inv_total);
    } else {  // CombinePartitions' layout [T, Nq, P, D + 2]
      float* partial = p.partials + ((row * p.num_heads + head) * p.num_partitions + partition) * pitch;
      partial[d] = out;
      if (d == 0) {
        partial[D] = block_max;
        partial[D + 1] = total;
      }
    }
  }
}

// Bytes of PagedAttentionGroups' dynamic shared memory: sized for 32-lane warps
// (the most warps a 128-thread block has on any target).
size_t GroupsSharedBytes(int64_t group, int64_t head_dim) {
  return sizeof(float) * (kPagedAttentionThreads / 32) * group * (head_dim + 2);
}

constexpr int kTileRows = 16;     // query rows per block of kQueryTiles
constexpr int kTileKeys = 16;     // keys staged per step
constexpr int kTileThreads = kTileRows * kTileKeys;
constexpr int kTileMaxDimsPerThread = kPagedAttentionMaxHeadDim / kTileKeys;

// Block b's (sequence, first row of its tile), or seq = -1 past the last tile.
__device__ inline void TileOfBlock(const int32_t* query_start_loc, int64_t num_seqs, int64_t block, int64_t* seq,
                                   int64_t* first_row) {
  int64_t tiles_before = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t rows = query_start_loc[b + 1] - query_start_loc[b];
    const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
    if (block < tiles_before + tiles) {
      *seq = b;
      *first_row = query_start_loc[b] + (block - tiles_before) * kTileRows;
      return;
    }
    tiles_before += tiles;
  }
  *seq = -1;
}

// Dynamic shared memory: q [16][D + 1] scaled, kv [16][D + 1] (rows padded by a
// word, so the two rows and 16 keys a warp reads fall in different banks),
// probabilities [16][16], then the step's 16 K and 16 V row offsets (-1: masked).
template <typename T>
__global__ void __launch_bounds__(kTileThreads, 3) PagedAttentionQueryTiles(AttentionParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  extern __shared__ float tile_shared[];
  const int64_t D = p.head_dim, pitch = D + 1;
  float* q = tile_shared;
  float* kv = q + kTileRows * pitch;
  float* probs = kv + kTileKeys * pitch;
  auto* key_rows = reinterpret_cast<int64_t*>(probs + kTileRows * kTileKeys);  // 8-byte aligned: even float count
  int64_t* value_rows = key_rows + kTileKeys;
  int64_t seq, first_row;
  TileOfBlock(p.query_start_loc, p.num_seqs, blockIdx.x, &seq, &first_row);
  if (seq < 0) return;  // uniform across the block
  const int64_t head = blockIdx.y, kv_head = head / p.kv_group;
  const int64_t seq_rows_end = p.query_start_loc[seq + 1];
  const int64_t rows = seq_rows_end - first_row < kTileRows ? seq_rows_end - first_row : kTileRows;
  const int64_t q_len = seq_rows_end - p.query_start_loc[seq];
  const int64_t first_position = p.seq_lens[seq] - q_len + (first_row - p.query_start_loc[seq]);
  const int tid = static_cast<int>(threadIdx.x), r = tid / kTileKeys, j = tid % kTileKeys;
  const int64_t position = first_position + r;  // row r's position (keys 0..position)
  const bool row_valid = r < rows;
  WithFloatPointer(p.q, p.q_dtype, [&](const auto* qp) {
#pragma unroll 4
    for (int64_t i = tid; i < kTileRows * D; i += kTileThreads) {
      const int64_t row = i / D, d = i % D;
      q[row * pitch + d] =
          row < rows ? ToFloat(qp[(first_row + row) * p.q_strides[0] + head * p.q_strides[1] + d]) * p.scale : 0.0f;
    }
  });
  float max = -INFINITY, sum = 0.0f, acc[kTileMaxDimsPerThread] = {};
  const int64_t context = first_position + rows;  // keys the tile's last row sees
  for (int64_t first_key = 0; first_key < context; first_key += kTileKeys) {
    __syncthreads();  // the previous step's V and probabilities are no longer read
    if (tid < kTileKeys) {
      const int64_t key = first_key + tid, table_index = key / p.block_size;
      const int64_t block = key < context && table_index < p.max_blocks_per_seq
                                ? p.block_tables[seq * p.block_table_stride + table_index]
                                : -1;
      const bool valid = block >= 0 && block < p.num_cache_blocks;
      const int64_t offset = key % p.block_size;
      key_rows[tid] = valid ? block * p.k_strides[0] + offset * p.k_strides[1] + kv_head * p.k_strides[2] : -1;
      value_rows[tid] = valid ? block * p.v_strides[0] + offset * p.v_strides[1] + kv_head * p.v_strides[2] : -1;
    }
    __syncthreads();
    for (int64_t i = tid; i < kTileKeys * D; i += kTileThreads) {  // K rows, coalesced along D
      const int64_t key = i / D, d = i % D, at = key_rows[key];
      kv[key * pitch + d] = at >= 0 ? ToFloat(p.k_cache[at + d]) : 0.0f;
    }
    __syncthreads();
    const int64_t key = first_key + j;
    float score = -INFINITY;
    if (row_valid && key <= position && key_rows[j] >= 0) {
      score = 0.0f;
      for (int64_t d = 0; d < D; ++d) score += q[r * pitch + d] * kv[j * pitch + d];
    }
    // Online softmax over the row's 16 lanes (a row is 16 consecutive lanes of a warp).
    float tile_max = score;
    for (int offset = kTileKeys / 2; offset > 0; offset >>= 1) tile_max = fmaxf(tile_max, ShuffleXor(tile_max, offset));
    const float new_max = fmaxf(max, tile_max);
    const float weight = new_max == -INFINITY || score == -INFINITY ? 0.0f : expf(score - new_max);
    float tile_sum = weight;
    for (int offset = kTileKeys / 2; offset > 0; offset >>= 1) tile_sum += ShuffleXor(tile_sum, offset);
    const float correction = max == -INFINITY ? 0.0f : expf(max - new_max);
    if (new_max != -INFINITY) {
      sum = sum * correction + tile_sum;
#pragma unroll
      for (int v = 0; v < kTileMaxDimsPerThread; ++v) acc[v] *= correction;
      max = new_max;
    }
    probs[r * kTileKeys + j] = weight;
    __syncthreads();  // every score has read K
    for (int64_t i = tid; i < kTileKeys * D; i += kTileThreads) {  // V rows into the same buffer
      const int64_t k = i / D, d = i % D, at = value_rows[k];
      kv[k * pitch + d] = at >= 0 ? ToFloat(p.v_cache[at + d]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int v = 0; v < kTileMaxDimsPerThread; ++v) {
      const int64_t d = j + static_cast<int64_t>(v) * kTileKeys;
      if (d < D) {
        float a = acc[v];
        for (int k = 0; k < kTileKeys; ++k) a += probs[r * kTileKeys + k] * kv[k * pitch + d];
        acc[v] = a;
      }
    }
  }
  if (!row_valid) return;
  const int64_t out_row = (first_row + r) * p.out_strides[0] + head * p.out_strides[1];
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;  // a row with no visible key writes 0
#pragma unroll
  for (int v = 0; v < kTileMaxDimsPerThread; ++v) {
    const int64_t d = j + static_cast<int64_t>(v) * kTileKeys;
    if (d < D) StoreFromFloat(p.out, p.out_dtype, out_row + d, acc[v] * inv_sum);
  }
}

template <typename T>
AttentionParams<T> MakeParams(const PagedAttentionArgs& a) {
  AttentionParams<T> p{};
  p.q = a.q.data();
  p.k_cache = static_cast<const T*>(a.k_cache.data());
  p.v_cache = static_cast<const T*>(a.v_cache.data());
  p.out = a.out.data();
  p.q_dtype = a.q.dtype();
  p.out_dtype = a.out.dtype();
  p.block_tables = static_cast<const int32_t*>(a.block_tables.data());
  p.seq_lens = static_cast<const int32_t*>(a.seq_lens.data());
  p.query_start_loc = static_cast<const int32_t*>(a.query_start_loc.data());
  p.q_strides[0] = a.q.stride(0), p.q_strides[1] = a.q.stride(1);
  p.out_strides[0] = a.out.stride(0), p.out_strides[1] = a.out.stride(1);
  for (int i = 0; i < 3; ++i) p.k_strides[i] = a.k_cache.stride(i), p.v_strides[i] = a.v_cache.stride(i);
  p.block_table_stride = a.block_tables.stride(0);
  p.num_seqs = a.block_tables.size(0);
  p.num_heads = a.q.size(1);
  p.kv_group = a.q.size(1) / a.k_cache.size(2);
  p.head_dim = a.q.size(2);
  p.block_size = a.k_cache.size(1);
  p.num_cache_blocks = a.k_cache.size(0);
  p.max_blocks_per_seq = a.block_tables.size(1);
  p.scale = a.scale;
  return p;
}

// Bytes of PagedAttentionQueryTiles' dynamic shared memory for head_dim D.
size_t QueryTilesSharedBytes(int64_t head_dim) {
  return sizeof(float) * (2 * kTileKeys * (head_dim + 1) + kTileRows * kTileKeys) + sizeof(int64_t) * 2 * kTileKeys;
}

// Both caches 16-byte aligned at their start and at every block, offset and head.
// `width`: cache elements per 16-byte vector.
bool CacheVectorsAligned(const PagedAttentionArgs& a, int64_t width) {
  bool aligned = width > 0;
  for (const Tensor* cache : {&a.k_cache, &a.v_cache}) {
    aligned = aligned && reinterpret_cast<uintptr_t>(cache->data()) % 16 == 0;
    for (int d = 0; d < 3; ++d) aligned = aligned && cache->stride(d) % width == 0;
  }
  return aligned;
}

// PagedAttentionGroups<T, kLanes, kChunks, kGroup> for the head_dim and group:
// kLanes lanes cover the row's 16-byte vectors (at least 8, at most 32, twice
// around for 64 f32 vectors), kGroup is the group rounded up to a power of two.
template <typename T, int kLanes, int kChunks>
void LaunchGroupsOfLanes(const AttentionParams<T>& p, dim3 grid, gpuStream_t stream) {
  auto launch = [&](auto group_tag) {
    constexpr int kGroup = decltype(group_tag)::value;
    LaunchKernel(PagedAttentionGroups<T, kLanes, kChunks, kGroup>, grid, kPagedAttentionThreads,
                 GroupsSharedBytes(kGroup, p.head_dim), stream, p);
  };
  if (p.kv_group <= 1) launch(std::integral_constant<int, 1>{});
  else if (p.kv_group <= 2) launch(std::integral_constant<int, 2>{});
  else if (p.kv_group <= 4) launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, 8>{});
}

template <typename T>
void LaunchGroups(const AttentionParams<T>& p, dim3 grid, gpuStream_t stream) {
  const int64_t vectors = p.head_dim / (16 / static_cast<int64_t>(sizeof(T)));
  if (vectors <= 8) {
    LaunchGroupsOfLanes<T, 8, 1>(p, grid, stream);
  } else if (vectors <= 16) {
    LaunchGroupsOfLanes<T, 16, 1>(p, grid, stream);
  } else if (vectors <= 32) {
    LaunchGroupsOfLanes<T, 32, 1>(p, grid, stream);
  } else if constexpr (sizeof(T) == 4) {  // f32, head_dim > 128
    LaunchGroupsOfLanes<T, 32, 2>(p, grid, stream);
  }
}

const char* ReachName(PagedAttentionKernel kernel) {
  switch (kernel) {
    case PagedAttentionKernel::kRowsOnePass: return "PagedAttentionGpu.rows_one_pass";
    case PagedAttentionKernel::kRowsSplitKv: return "PagedAttentionGpu.rows_split_kv";
    case PagedAttentionKernel::kQueryTiles: return "PagedAttentionGpu.query_tiles";
    case PagedAttentionKernel::kGroupsSplitKv: return "PagedAttentionGpu.groups_split_kv";
    case PagedAttentionKernel::kMmaTiles: return "PagedAttentionGpu.mma_tiles";
  }
  return "";
}

void PagedAttentionGpu(const PagedAttentionArgs& a) {
  gpuStream_t stream = PrepareDevice(a.q.device());
  PagedAttentionShape shape{a.q.size(0), a.q.size(1), a.q.size(2), a.max_seq_len,
                            MultiprocessorCount(a.q.device()), a.max_query_len, a.block_tables.size(0)};
  shape.num_kv_heads = a.k_cache.size(2);
  shape.cache_vector_width = 16 / Info(a.k_cache.dtype()).block_bytes;  // 0 for block dtypes (no kernel)
  shape.cache_vectors_aligned = CacheVectorsAligned(a, shape.cache_vector_width);
  shape.mma_operands = PagedAttentionMmaSupports(a);
  const PagedAttentionPlan plan = ApplyPagedAttentionVariant(
      ChoosePagedAttention(shape), shape, tuning::Variant(kPagedAttentionVariantFamily));
  if (!SupportsShape(plan.kernel, shape, plan)) {
    throw Error("vt::PagedAttention on " + a.q.device().ToString() + ": internal error: the kernel choice picked a " +
                "variant that does not support q " + a.q.Describe() + " with " + DTypeName(a.k_cache.dtype()) +
                " k_cache " + a.k_cache.Describe());
  }
  reach::Hit(ReachName(plan.kernel));
  if (plan.kernel == PagedAttentionKernel::kMmaTiles) {
    RunPagedAttentionMma(a, stream);
    return;
  }
  const bool split = plan.num_partitions > 1;  // kRowsSplitKv, or kGroupsSplitKv over several partitions
  Tensor partials;
  if (split) {
    partials = Tensor::Empty({shape.num_tokens, shape.num_heads, plan.num_partitions, shape.head_dim + 2},
                             DType::kF32, a.q.device());
  }
  DispatchFloat(a.k_cache.dtype(), "PagedAttention", [&](auto tag) {
    using T = decltype(tag);
    AttentionParams<T> p = MakeParams<T>(a);
    p.partition_size = plan.partition_size;
    p.num_partitions = plan.num_partitions;
    if (split) p.partials = partials.data_ptr<float>();
    const dim3 rows_grid(GridFor(shape.num_tokens, 1, "PagedAttention"), static_cast<unsigned>(shape.num_heads));
    switch (plan.kernel) {
      case PagedAttentionKernel::kQueryTiles: {
        const dim3 tiles_grid(GridFor(shape.num_tokens, kTileRows, "PagedAttention") + shape.num_seqs,
                              static_cast<unsigned>(shape.num_heads));
        LaunchKernel(PagedAttentionQueryTiles<T>, tiles_grid, kTileThreads, QueryTilesSharedBytes(shape.head_dim),
                     stream, p);
        break;
      }
      case PagedAttentionKernel::kGroupsSplitKv: {
        const dim3 groups_grid(rows_grid.x, static_cast<unsigned>(shape.num_kv_heads),
                               static_cast<unsigned>(plan.num_partitions));
        LaunchGroups<T>(p, groups_grid, stream);
        break;
      }
      case PagedAttentionKernel::kRowsSplitKv: {
        const dim3 split_grid(rows_grid.x, rows_grid.y, static_cast<unsigned>(plan.num_partitions));
        LaunchKernel(PagedAttentionRows<T, true>, split_grid, kPagedAttentionThreads, 0, stream, p);
        break;
      }
      case PagedAttentionKernel::kRowsOnePass:
        LaunchKernel(PagedAttentionRows<T, false>, rows_grid, kPagedAttentionThreads, 0, stream, p);
        break;
      case PagedAttentionKernel::kMmaTiles: break;  // launched above
    }
    if (split) LaunchKernel(CombinePartitions<T>, rows_grid, kPagedAttentionThreads, 0, stream, p);
  });
  CheckLaunch("PagedAttention");
}

}  // namespace

VT_REGISTER_KERNEL(PagedAttention, VT_GPU_DEVICE, PagedAttentionGpu);

}  // namespace vt::gpu
