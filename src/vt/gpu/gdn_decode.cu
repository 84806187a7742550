// GdnDecode on the GPU: a GDN layer's decode step in two launches where the unfused
// ops take six (CausalConv1dUpdate, L2Norm twice, GdnGates, GdnRecurrent,
// GatedRmsNorm: ~25 us of launches and round trips a layer at batch 1, 24-30 layers a
// step, bench/gpu_notes.md).
//
//   GdnDecodeKeys    grid (rows, key heads), a thread per q and k channel of the key
//                    head: the conv step (+ SiLU) on its conv state, then the two L2
//                    norms as block sums; writes the normalised q, k [B, 2, Hk, Dk].
//   GdnDecodeValues  grid (rows, value heads), 4 x 128 threads: thread (group, j)
//                    holds rows [group R, group R + R) of the head's state column j
//                    in registers (R = Dk / 4, as GdnStateInRegisters); the v channel's
//                    conv step, the gates, the delta rule, then the gated RMS norm of
//                    the head's Dv outputs (a block sum) and the store.
//   GdnDecodeValueSlices  the same per 32 columns of a head (Hopper: the head's
//                    blocks a cluster for the norm); which of the two runs:
//                    gdn_decode_choice.h.
// The q/k conv states are shared by the value heads of a key head, so they are
// stepped once, in the first launch; each v channel belongs to one value head.
//
// GdnDecodeValues reads its state, its v inputs and conv states, z and the gates'
// inputs before WaitForPriorKernels(): with programmatic launch (gpu_launch.cuh) it
// starts while GdnDecodeKeys runs, and every kernel before GdnDecodeKeys has finished
// by then (GdnDecodeKeys lets it start only after its own wait), so what those wrote
// is in place; only the normalised keys are read after the wait. The state load (64
// KB a head) then overlaps the first launch.
//
// Values are rounded to the activation dtype where the unfused ops store them (conv
// outputs, normalised q and k, the delta rule's output), so both paths agree to f32
// rounding. Head sizes past 128 run the unfused ops.
//
// Registers: the state kernels are register-bound (a thread's state values plus the
// addressing); launch bounds keep two whole-head blocks (64 registers) or four
// column-slice blocks per multiprocessor, so one block's state loads overlap another
// block's arithmetic and stores (with one block a multiprocessor, as the 128
// registers of the first version allowed, they could not: 0.37 of the copy
// bandwidth at batch 256 on the H200, bench/gpu_notes.md).
#include <cmath>
#include <vector>

#include "gdn_decode_choice.h"
#include "gpu_common.cuh"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/tuning.h"

#if !VT_GPU_HIP
#include <cooperative_groups.h>
#endif

namespace vt::gpu {
namespace {

constexpr int64_t kMaxHeadDim = kGdnDecodeMaxHeadDim;
constexpr int kGroups = 4;                        // thread groups splitting a column's Dk rows
constexpr int kRowsPerThread = kMaxHeadDim / kGroups;
constexpr int kValueThreads = kGroups * kMaxHeadDim;

template <typename T>
struct DecodeParams {
  const T* mixed;
  const void* conv_weight;
  float* conv_states;  // [slots, C, K-1]
  const T* a;
  const T* b;
  const void* A;
  const void* dt_bias;
  float* states;  // [slots, Hv, Dk, Dv]
  const int32_t* slot_ids;
  const T* z;
  const void* norm_weight;
  T* out;   // [B, Hv, Dv] contiguous
  T* keys;  // [B, 2, Hk, Dk]: normalised q, then k
  DType conv_weight_dtype, A_dtype, dt_bias_dtype, norm_weight_dtype;
  int64_t mixed_stride, a_stride, b_stride, A_stride, dt_bias_stride, z_strides[2];
  int64_t key_heads, key_dim, value_heads, value_dim, channels, conv_kernel, num_slots;
  float eps;
  bool tiled_value_heads;
};

// The conv step of `channel` for row `row` (CausalConv1dUpdate with SiLU): the window
// is [state..., x]; the state shifts left and takes x. Returns the output rounded to T.
template <typename T>
__device__ inline float ConvStep(const DecodeParams<T>& p, int64_t row, int64_t slot, int64_t channel) {
  const int64_t width = p.conv_kernel - 1;
  float* state = p.conv_states + (slot * p.channels + channel) * width;
  const float x = ToFloat(p.mixed[row * p.mixed_stride + channel]);
  float sum = LoadAsFloat(p.conv_weight, p.conv_weight_dtype, channel * p.conv_kernel + width) * x;
  for (int64_t j = 0; j < width; ++j) {
    const float in = state[j];
    sum += LoadAsFloat(p.conv_weight, p.conv_weight_dtype, channel * p.conv_kernel + j) * in;
    if (j > 0) state[j - 1] = in;
  }
  state[width - 1] = x;
  return ToFloat(FromFloat<T>(Silu(sum)));
}

template <typename T>
__global__ void GdnDecodeKeys(DecodeParams<T> p) {
  WaitForPriorKernels();  // gpu_launch.cuh
  __shared__ float scratch[kMaxWarpsPerBlock];
  const int64_t row = blockIdx.x, key_head = blockIdx.y;
  const int64_t slot = p.slot_ids[row];
  if (slot < 0 || slot >= p.num_slots) return;  // uniform across the block
  const int c = static_cast<int>(threadIdx.x);
  const int key_dim = static_cast<int>(p.key_dim);
  const bool active = c < 2 * key_dim, is_q = c < key_dim;
  const int d = is_q ? c : c - key_dim;
  const int64_t channel = (is_q ? 0 : p.key_heads * p.key_dim) + key_head * p.key_dim + d;
  const float v = active ? ConvStep(p, row, slot, channel) : 0.0f;
  const float q_sum = BlockSum(active && is_q ? v * v : 0.0f, scratch);
  const float k_sum = BlockSum(active && !is_q ? v * v : 0.0f, scratch);
  if (!active) return;
  const float inv = is_q ? rsqrtf(q_sum + 1e-6f) * rsqrtf(static_cast<float>(p.key_dim)) : rsqrtf(k_sum + 1e-6f);
  p.keys[((row * 2 + (is_q ? 0 : 1)) * p.key_heads + key_head) * p.key_dim + d] = FromFloat<T>(v * inv);
}

// The state column `local` of the head as the whole-head and column-slice kernels
// walk it: `rows` values from row `first_row` on, Dv apart (32-bit offsets: a head's
// state is Dk x Dv <= 16384 values, so the per-row addresses stay cheap registers).
template <int kRows>
__device__ inline void LoadStateColumn(const float* column, int rows, int value_dim, float (&s)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) s[r] = r < rows ? column[r * value_dim] : 0.0f;
}

template <int kRows>
__device__ inline void StoreStateColumn(float* column, int rows, int value_dim, const float (&s)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) column[r * value_dim] = s[r];
  }
}

// The gates of (row, head): decay = exp(A softplus(a + dt_bias)), beta = sigmoid(b).
template <typename T>
__device__ inline void DecodeGates(const DecodeParams<T>& p, int64_t row, int64_t head, float* gates) {
  const float x =
      ToFloat(p.a[row * p.a_stride + head]) + LoadAsFloat(p.dt_bias, p.dt_bias_dtype, head * p.dt_bias_stride);
  const float softplus = x > 20.0f ? x : log1pf(expf(x));
  gates[0] = expf(LoadAsFloat(p.A, p.A_dtype, head * p.A_stride) * softplus);
  gates[1] = Sigmoid(ToFloat(p.b[row * p.b_stride + head]));
}

// The normalised q and k of the head's key head into shared memory (after the wait).
template <typename T>
__device__ inline void LoadKeys(const DecodeParams<T>& p, int64_t row, int64_t head, float* q, float* k) {
  const int64_t key_head = p.tiled_value_heads ? head % p.key_heads : head / (p.value_heads / p.key_heads);
  for (int i = static_cast<int>(threadIdx.x); i < 2 * p.key_dim; i += static_cast<int>(blockDim.x)) {
    const bool is_q = i < p.key_dim;
    const int d = is_q ? i : i - static_cast<int>(p.key_dim);
    const float value = ToFloat(p.keys[((row * 2 + (is_q ? 0 : 1)) * p.key_heads + key_head) * p.key_dim + d]);
    (is_q ? q : k)[d] = value;
  }
}

// The delta rule on one state column, its Dk rows split over kGroupCount thread
// groups (this thread: `rows` rows from `first_row`, in s): the column's read k.S
// summed over the groups through `partial`, the update S = decay S + k delta with
// delta = beta (v - decay read), the store, then this thread's part of o = q.S left
// in partial[group][column] for the caller to sum (after the closing barrier).
template <int kRows, int kGroupCount, int kColumns>
__device__ inline void DeltaRuleColumn(float (&s)[kRows], int rows, int first_row, int group, int column, bool active,
                                       float v, const float* q, const float* k, const float* gates,
                                       float (*partial)[kColumns], float* state_column, int value_dim) {
  float read = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) read += s[r] * k[first_row + r];
  }
  partial[group][column] = read;
  __syncthreads();
  read = 0.0f;
#pragma unroll
  for (int g = 0; g < kGroupCount; ++g) read += partial[g][column];
  const float decay = gates[0], beta = gates[1];
  const float delta = active ? beta * (v - decay * read) : 0.0f;
  float o = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) {
      s[r] = decay * s[r] + k[first_row + r] * delta;
      o += s[r] * q[first_row + r];
    }
  }
  StoreStateColumn(state_column, rows, value_dim, s);
  __syncthreads();  // every thread has read the partial reads
  partial[group][column] = o;
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kValueThreads, 2) GdnDecodeValues(DecodeParams<T> p) {
  __shared__ float q[kMaxHeadDim], k[kMaxHeadDim], v[kMaxHeadDim];
  __shared__ float partial[kGroups][kMaxHeadDim];
  __shared__ float scratch[kMaxWarpsPerBlock];
  __shared__ float gates[2];  // decay = exp(g), beta
  const int64_t row = blockIdx.x, head = blockIdx.y;
  const int local = static_cast<int>(threadIdx.x) % kMaxHeadDim, group = static_cast<int>(threadIdx.x) / kMaxHeadDim;
  const int value_dim = static_cast<int>(p.value_dim), key_dim = static_cast<int>(p.key_dim);
  const bool active = local < value_dim;
  T* out = p.out + (row * p.value_heads + head) * p.value_dim;
  const int64_t slot = p.slot_ids[row];
  if (slot < 0 || slot >= p.num_slots) {  // uniform across the block
    WaitForPriorKernels();
    if (group == 0 && active) out[local] = FromFloat<T>(0.0f);
    return;
  }
  // Before the wait: what kernels before GdnDecodeKeys wrote (see the top comment).
  const int rows_per_group = (key_dim + kGroups - 1) / kGroups, first_row = group * rows_per_group;
  const int rows = active ? max(0, min(rows_per_group, key_dim - first_row)) : 0;
  float* column = p.states + (slot * p.value_heads + head) * p.key_dim * p.value_dim + first_row * value_dim + local;
  float s[kRowsPerThread];
  LoadStateColumn(column, rows, value_dim, s);
  float z = 0.0f, weight = 0.0f;
  if (group == 0 && active) {
    v[local] = ConvStep(p, row, slot, 2 * p.key_heads * p.key_dim + head * p.value_dim + local);
    z = ToFloat(p.z[row * p.z_strides[0] + head * p.z_strides[1] + local]);
    weight = LoadAsFloat(p.norm_weight, p.norm_weight_dtype, local);
  }
  if (threadIdx.x == 0) DecodeGates(p, row, head, gates);
  WaitForPriorKernels();  // gpu_launch.cuh: GdnDecodeKeys' output is read from here on
  LoadKeys(p, row, head, q, k);
  __syncthreads();
  DeltaRuleColumn<kRowsPerThread, kGroups, kMaxHeadDim>(s, rows, first_row, group, local, active,
                                                       active ? v[local] : 0.0f, q, k, gates, partial, column,
                                                       value_dim);
  float o = 0.0f;
  if (group == 0 && active) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) o += partial[g][local];
    o = ToFloat(FromFloat<T>(o));  // the delta rule's output, stored as T by the unfused op
  }
  const float sum_sq = BlockSum(o * o, scratch);
  if (group == 0 && active) {
    const float inv = rsqrtf(sum_sq / static_cast<float>(p.value_dim) + p.eps);
    out[local] = FromFloat<T>(o * inv * weight * Silu(z));
  }
}

// The column-slice kernel (gdn_decode_choice.h): grid (rows, value heads, slices),
// clusters of the `slices` blocks of one (row, head). Warp w holds state rows
// [w R, w R + R) (R = ceil(Dk / 8) <= 16) of the slice's 32 columns, lane j column
// slice * 32 + j; warp 0 also steps the columns' v conv channels and writes the
// outputs. The gated norm's sum of squares over all Dv columns: each block's warp 0
// sums its columns, then reads every block's sum from the cluster's shared memory in
// rank order (the same total in every block).
constexpr int kSliceColumns = 32;
constexpr int kSliceGroups = 8;
[[maybe_unused]] constexpr int kSliceRowsPerThread = kMaxHeadDim / kSliceGroups;
constexpr int kSliceThreads = kSliceGroups * kSliceColumns;

template <typename T>
__global__ void __launch_bounds__(kSliceThreads, 4) GdnDecodeValueSlices(DecodeParams<T> p) {
#if !VT_GPU_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ float q[kMaxHeadDim], k[kMaxHeadDim], v[kSliceColumns];
  __shared__ float partial[kSliceGroups][kSliceColumns];
  __shared__ float gates[2];
  __shared__ float slice_sum_sq;
  const cg::cluster_group cluster = cg::this_cluster();
  const int64_t row = blockIdx.x, head = blockIdx.y;
  const int lane = static_cast<int>(threadIdx.x) % kSliceColumns, group = static_cast<int>(threadIdx.x) / kSliceColumns;
  const int value_dim = static_cast<int>(p.value_dim), key_dim = static_cast<int>(p.key_dim);
  const int local = static_cast<int>(blockIdx.z) * kSliceColumns + lane;
  const bool active = local < value_dim;
  T* out = p.out + (row * p.value_heads + head) * p.value_dim;
  const int64_t slot = p.slot_ids[row];
  if (slot < 0 || slot >= p.num_slots) {  // uniform across the cluster (one row)
    WaitForPriorKernels();
    if (group == 0 && active) out[local] = FromFloat<T>(0.0f);
    return;
  }
  const int rows_per_group = (key_dim + kSliceGroups - 1) / kSliceGroups, first_row = group * rows_per_group;
  const int rows = active ? max(0, min(rows_per_group, key_dim - first_row)) : 0;
  float* column = p.states + (slot * p.value_heads + head) * p.key_dim * p.value_dim + first_row * value_dim + local;
  float s[kSliceRowsPerThread];
  LoadStateColumn(column, rows, value_dim, s);
  float z = 0.0f, weight = 0.0f;
  if (group == 0 && active) {
    v[lane] = ConvStep(p, row, slot, 2 * p.key_heads * p.key_dim + head * p.value_dim + local);
    z = ToFloat(p.z[row * p.z_strides[0] + head * p.z_strides[1] + local]);
    weight = LoadAsFloat(p.norm_weight, p.norm_weight_dtype, local);
  }
  if (threadIdx.x == 0) DecodeGates(p, row, head, gates);
  WaitForPriorKernels();  // gpu_launch.cuh: GdnDecodeKeys' output is read from here on
  LoadKeys(p, row, head, q, k);
  __syncthreads();
  DeltaRuleColumn<kSliceRowsPerThread, kSliceGroups, kSliceColumns>(s, rows, first_row, group, lane, active,
                                                                    active ? v[lane] : 0.0f, q, k, gates, partial,
                                                                    column, value_dim);
  float o = 0.0f;
  if (group == 0) {
#pragma unroll
    for (int g = 0; g < kSliceGroups; ++g) o += partial[g][lane];
    o = active ? ToFloat(FromFloat<T>(o)) : 0.0f;  // the delta rule's output, stored as T by the unfused op
    const float sum_sq = WarpSum(o * o);
    if (lane == 0) slice_sum_sq = sum_sq;
  }
  cluster.sync();  // every block's slice_sum_sq is written
  float sum_sq = 0.0f;
  if (group == 0) {
    for (unsigned rank = 0; rank < cluster.num_blocks(); ++rank) {
      sum_sq += *cluster.map_shared_rank(&slice_sum_sq, rank);
    }
  }
  cluster.sync();  // no block leaves while another reads its shared memory
  if (group == 0 && active) {
    const float inv = rsqrtf(sum_sq / static_cast<float>(p.value_dim) + p.eps);
    out[local] = FromFloat<T>(o * inv * weight * Silu(z));
  }
#else
  (void)p;  // never launched without clusters (ClustersOnCurrentDevice)
#endif
}

// Head sizes past the fused kernels' 128: the unfused ops, as the CPU kernel runs them.
void GdnDecodeUnfused(const GdnDecodeArgs& a) {
  const int64_t batch = a.mixed.size(0), channels = a.mixed.size(1);
  const int64_t hk = a.key_heads, dk = a.key_dim, hv = a.out.size(1), dv = a.out.size(2);
  const Device device = a.mixed.device();
  const DType dtype = a.mixed.dtype();
  const Tensor conv = Tensor::Empty({batch, channels}, dtype, device);
  CausalConv1dUpdate({.x = a.mixed, .weight = a.conv_weight, .conv_states = a.conv_states,
                      .state_slot_ids = a.state_slot_ids, .out = conv, .apply_silu = true});
  const int64_t key_width = hk * dk;
  const Tensor q = conv.AsStrided({batch, hk, dk}, {channels, dk, 1}, conv.offset());
  const Tensor k = conv.AsStrided({batch, hk, dk}, {channels, dk, 1}, conv.offset() + key_width);
  const Tensor v = conv.AsStrided({batch, hv, dv}, {channels, dv, 1}, conv.offset() + 2 * key_width);
  const Tensor qn = Tensor::Empty({batch, hk, dk}, dtype, device), kn = Tensor::Empty({batch, hk, dk}, dtype, device);
  L2Norm({.x = q, .out = qn, .eps = 1e-6f, .scale = 1.0f / std::sqrt(static_cast<float>(dk))});
  L2Norm({.x = k, .out = kn, .eps = 1e-6f, .scale = 1.0f});
  const Tensor g = Tensor::Empty({batch, hv}, DType::kF32, device);
  const Tensor beta = Tensor::Empty({batch, hv}, DType::kF32, device);
  GdnGates({.a = a.a, .b = a.b, .A = a.A, .dt_bias = a.dt_bias, .g = g, .beta = beta});
  const Tensor core = Tensor::Zeros({batch, hv, dv}, dtype, device);
  // A host copy: this path is not for decode graphs (no Qwen3.5 head is past 128).
  std::vector<int32_t> starts(static_cast<size_t>(batch + 1));
  for (int64_t i = 0; i <= batch; ++i) starts[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  GdnRecurrent({.q = qn,
                .k = kn,
                .v = v,
                .g = g,
                .beta = beta,
                .states = a.states,
                .query_start_loc = Tensor::FromVector(starts, {batch + 1}).To(device),
                .state_slot_ids = a.state_slot_ids,
                .out = core,
                .tiled_value_heads = a.tiled_value_heads});
  GatedRmsNorm({.x = core, .z = a.z, .weight = a.norm_weight, .out = a.out, .eps = a.eps});
}

void GdnDecodeGpu(const GdnDecodeArgs& a) {
  const int64_t batch = a.mixed.size(0);
  gpuStream_t stream = PrepareDevice(a.mixed.device());
  const GdnDecodeShape shape{.key_dim = a.key_dim,
                             .value_dim = a.out.size(2),
                             .clusters = ClustersOnCurrentDevice(),
                             .head_rows = batch * a.out.size(1),
                             .multiprocessors = MultiprocessorCount(a.mixed.device())};
  const GdnDecodeKernel kernel =
      ApplyGdnDecodeVariant(ChooseGdnDecode(shape), shape, tuning::Variant(kGdnDecodeVariantFamily));
  if (kernel == GdnDecodeKernel::kUnfused) {
    reach::Hit("GdnDecodeGpu.unfused");
    GdnDecodeUnfused(a);
    return;
  }
  reach::Hit(kernel == GdnDecodeKernel::kColumnSlices ? "GdnDecodeGpu.column_slices" : "GdnDecodeGpu.whole_head");
  const Tensor keys = Tensor::Empty({batch, 2, a.key_heads, a.key_dim}, a.mixed.dtype(), a.mixed.device());
  DispatchFloat(a.mixed.dtype(), "GdnDecode", [&](auto tag) {
    using T = decltype(tag);
    const DecodeParams<T> p{static_cast<const T*>(a.mixed.data()),
                            a.conv_weight.data(),
                            a.conv_states.data_ptr<float>(),
                            static_cast<const T*>(a.a.data()),
                            static_cast<const T*>(a.b.data()),
                            a.A.data(),
                            a.dt_bias.data(),
                            a.states.data_ptr<float>(),
                            static_cast<const int32_t*>(a.state_slot_ids.data()),
                            static_cast<const T*>(a.z.data()),
                            a.norm_weight.data(),
                            static_cast<T*>(a.out.data()),
                            static_cast<T*>(keys.data()),
                            a.conv_weight.dtype(),
                            a.A.dtype(),
                            a.dt_bias.dtype(),
                            a.norm_weight.dtype(),
                            a.mixed.stride(0),
                            a.a.stride(0),
                            a.b.stride(0),
                            a.A.stride(0),
                            a.dt_bias.stride(0),
                            {a.z.stride(0), a.z.stride(1)},
                            a.key_heads,
                            a.key_dim,
                            a.out.size(1),
                            a.out.size(2),
                            a.mixed.size(1),
                            a.conv_weight.size(1),
                            a.conv_states.size(0),
                            a.eps,
                            a.tiled_value_heads};
    const int key_threads = static_cast<int>((2 * a.key_dim + 63) / 64 * 64);
    const unsigned rows = GridFor(batch, 1, "GdnDecode"), heads = static_cast<unsigned>(a.out.size(1));
    LaunchKernel(GdnDecodeKeys<T>, dim3(rows, static_cast<unsigned>(a.key_heads)), key_threads, 0, stream, p);
#if !VT_GPU_HIP
    if (kernel == GdnDecodeKernel::kColumnSlices) {
      const unsigned slices = static_cast<unsigned>((a.out.size(2) + kSliceColumns - 1) / kSliceColumns);
      LaunchClusterKernel(GdnDecodeValueSlices<T>, dim3(rows, heads, slices), dim3(1, 1, slices), kSliceThreads, 0,
                          stream, p);
      return;
    }
#endif
    LaunchKernel(GdnDecodeValues<T>, dim3(rows, heads), kValueThreads, 0, stream, p);
  });
  CheckLaunch("GdnDecode");
}

}  // namespace

VT_REGISTER_KERNEL(GdnDecode, VT_GPU_DEVICE, GdnDecodeGpu);

}  // namespace vt::gpu
