// GPU kernels of the attention helpers: AttnGateSplit, RopeNeox, WriteKvCache.
// (PagedAttention has its own file.)
//
// Shapes (op_args.h):
//   AttnGateSplit  qg [T, H*2*D], per head q_h | g_h -> query [T, H, D] and
//                  gate [T, H*D] (rows of all three may be strided).
//   RopeNeox       x [T, heads, D] in place (any strides, unit last dim),
//                  positions [T] i32/i64; rotates pairs (i, i + R/2), i < R/2, where
//                  R = rotary_dim, 0 < R <= D (the public op never dispatches R = 0).
//   WriteKvCache   k, v [T, Nkv, D]; caches [blocks, block_size, Nkv, D] with any
//                  strides; slot_mapping [T] i32/i64, negative slots skipped.
//
// RopeNeox takes its frequencies from a table the host computes with HF's f32
// formula (the angle contract, see rope_neox_test.cpp).
// One thread per element (per rotated pair for RopeNeox). The grid is sized from
// the element count, which the public ops guarantee to be positive, and the block
// size is a constant: no launch here can have an empty grid or block.
#include <algorithm>
#include <cmath>

#include "gpu_common.cuh"
#include "vt/ops.h"

namespace vt::gpu {
namespace {

template <typename T>
struct GateSplitParams {
  const T* qg;
  T* query;
  T* gate;
  int64_t tokens, heads, head_dim;
  int64_t qg_token_stride, query_token_stride, query_head_stride, gate_token_stride;
};

template <typename T>
__global__ void GateSplitElements(GateSplitParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t width = p.heads * 2 * p.head_dim, count = p.tokens * width;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / width, r = i % width, h = r / (2 * p.head_dim), c = r % (2 * p.head_dim);
    const T value = p.qg[t * p.qg_token_stride + r];
    if (c < p.head_dim) {
      p.query[t * p.query_token_stride + h * p.query_head_stride + c] = value;
    } else {
      p.gate[t * p.gate_token_stride + h * p.head_dim + (c - p.head_dim)] = value;
    }
  }
}

void AttnGateSplitGpu(const AttnGateSplitArgs& a) {
  gpuStream_t stream = PrepareDevice(a.qg.device());
  DispatchFloat(a.qg.dtype(), "AttnGateSplit", [&](auto tag) {
    using T = decltype(tag);
    GateSplitParams<T> p{static_cast<const T*>(a.qg.data()), static_cast<T*>(a.query.data()),
                         static_cast<T*>(a.gate.data()), a.query.size(0), a.query.size(1), a.head_dim,
                         a.qg.stride(0), a.query.stride(0), a.query.stride(1), a.gate.stride(0)};
    LaunchKernel(GateSplitElements<T>, GridStrideBlocks(a.qg.numel(), a.qg.device(), "AttnGateSplit"),
                 kElementwiseThreads, 0, stream, p);
  });
  CheckLaunch("AttnGateSplit");
}

// Frequencies up to this many pairs travel in the kernel's parameters (1 KB).
constexpr int64_t kRopeTablePairs = 256;

template <typename T>
struct RopeParams {
  T* x;
  const void* positions;
  DType positions_dtype;
  int64_t positions_stride;
  int64_t tokens, heads;
  int64_t token_stride, head_stride;
  int64_t half_rotary;  // R / 2 >= 1
  float theta;
  float inv_freq[kRopeTablePairs];  // pairs < kRopeTablePairs, computed on the host
};

template <typename T>
__global__ void RopeNeoxPairs(RopeParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t count = p.tokens * p.heads * p.half_rotary;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pair = i % p.half_rotary, th = i / p.half_rotary, h = th % p.heads, t = th / p.heads;
    const float position = static_cast<float>(LoadIndex(p.positions, p.positions_dtype, t * p.positions_stride));
    const float inv_freq =
        pair < kRopeTablePairs
            ? p.inv_freq[pair]
            : 1.0f / powf(p.theta, static_cast<float>(2 * pair) / static_cast<float>(2 * p.half_rotary));
    float sin_a, cos_a;
    sincosf(position * inv_freq, &sin_a, &cos_a);
    T* head = p.x + t * p.token_stride + h * p.head_stride;
    const float a = ToFloat(head[pair]), b = ToFloat(head[pair + p.half_rotary]);
    head[pair] = FromFloat<T>(a * cos_a - b * sin_a);
    head[pair + p.half_rotary] = FromFloat<T>(b * cos_a + a * sin_a);
  }
}

void RopeNeoxGpu(const RopeNeoxArgs& a) {
  gpuStream_t stream = PrepareDevice(a.x.device());
  const int64_t pairs = a.x.size(0) * a.x.size(1) * (a.rotary_dim / 2);
  DispatchFloat(a.x.dtype(), "RopeNeox", [&](auto tag) {
    using T = decltype(tag);
    RopeParams<T> p{static_cast<T*>(a.x.data()), a.positions.data(), a.positions.dtype(), a.positions.stride(0),
                    a.x.size(0), a.x.size(1), a.x.stride(0), a.x.stride(1), a.rotary_dim / 2,
                    a.theta, {}};
    // The angle contract is HF's f32 arithmetic: inv_freq = 1 / theta^(f32(2i) / R),
    // angle = f32(position) * inv_freq. The host's powf rounds like HF's; the
    // device's may differ by an ulp, which position 2e5 turns into 1e-3 rad.
    for (int64_t i = 0; i < std::min(p.half_rotary, kRopeTablePairs); ++i) {
      p.inv_freq[i] = 1.0f / std::pow(a.theta, static_cast<float>(2 * i) / static_cast<float>(a.rotary_dim));
    }
    LaunchKernel(RopeNeoxPairs<T>, GridStrideBlocks(pairs, a.x.device(), "RopeNeox"), kElementwiseThreads, 0, stream,
                 p);
  });
  CheckLaunch("RopeNeox");
}

// k/v and the caches may have different float dtypes (e.g. f32 activations into a
// bf16 cache): values are converted through f32, which is exact for equal dtypes.
struct KvWriteParams {
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  DType src_dtype, cache_dtype;
  const void* slots;
  DType slots_dtype;
  int64_t slots_stride;
  int64_t tokens, kv_heads, head_dim;
  int64_t k_strides[2], v_strides[2];  // token, head
  int64_t block_size, num_slots;
  int64_t k_cache_strides[3], v_cache_strides[3];  // block, offset, head
};

__global__ void WriteKvElements(KvWriteParams p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  const int64_t count = p.tokens * p.kv_heads * p.head_dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = i % p.head_dim, th = i / p.head_dim, h = th % p.kv_heads, t = th / p.kv_heads;
    const int64_t slot = LoadIndex(p.slots, p.slots_dtype, t * p.slots_stride);
    if (slot < 0 || slot >= p.num_slots) continue;  // padding token, or a slot outside the cache
    const int64_t block = slot / p.block_size, offset = slot % p.block_size;
    const float k = LoadAsFloat(p.k, p.src_dtype, t * p.k_strides[0] + h * p.k_strides[1] + d);
    const float v = LoadAsFloat(p.v, p.src_dtype, t * p.v_strides[0] + h * p.v_strides[1] + d);
    StoreFromFloat(p.k_cache, p.cache_dtype,
                   block * p.k_cache_strides[0] + offset * p.k_cache_strides[1] + h * p.k_cache_strides[2] + d, k);
    StoreFromFloat(p.v_cache, p.cache_dtype,
                   block * p.v_cache_strides[0] + offset * p.v_cache_strides[1] + h * p.v_cache_strides[2] + d, v);
  }
}

void WriteKvCacheGpu(const WriteKvCacheArgs& a) {
  gpuStream_t stream = PrepareDevice(a.k.device());
  KvWriteParams p{a.k.data(),
                  a.v.data(),
                  a.k_cache.data(),
                  a.v_cache.data(),
                  a.k.dtype(),
                  a.k_cache.dtype(),
                  a.slot_mapping.data(),
                  a.slot_mapping.dtype(),
                  a.slot_mapping.stride(0),
                  a.k.size(0),
                  a.k.size(1),
                  a.k.size(2),
                  {a.k.stride(0), a.k.stride(1)},
                  {a.v.stride(0), a.v.stride(1)},
                  a.k_cache.size(1),
                  a.k_cache.size(0) * a.k_cache.size(1),
                  {a.k_cache.stride(0), a.k_cache.stride(1), a.k_cache.stride(2)},
                  {a.v_cache.stride(0), a.v_cache.stride(1), a.v_cache.stride(2)}};
  LaunchKernel(WriteKvElements, GridStrideBlocks(a.k.numel(), a.k.device(), "WriteKvCache"), kElementwiseThreads, 0,
               stream, p);
  CheckLaunch("WriteKvCache");
}

}  // namespace

VT_REGISTER_KERNEL(AttnGateSplit, VT_GPU_DEVICE, AttnGateSplitGpu);
VT_REGISTER_KERNEL(RopeNeox, VT_GPU_DEVICE, RopeNeoxGpu);
VT_REGISTER_KERNEL(WriteKvCache, VT_GPU_DEVICE, WriteKvCacheGpu);

}  // namespace vt::gpu
