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
// One block of 128 threads per (row, group of query heads sharing a kv head
// [, partition]), see paged_attention_choice.h for which variant runs. The block
// walks its keys in tiles of 64:
//   1. scores: each warp takes whole keys; its lanes split D, read the K row once
//      (coalesced) and dot it with every query head of the group (scaled queries
//      in shared memory); warp sums finish the dot products;
//   2. softmax: the warp owning a head updates that head's running max and sum
//      (online softmax in f32, kept in registers) and turns the tile's scores into
//      weights;
//   3. V: every thread owns output dims d (all heads of the group), reads V[j, d]
//      once per key (coalesced across threads) and adds it with each head's weight.
// K and V bytes are thus read once per group, not once per query head. Shared
// memory: the group's queries (<= 8 KB), the tile's scores and key addresses
// (~4.6 KB), fine for every target's LDS. A block id outside the cache masks its
// keys instead of reading outside the cache.
#include "gpu_common.cuh"
#include "paged_attention_choice.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::gpu {
namespace {

constexpr int kKeyTile = 64;
constexpr int kMaxDimsPerThread = kPagedAttentionMaxHeadDim / kPagedAttentionThreads;
constexpr int kMaxHeads = kPagedAttentionMaxHeadsPerBlock;

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
  int64_t heads_per_block, head_groups;  // head_groups = ceil(kv_group / heads_per_block)
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

struct TileShared {
  float q[kPagedAttentionMaxGroupDims];  // [heads][D], scaled
  float scores[kMaxHeads][kKeyTile];     // scores, then softmax weights
  int64_t key_rows[kKeyTile];            // element offset of each key's V row, -1 if masked
  float correction[kMaxHeads];           // e^(old max - new max) of the current tile
  float max[kMaxHeads], sum[kMaxHeads];  // final softmax state, published after the walk
};

// What the block works on: its row, kv head, query heads and key range.
struct BlockWork {
  int64_t row, seq, kv_head, first_head, begin, end;
  int heads;
};

template <typename T, bool kSplit>
__device__ BlockWork LocateWork(const AttentionParams<T>& p) {
  BlockWork w;
  w.row = blockIdx.x;
  w.kv_head = blockIdx.y / p.head_groups;
  const int64_t chunk = blockIdx.y % p.head_groups;
  w.first_head = w.kv_head * p.kv_group + chunk * p.heads_per_block;
  const int64_t left = p.kv_group - chunk * p.heads_per_block;
  w.heads = static_cast<int>(left < p.heads_per_block ? left : p.heads_per_block);
  w.seq = SequenceOfRow(p.query_start_loc, p.num_seqs, w.row);
  const int64_t q_len = p.query_start_loc[w.seq + 1] - p.query_start_loc[w.seq];
  const int64_t position = p.seq_lens[w.seq] - q_len + (w.row - p.query_start_loc[w.seq]);
  const int64_t context = position + 1;  // keys 0..position
  w.begin = kSplit ? static_cast<int64_t>(blockIdx.z) * p.partition_size : 0;
  const int64_t end = kSplit ? w.begin + p.partition_size : context;
  w.end = end < context ? end : context;
  return w;
}

// Step 1: scores of keys [first, first + count) for every head of the group.
template <typename T>
__device__ void ScoreTile(const AttentionParams<T>& p, const BlockWork& w, int64_t first, int count, TileShared& sh) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  constexpr int kWarps = kPagedAttentionThreads / kWarpSize;
  for (int j = warp; j < count; j += kWarps) {
    const int64_t position = first + j;
    const int64_t table_index = position / p.block_size;
    const int64_t block =
        table_index < p.max_blocks_per_seq ? p.block_tables[w.seq * p.block_table_stride + table_index] : -1;
    const bool valid = block >= 0 && block < p.num_cache_blocks;
    const int64_t offset = position % p.block_size;
    float partial[kMaxHeads] = {};
    if (valid) {
      const T* k = p.k_cache + block * p.k_strides[0] + offset * p.k_strides[1] + w.kv_head * p.k_strides[2];
      for (int64_t d = lane; d < p.head_dim; d += kWarpSize) {
        const float kd = ToFloat(k[d]);
#pragma unroll
        for (int h = 0; h < kMaxHeads; ++h) {
          if (h < w.heads) partial[h] += sh.q[h * p.head_dim + d] * kd;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) {
      if (h < w.heads) {
        const float score = WarpSum(partial[h]);
        if (lane == 0) sh.scores[h][j] = valid ? score : -INFINITY;
      }
    }
    if (lane == 0) {
      sh.key_rows[j] = valid ? block * p.v_strides[0] + offset * p.v_strides[1] + w.kv_head * p.v_strides[2] : -1;
    }
  }
}

// Step 2: the warp owning head h (h % warps == warp) folds the tile into the head's
// running max and sum (registers, identical in every lane of that warp) and
// rewrites the scores as weights e^(score - new max).
__device__ inline void SoftmaxTile(int heads, int count, TileShared& sh, float (&run_max)[kMaxHeads],
                                   float (&run_sum)[kMaxHeads]) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  constexpr int kWarps = kPagedAttentionThreads / kWarpSize;
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    if (h < heads && h % kWarps == warp) {
      float tile_max = -INFINITY;
      for (int j = lane; j < count; j += kWarpSize) tile_max = fmaxf(tile_max, sh.scores[h][j]);
      const float new_max = fmaxf(run_max[h], WarpMax(tile_max));
      const float correction = run_max[h] == -INFINITY ? 0.0f : expf(run_max[h] - new_max);
      float tile_sum = 0.0f;
      for (int j = lane; j < count; j += kWarpSize) {
        const float weight = new_max == -INFINITY ? 0.0f : expf(sh.scores[h][j] - new_max);  // all masked so far
        sh.scores[h][j] = weight;
        tile_sum += weight;
      }
      run_sum[h] = run_sum[h] * correction + WarpSum(tile_sum);
      run_max[h] = new_max;
      if (lane == 0) sh.correction[h] = correction;
    }
  }
}

// Step 3: this thread's output dims, all heads, over the tile's V rows.
template <typename T>
__device__ void AccumulateTile(const AttentionParams<T>& p, int heads, int count, const TileShared& sh,
                               float (&acc)[kMaxHeads][kMaxDimsPerThread]) {
#pragma unroll
  for (int r = 0; r < kMaxDimsPerThread; ++r) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(r) * kPagedAttentionThreads;
    if (d < p.head_dim) {
#pragma unroll
      for (int h = 0; h < kMaxHeads; ++h) {
        if (h < heads) acc[h][r] *= sh.correction[h];
      }
      for (int j = 0; j < count; ++j) {
        if (sh.key_rows[j] < 0) continue;
        const float v = ToFloat(p.v_cache[sh.key_rows[j] + d]);
#pragma unroll
        for (int h = 0; h < kMaxHeads; ++h) {
          if (h < heads) acc[h][r] += sh.scores[h][j] * v;
        }
      }
    }
  }
}

// Writes the output rows (one pass) or the partition's partials (split).
template <typename T, bool kSplit>
__device__ void WriteResult(const AttentionParams<T>& p, const BlockWork& w, const TileShared& sh,
                            const float (&acc)[kMaxHeads][kMaxDimsPerThread]) {
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    if (h < w.heads) {
      const int64_t head = w.first_head + h;
      float* partial = nullptr;
      if constexpr (kSplit) {
        partial = p.partials + ((w.row * p.num_heads + head) * p.num_partitions + blockIdx.z) * (p.head_dim + 2);
        if (threadIdx.x == 0) {
          partial[p.head_dim] = sh.max[h];
          partial[p.head_dim + 1] = sh.sum[h];
        }
      }
      const int64_t out_row = w.row * p.out_strides[0] + head * p.out_strides[1];
      const float inv_sum = sh.sum[h] > 0.0f ? 1.0f / sh.sum[h] : 0.0f;  // a row with no visible key writes 0
#pragma unroll
      for (int r = 0; r < kMaxDimsPerThread; ++r) {
        const int64_t d = threadIdx.x + static_cast<int64_t>(r) * kPagedAttentionThreads;
        if (d < p.head_dim) {
          if constexpr (kSplit) {
            partial[d] = acc[h][r];
          } else {
            StoreFromFloat(p.out, p.out_dtype, out_row + d, acc[h][r] * inv_sum);
          }
        }
      }
    }
  }
}

template <typename T, bool kSplit>
__global__ void __launch_bounds__(kPagedAttentionThreads) PagedAttentionRows(AttentionParams<T> p) {
  __shared__ TileShared sh;
  const BlockWork w = LocateWork<T, kSplit>(p);
  for (int64_t i = threadIdx.x; i < w.heads * p.head_dim; i += blockDim.x) {
    const int64_t h = i / p.head_dim, d = i % p.head_dim;
    const int64_t q_at = w.row * p.q_strides[0] + (w.first_head + h) * p.q_strides[1] + d;
    sh.q[i] = LoadAsFloat(p.q, p.q_dtype, q_at) * p.scale;
  }
  __syncthreads();
  float run_max[kMaxHeads], run_sum[kMaxHeads];
  float acc[kMaxHeads][kMaxDimsPerThread] = {};
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    run_max[h] = -INFINITY;
    run_sum[h] = 0.0f;
  }
  for (int64_t first = w.begin; first < w.end; first += kKeyTile) {
    const int count = static_cast<int>(w.end - first < kKeyTile ? w.end - first : kKeyTile);
    ScoreTile(p, w, first, count, sh);
    __syncthreads();
    SoftmaxTile(w.heads, count, sh, run_max, run_sum);
    __syncthreads();
    AccumulateTile(p, w.heads, count, sh, acc);
    __syncthreads();  // the next tile rewrites scores, key_rows and correction
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  constexpr int kWarps = kPagedAttentionThreads / kWarpSize;
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    if (h < w.heads && h % kWarps == warp && lane == 0) {
      sh.max[h] = run_max[h];
      sh.sum[h] = run_sum[h];
    }
  }
  __syncthreads();
  WriteResult<T, kSplit>(p, w, sh, acc);
}

// out[row, head] = sum_p acc_p * e^(max_p - M) / sum_p sum_p * e^(max_p - M).
template <typename T>
__global__ void __launch_bounds__(kPagedAttentionThreads) CombinePartitions(AttentionParams<T> p) {
  const int64_t row = blockIdx.x, head = blockIdx.y;
  const float* partials = p.partials + (row * p.num_heads + head) * p.num_partitions * (p.head_dim + 2);
  float global_max = -INFINITY;
  for (int64_t part = 0; part < p.num_partitions; ++part) {
    global_max = fmaxf(global_max, partials[part * (p.head_dim + 2) + p.head_dim]);
  }
  float total = 0.0f;
  float acc[kMaxDimsPerThread] = {};
  for (int64_t part = 0; part < p.num_partitions; ++part) {
    const float* partial = partials + part * (p.head_dim + 2);
    const float part_max = partial[p.head_dim];
    if (part_max == -INFINITY) continue;  // a partition past the row's context, or fully masked
    const float factor = expf(part_max - global_max);
    total += partial[p.head_dim + 1] * factor;
#pragma unroll
    for (int r = 0; r < kMaxDimsPerThread; ++r) {
      const int64_t d = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
      if (d < p.head_dim) acc[r] += partial[d] * factor;
    }
  }
  const int64_t out_row = row * p.out_strides[0] + head * p.out_strides[1];
  const float inv_total = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxDimsPerThread; ++r) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
    if (d < p.head_dim) StoreFromFloat(p.out, p.out_dtype, out_row + d, acc[r] * inv_total);
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

void PagedAttentionGpu(const PagedAttentionArgs& a) {
  gpuStream_t stream = PrepareDevice(a.q.device());
  const PagedAttentionShape shape{a.q.size(0),  a.q.size(1),  a.k_cache.size(2),
                                  a.q.size(2),  a.max_seq_len, MultiprocessorCount(a.q.device())};
  const PagedAttentionPlan plan = ChoosePagedAttention(shape);
  if (!SupportsShape(plan.kernel, shape, plan)) {
    throw Error("vt::PagedAttention on " + a.q.device().ToString() + ": internal error: the kernel choice picked a " +
                "variant that does not support q " + a.q.Describe());
  }
  const bool split = plan.kernel == PagedAttentionKernel::kRowsSplitKv;
  reach::Hit(split ? "PagedAttentionGpu.rows_split_kv" : "PagedAttentionGpu.rows_one_pass");
  Tensor partials;
  if (split) {
    partials = Tensor::Empty({shape.num_tokens, shape.num_heads, plan.num_partitions, shape.head_dim + 2},
                             DType::kF32, a.q.device());
  }
  DispatchFloat(a.k_cache.dtype(), "PagedAttention", [&](auto tag) {
    using T = decltype(tag);
    AttentionParams<T> p = MakeParams<T>(a);
    p.heads_per_block = plan.heads_per_block;
    p.head_groups = HeadGroupsPerKvHead(shape, plan);
    p.partition_size = plan.partition_size;
    p.num_partitions = plan.num_partitions;
    // x: query rows; y: (kv head, group of its query heads); z: key partitions.
    const dim3 grid(GridFor(shape.num_tokens, 1, "PagedAttention"),
                    static_cast<unsigned>(shape.num_kv_heads * p.head_groups),
                    static_cast<unsigned>(plan.num_partitions));
    if (split) {
      p.partials = partials.data_ptr<float>();
      PagedAttentionRows<T, true><<<grid, kPagedAttentionThreads, 0, stream>>>(p);
      const dim3 combine_grid(grid.x, static_cast<unsigned>(shape.num_heads));
      CombinePartitions<T><<<combine_grid, kPagedAttentionThreads, 0, stream>>>(p);
    } else {
      PagedAttentionRows<T, false><<<grid, kPagedAttentionThreads, 0, stream>>>(p);
    }
  });
  CheckLaunch("PagedAttention");
}

}  // namespace

VT_REGISTER_KERNEL(PagedAttention, VT_GPU_DEVICE, PagedAttentionGpu);

}  // namespace vt::gpu
