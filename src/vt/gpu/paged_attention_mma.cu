// PagedAttention for prompts on tensor cores (CUDA: the backend is built for sm_90 and
// compute_80, so every device it runs on has mma.m16n8k16 for bf16/f16): the kMmaTiles
// variant of paged_attention_choice.h.
//
// Shapes as paged_attention.cu: q [T, Nq, D] and k_cache, v_cache [blocks,
// block_size, Nkv, D] of one 16-bit dtype (bf16 or f16), out [T, Nq, D] any float
// dtype (q and out with strided rows);
// block_tables [B, max_blocks] i32; seq_lens [B]; query_start_loc [B + 1]. Row t of
// sequence b sits at position seq_lens[b] - q_len_b + (t - query_start_loc[b]) and
// attends to keys 0..position through the block table, so earlier context (chunked
// prefill, prefix-cache hits) is read from the cache like the prompt's own keys.
//
// One block of 4 warps per (64 query rows of one sequence, query head, 128 output
// dims): warp w owns rows 16w..16w+15. The block walks the keys up to its last
// row's position in tiles of 64: the tile's K rows (all D dims) and V rows (the
// block's output dims) are staged in shared memory with 16-byte loads (zeros for a
// key past the context or of a block id outside the cache, which is also masked),
// then each warp computes its 16 x 64 scores S = q K^T with mma.m16n8k16 (f32
// accumulators; q and K fragments through ldmatrix), masks the causal part, takes
// the online softmax of its rows in registers (a row's 64 scores sit in the 4
// lanes of a quad: two shuffles), and adds P V with P re-packed from the score
// accumulators straight into the A fragments and V through ldmatrix.trans.
// D > 128 (the 9B's 256) splits the output dims over gridDim.z: each half recomputes
// the scores, 1.5x the matrix work, and keeps 64 f32 accumulators per thread.
// Shared memory (rows padded by 16 bytes so ldmatrix's 8 rows hit 8 bank groups):
// q [64][D + 8], K [64][D + 8], V [64][128 + 8] of the cache dtype, key offsets
// [64] x 2: 84.5 KB at D = 256, so 2 blocks per H100/H200 SM.
// HIP has no mma.sync / ldmatrix: there PagedAttentionMmaSupports is false and the
// choice keeps the other kernels.
#include "gpu_common.cuh"
#include "gpu_mma.cuh"
#include "paged_attention_mma.h"

namespace vt::gpu {

#if !VT_GPU_HIP
namespace {

constexpr int kMmaRows = 64;        // query rows per block (16 per warp)
constexpr int kMmaKeys = 64;        // keys per tile
constexpr int kMmaThreads = 128;
constexpr int kMmaMaxOutDims = 128;  // output dims per block (gridDim.z splits more)
constexpr int kPad = 8;              // elements of padding per shared row (16 bytes)

struct MmaParams {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  DType q_dtype, out_dtype;
  const int32_t* block_tables;
  const int32_t* seq_lens;
  const int32_t* query_start_loc;
  int64_t q_strides[2], out_strides[2];  // token, head
  int64_t k_strides[3], v_strides[3];    // block, offset, head
  int64_t block_table_stride;
  int64_t num_seqs, kv_group, block_size, num_cache_blocks, max_blocks_per_seq;
  float scale_log2;  // softmax scale x log2(e): scores are exponentiated with exp2
};

// Block b's (sequence, first row of its 64-row tile), or seq = -1 past the last tile.
__device__ inline void MmaTileOfBlock(const int32_t* query_start_loc, int64_t num_seqs, int64_t block, int64_t* seq,
                                      int64_t* first_row) {
  int64_t tiles_before = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t rows = query_start_loc[b + 1] - query_start_loc[b];
    const int64_t tiles = (rows + kMmaRows - 1) / kMmaRows;
    if (block < tiles_before + tiles) {
      *seq = b;
      *first_row = query_start_loc[b] + (block - tiles_before) * kMmaRows;
      return;
    }
    tiles_before += tiles;
  }
  *seq = -1;
}

template <typename T, int kD>
__global__ void __launch_bounds__(kMmaThreads, 2) PagedAttentionMmaTiles(MmaParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  constexpr int kOutDims = kD < kMmaMaxOutDims ? kD : kMmaMaxOutDims;
  constexpr int kPitch = kD + kPad, kVPitch = kOutDims + kPad;
  constexpr int kChunks = kD / 8, kOutChunks = kOutDims / 8;  // 16-byte chunks of a row
  constexpr int kScoreTiles = kMmaKeys / 8, kOutTiles = kOutDims / 8;
  extern __shared__ uint4 mma_shared[];
  T* q_tile = reinterpret_cast<T*>(mma_shared);
  T* k_tile = q_tile + kMmaRows * kPitch;
  T* v_tile = k_tile + kMmaKeys * kPitch;
  auto* key_rows = reinterpret_cast<int64_t*>(v_tile + kMmaKeys * kVPitch);
  int64_t* value_rows = key_rows + kMmaKeys;

  int64_t seq, first_row;
  MmaTileOfBlock(p.query_start_loc, p.num_seqs, blockIdx.x, &seq, &first_row);
  if (seq < 0) return;  // uniform across the block
  const int64_t head = blockIdx.y, kv_head = head / p.kv_group, dim0 = static_cast<int64_t>(blockIdx.z) * kOutDims;
  const int64_t seq_rows_end = p.query_start_loc[seq + 1];
  const int64_t rows = seq_rows_end - first_row < kMmaRows ? seq_rows_end - first_row : kMmaRows;
  const int64_t q_len = seq_rows_end - p.query_start_loc[seq];
  const int64_t first_position = p.seq_lens[seq] - q_len + (first_row - p.query_start_loc[seq]);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int quad_row = lane / 4, quad_col = lane % 4;  // the mma fragment coordinates

  // q rows as the cache dtype (rows past the sequence are zeros).
  WithFloatPointer(p.q, p.q_dtype, [&](const auto* qp) {  // loads issued back to back (gpu_common.cuh)
#pragma unroll 4
    for (int i = tid; i < kMmaRows * kD; i += kMmaThreads) {
      const int r = i / kD, d = i % kD;
      const float v = r < rows ? ToFloat(qp[(first_row + r) * p.q_strides[0] + head * p.q_strides[1] + d]) : 0.0f;
      q_tile[r * kPitch + d] = FromFloat<T>(v);
    }
  });

  // Thread's rows: quad_row and quad_row + 8 of its warp's 16.
  const int64_t row_position[2] = {first_position + warp * 16 + quad_row, first_position + warp * 16 + quad_row + 8};
  const bool row_valid[2] = {warp * 16 + quad_row < rows, warp * 16 + quad_row + 8 < rows};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float acc[kOutTiles][4] = {};
  const int64_t context = first_position + rows;  // keys the block's last row sees

  for (int64_t first_key = 0; first_key < context; first_key += kMmaKeys) {
    __syncthreads();  // the previous tile's K and V are no longer read
    if (tid < kMmaKeys) {
      const int64_t key = first_key + tid, table_index = key / p.block_size;
      const int64_t block =
          key < context && table_index < p.max_blocks_per_seq ? p.block_tables[seq * p.block_table_stride + table_index] : -1;
      const bool valid = block >= 0 && block < p.num_cache_blocks;
      const int64_t offset = key % p.block_size;
      key_rows[tid] = valid ? block * p.k_strides[0] + offset * p.k_strides[1] + kv_head * p.k_strides[2] : -1;
      value_rows[tid] = valid ? block * p.v_strides[0] + offset * p.v_strides[1] + kv_head * p.v_strides[2] : -1;
    }
    __syncthreads();
    for (int i = tid; i < kMmaKeys * kChunks; i += kMmaThreads) {  // coalesced along each K row
      const int key = i / kChunks, chunk = i % kChunks;
      const int64_t at = key_rows[key];
      uint4 v = make_uint4(0, 0, 0, 0);
      if (at >= 0) v = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.k_cache) + at + chunk * 8);
      *reinterpret_cast<uint4*>(k_tile + key * kPitch + chunk * 8) = v;
    }
    for (int i = tid; i < kMmaKeys * kOutChunks; i += kMmaThreads) {
      const int key = i / kOutChunks, chunk = i % kOutChunks;
      const int64_t at = value_rows[key];
      uint4 v = make_uint4(0, 0, 0, 0);
      if (at >= 0) v = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.v_cache) + at + dim0 + chunk * 8);
      *reinterpret_cast<uint4*>(v_tile + key * kVPitch + chunk * 8) = v;
    }
    __syncthreads();

    // S = q K^T for the warp's 16 rows and the tile's 64 keys.
    float s[kScoreTiles][4] = {};
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t a[4];
      LoadMatrices(a, q_tile + (warp * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * kPitch + ks * 16 + 8 * (lane / 16));
#pragma unroll
      for (int np = 0; np < kScoreTiles / 2; ++np) {
        uint32_t b[4];  // keys 16np..16np+7 dims lo/hi, keys +8..+15 dims lo/hi
        LoadMatrices(b, k_tile + (np * 16 + lane % 8 + 8 * (lane / 16)) * kPitch + ks * 16 + 8 * ((lane / 8) % 2));
        MmaType<T>::Mma(s[2 * np], a, b[0], b[1]);
        MmaType<T>::Mma(s[2 * np + 1], a, b[2], b[3]);
      }
    }

    // Causal mask and the online softmax of the thread's two rows (in log2 units).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e / 2, key_in_tile = n * 8 + 2 * quad_col + e % 2;
        const int64_t key = first_key + key_in_tile;
        const bool visible = row_valid[half] && key <= row_position[half] && key_rows[key_in_tile] >= 0;
        s[n][e] = visible ? s[n][e] * p.scale_log2 : -INFINITY;
        tile_max[half] = fmaxf(tile_max[half], s[n][e]);
      }
    }
    float correction[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 1));
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 2));
      const float new_max = fmaxf(row_max[half], tile_max[half]);
      correction[half] = row_max[half] == -INFINITY ? 0.0f : exp2f(row_max[half] - new_max);
      row_max[half] = new_max;
    }
    float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e / 2;
        s[n][e] = s[n][e] == -INFINITY ? 0.0f : exp2f(s[n][e] - row_max[half]);
        tile_sum[half] += s[n][e];
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      tile_sum[half] += __shfl_xor_sync(0xffffffffu, tile_sum[half], 1);
      tile_sum[half] += __shfl_xor_sync(0xffffffffu, tile_sum[half], 2);
      row_sum[half] = row_sum[half] * correction[half] + tile_sum[half];
    }
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      acc[n][0] *= correction[0], acc[n][1] *= correction[0];
      acc[n][2] *= correction[1], acc[n][3] *= correction[1];
    }

    // acc += P V: P's A fragments are the score accumulators of two key tiles.
#pragma unroll
    for (int kc = 0; kc < kMmaKeys / 16; ++kc) {
      const uint32_t a[4] = {MmaType<T>::Pack(s[2 * kc][0], s[2 * kc][1]), MmaType<T>::Pack(s[2 * kc][2], s[2 * kc][3]),
                             MmaType<T>::Pack(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                             MmaType<T>::Pack(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kOutTiles / 2; ++dp) {
        uint32_t b[4];  // keys lo/hi of dims 16dp..+7, keys lo/hi of dims +8..+15
        LoadMatricesTransposed(b, v_tile + (kc * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * kVPitch + dp * 16 + 8 * (lane / 16));
        MmaType<T>::Mma(acc[2 * dp], a, b[0], b[1]);
        MmaType<T>::Mma(acc[2 * dp + 1], a, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (!row_valid[half]) continue;
    const int64_t row = first_row + warp * 16 + quad_row + 8 * half;
    const float inv_sum = row_sum[half] > 0.0f ? 1.0f / row_sum[half] : 0.0f;  // no visible key: 0
    const int64_t out_row = row * p.out_strides[0] + head * p.out_strides[1] + dim0;
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      const int64_t d = n * 8 + 2 * quad_col;
      StoreFromFloat(p.out, p.out_dtype, out_row + d, acc[n][2 * half] * inv_sum);
      StoreFromFloat(p.out, p.out_dtype, out_row + d + 1, acc[n][2 * half + 1] * inv_sum);
    }
  }
}

template <int kD>
size_t MmaSharedBytes(size_t element_bytes) {
  constexpr int kOutDims = kD < kMmaMaxOutDims ? kD : kMmaMaxOutDims;
  return element_bytes * (size_t{kMmaRows} * (kD + kPad) + size_t{kMmaKeys} * (kD + kPad) +
                          size_t{kMmaKeys} * (kOutDims + kPad)) +
         sizeof(int64_t) * 2 * kMmaKeys;
}

template <typename T, int kD>
void LaunchForHeadDim(const MmaParams& p, int64_t num_tokens, int64_t num_seqs, int64_t num_heads, gpuStream_t stream) {
  constexpr int kOutDims = kD < kMmaMaxOutDims ? kD : kMmaMaxOutDims;
  const size_t shared = MmaSharedBytes<kD>(sizeof(T));
  CheckGpu(gpuFuncSetAttribute(reinterpret_cast<const void*>(&PagedAttentionMmaTiles<T, kD>),
                               gpuFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
           "raising the shared-memory limit of PagedAttention's tensor-core kernel");
  const dim3 grid(GridFor(num_tokens, kMmaRows, "PagedAttention") + static_cast<unsigned>(num_seqs),
                  static_cast<unsigned>(num_heads), static_cast<unsigned>(kD / kOutDims));
  LaunchKernel(PagedAttentionMmaTiles<T, kD>, grid, kMmaThreads, shared, stream, p);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool PagedAttentionMmaSupports(const PagedAttentionArgs& a) {
  const int64_t d = a.q.size(2);
  const DType cache = a.k_cache.dtype();
  if (d != 64 && d != 128 && d != 256) return false;
  // q in the cache's 16-bit dtype: the scores take q as it is (an f32 q would be
  // rounded, outside the f32 contract).
  if ((cache != DType::kBF16 && cache != DType::kF16) || a.v_cache.dtype() != cache || a.q.dtype() != cache) {
    return false;
  }
  if (!Aligned16(a.k_cache.data()) || !Aligned16(a.v_cache.data())) return false;
  for (int i = 0; i < 3; ++i) {  // every K/V row starts on 16 bytes (8 elements)
    if (a.k_cache.stride(i) % 8 != 0 || a.v_cache.stride(i) % 8 != 0) return false;
  }
  return a.k_cache.stride(3) == 1 && a.v_cache.stride(3) == 1 && a.q.stride(2) == 1 && a.out.stride(2) == 1;
}

void RunPagedAttentionMma(const PagedAttentionArgs& a, gpuStream_t stream) {
  MmaParams p{};
  p.q = a.q.data();
  p.k_cache = a.k_cache.data();
  p.v_cache = a.v_cache.data();
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
  p.kv_group = a.q.size(1) / a.k_cache.size(2);
  p.block_size = a.k_cache.size(1);
  p.num_cache_blocks = a.k_cache.size(0);
  p.max_blocks_per_seq = a.block_tables.size(1);
  p.scale_log2 = a.scale * 1.4426950408889634f;
  const int64_t tokens = a.q.size(0), heads = a.q.size(1), d = a.q.size(2);
  const auto launch = [&](auto tag) {
    using T = decltype(tag);
    if (d == 64) LaunchForHeadDim<T, 64>(p, tokens, p.num_seqs, heads, stream);
    else if (d == 128) LaunchForHeadDim<T, 128>(p, tokens, p.num_seqs, heads, stream);
    else LaunchForHeadDim<T, 256>(p, tokens, p.num_seqs, heads, stream);
  };
  if (a.k_cache.dtype() == DType::kBF16) launch(bf16_t{});
  else launch(f16_t{});
  CheckLaunch("PagedAttention");
}

#else  // HIP: no mma.sync / ldmatrix

bool PagedAttentionMmaSupports(const PagedAttentionArgs&) { return false; }

void RunPagedAttentionMma(const PagedAttentionArgs& a, gpuStream_t) {
  throw Error("vt::PagedAttention on " + a.q.device().ToString() +
              ": internal error: the tensor-core kernel (mma.sync) was chosen on a HIP device");
}

#endif

}  // namespace vt::gpu
