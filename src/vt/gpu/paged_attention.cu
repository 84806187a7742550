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
// One block of 128 threads per (row, head[, partition]), see
// paged_attention_choice.h for which variant runs. The block walks its keys in
// tiles of 64: each warp scores whole keys (lanes split D, a warp-sum finishes the
// dot product; K reads are coalesced along D), the block takes the tile's max and
// softmax weights (online softmax in f32), then every thread accumulates its own
// output dims over the tile's V rows (coalesced across threads). The scaled query
// and the tile's scores and key addresses live in shared memory (about 1.8 KB,
// fine for every target's LDS). A block id outside the cache masks its keys
// instead of reading outside the cache.
#include "gpu_common.cuh"
#include "paged_attention_choice.h"
#include "vt/ops.h"
#include "vt/reach.h"

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
  const PagedAttentionShape shape{a.q.size(0), a.q.size(1), a.q.size(2), a.max_seq_len,
                                  MultiprocessorCount(a.q.device())};
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
    p.partition_size = plan.partition_size;
    p.num_partitions = plan.num_partitions;
    const dim3 rows_grid(GridFor(shape.num_tokens, 1, "PagedAttention"), static_cast<unsigned>(shape.num_heads));
    if (split) {
      p.partials = partials.data_ptr<float>();
      const dim3 split_grid(rows_grid.x, rows_grid.y, static_cast<unsigned>(plan.num_partitions));
      PagedAttentionRows<T, true><<<split_grid, kPagedAttentionThreads, 0, stream>>>(p);
      CombinePartitions<T><<<rows_grid, kPagedAttentionThreads, 0, stream>>>(p);
    } else {
      PagedAttentionRows<T, false><<<rows_grid, kPagedAttentionThreads, 0, stream>>>(p);
    }
  });
  CheckLaunch("PagedAttention");
}

}  // namespace

VT_REGISTER_KERNEL(PagedAttention, VT_GPU_DEVICE, PagedAttentionGpu);

}  // namespace vt::gpu
