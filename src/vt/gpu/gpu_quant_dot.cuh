// Dot products of GGUF weight blocks with activations quantized to 8 bits, on the
// integer dot-product units (4 int8 products and their sum per dp4a instruction).
//
// Activations x are quantized per 32 consecutive values (XBlock, the q8_1 scheme):
// x ~ d * q with q = round(x / d) in [-127, 127] and d = max|x| / 127; s = d * sum(q)
// carries the block's sum for formats whose values have an offset or a min. This
// moves each x by at most d / 2, which MatMul's contract allows for block weights
// (the CPU's int8 kernels do the same).
//
// Each weight format has a "lane" type: kLanes consecutive lanes of a warp share
// one weight block (kValues values in kBytes bytes), lane t of them decoding its
// part into registers (Load) and dotting it with the matching x blocks (Dot).
// A warp thus reads kWarpSize / kLanes whole blocks per step, every lane touching
// neighbouring bytes (loads coalesce), and every x block it reads is one 32-value
// block of the row (xb[j] = the j-th x block of the weight block's span).
//
//   format  kValues kBytes kLanes  lane t covers
//   Q8_0      32      34     4     ints 2t, 2t+1 of qs (values 8t..8t+7)
//   Q4_0      32      18     2     bytes 8t..8t+7: values 8t.. (low nibbles), 16+8t.. (high)
//   Q4_K     256     144    16     group g = t/4 (values 64g..64g+63), bytes 8(t%4).. of its
//                                  32 nibble bytes: 8 values of sub-block 2g, 8 of 2g+1
//   Q5_K     256     176    16     as Q4_K, plus the matching fifth bits from qh
//   Q6_K     256     210    16     half h = t/8, ql/qh bytes 8(t%4).. of quarter pair
//                                  (t%8)/4: 8 values of quarter q, 8 of quarter q + 2
// Layouts are those of gpu_quant.cuh (ggml's). Block sizes that are not multiples of
// 4 (Q8_0, Q4_0, Q6_K) are read as pairs of 16-bit halves.
#pragma once

#include <cstdint>

#include "gpu_common.cuh"
#include "gpu_quant.cuh"

namespace vt::gpu {

inline constexpr int kXBlockValues = 32;

struct XBlock {
  float d;         // x ~ d * q
  float s;         // d * sum(q)
  int32_t qs[8];   // the 32 q, four per int (value 4i + j in byte j of qs[i])
};

// Rows of x ([rows, blocks_per_row * 32] floats, row stride x_row_stride) quantized
// to out[row * blocks_per_row + b], num_blocks = rows * blocks_per_row XBlocks in all.
// Thread `thread` of `threads` (both multiples of the warp width, numbered so that a
// warp's lanes are consecutive) takes 8 consecutive values of a block, four threads
// a block: every load of a pass is issued before its shuffles, and a warp loops while
// its first block exists, so every shuffle sees all its lanes. Exact whatever the
// thread count: max|x| and the integer sums do not depend on the order.
inline constexpr int kXQuantThreadsPerBlock = 4, kXQuantValuesPerThread = kXBlockValues / kXQuantThreadsPerBlock;

// QuantizeXRowsTo hands each block's results to store(g, part, packed, d, s): block g,
// its 8 values of `part` as two words of four int8 (packed), its d and s (the same in
// all four parts); QuantizeXRows stores them as XBlocks.
template <typename X, typename Store>
__device__ inline void QuantizeXRowsTo(const X* x, int64_t x_row_stride, int64_t blocks_per_row, int64_t num_blocks,
                                       int64_t thread, int64_t threads, Store&& store) {
  const int part = static_cast<int>(thread % kXQuantThreadsPerBlock);
  const int64_t quad_in_warp = (thread % kWarpSize) / kXQuantThreadsPerBlock;
  for (int64_t g = thread / kXQuantThreadsPerBlock; g - quad_in_warp < num_blocks; g += threads / kXQuantThreadsPerBlock) {
    const bool live = g < num_blocks;
    const int64_t row = live ? g / blocks_per_row : 0, block = live ? g % blocks_per_row : 0;
    const X* src = x + row * x_row_stride + block * kXBlockValues + part * kXQuantValuesPerThread;
    float v[kXQuantValuesPerThread];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < kXQuantValuesPerThread; ++j) {
      v[j] = live ? ToFloat(src[j]) : 0.0f;
      amax = fmaxf(amax, fabsf(v[j]));
    }
    amax = fmaxf(amax, ShuffleXor(amax, 1));
    amax = fmaxf(amax, ShuffleXor(amax, 2));
    const float d = amax / 127.0f;
    int sum = 0;
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < kXQuantValuesPerThread; ++j) {
      const int q = amax > 0.0f ? __float2int_rn(v[j] / d) : 0;
      sum += q;
      packed[j / 4] |= (static_cast<uint32_t>(q) & 0xffu) << (8 * (j % 4));
    }
    sum += ShuffleXor(sum, 1);
    sum += ShuffleXor(sum, 2);
    if (live) store(g, part, packed, d, d * static_cast<float>(sum));
  }
}

template <typename X>
__device__ inline void QuantizeXRows(const X* x, int64_t x_row_stride, int64_t blocks_per_row, int64_t num_blocks,
                                     XBlock* out, int64_t thread, int64_t threads) {
  QuantizeXRowsTo(x, x_row_stride, blocks_per_row, num_blocks, thread, threads,
                  [out](int64_t g, int part, const uint32_t (&packed)[2], float d, float s) {
                    XBlock& b = out[g];
                    b.qs[2 * part] = static_cast<int32_t>(packed[0]);
                    b.qs[2 * part + 1] = static_cast<int32_t>(packed[1]);
                    if (part == 0) {
                      b.d = d;
                      b.s = s;
                    }
                  });
}

// sum_j a.byte[j] * b.byte[j] + c over the four signed bytes of a and b.
__device__ inline int Dp4a(int a, int b, int c) {
#if VT_GPU_HIP
  for (int j = 0; j < 4; ++j) {
    c += static_cast<int>(static_cast<int8_t>(a >> (8 * j))) * static_cast<int>(static_cast<int8_t>(b >> (8 * j)));
  }
  return c;
#else
  return __dp4a(a, b, c);
#endif
}

// A 32-bit word at a 2-byte aligned address, as two 16-bit loads.
__device__ inline int LoadInt2(const uint8_t* p) {
  const auto* half = reinterpret_cast<const uint16_t*>(p);
  return static_cast<int>(static_cast<uint32_t>(half[0]) | (static_cast<uint32_t>(half[1]) << 16));
}
__device__ inline int LoadInt4(const uint8_t* p) { return *reinterpret_cast<const int*>(p); }

struct Q8_0Lane {
  static constexpr int kValues = 32, kBytes = 34, kLanes = 4;
  float d;
  int q[2];
  __device__ void Load(const uint8_t* block, int t) {
    d = HalfBitsToFloat(LoadU16(block));
    q[0] = LoadInt2(block + 2 + 8 * t);
    q[1] = LoadInt2(block + 6 + 8 * t);
  }
  __device__ float Dot(const XBlock* xb, int t) const {
    const int sum = Dp4a(q[1], xb->qs[2 * t + 1], Dp4a(q[0], xb->qs[2 * t], 0));
    return d * xb->d * static_cast<float>(sum);
  }
};

struct Q4_0Lane {
  static constexpr int kValues = 32, kBytes = 18, kLanes = 2;
  float d;
  int q[2];
  __device__ void Load(const uint8_t* block, int t) {
    d = HalfBitsToFloat(LoadU16(block));
    q[0] = LoadInt2(block + 2 + 8 * t);
    q[1] = LoadInt2(block + 6 + 8 * t);
  }
  // Values are nibble - 8: sum (n - 8) x = sum n x - 8 sum x; this lane covers half
  // of the block, so it takes half of 8 * s.
  __device__ float Dot(const XBlock* xb, int t) const {
    int sum = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      sum = Dp4a(q[i] & 0x0f0f0f0f, xb->qs[2 * t + i], sum);
      sum = Dp4a((q[i] >> 4) & 0x0f0f0f0f, xb->qs[4 + 2 * t + i], sum);
    }
    return d * (xb->d * static_cast<float>(sum) - 4.0f * xb->s);
  }
};

// Q4_K and Q5_K: value = d * scale_j * q - dmin * min_j in sub-block j of 32 values.
template <bool kFiveBits>
struct QK45Lane {
  static constexpr int kValues = 256, kBytes = kFiveBits ? 176 : 144, kLanes = 16;
  float d, dmin;
  int scale[2], min[2];  // sub-blocks 2g (low nibbles) and 2g + 1 (high nibbles)
  int lo[2], hi[2];      // the 8 + 8 values, four per int
  __device__ void Load(const uint8_t* block, int t) {
    const int group = t / 4, u = 2 * (t % 4);
    d = HalfBitsToFloat(LoadU16(block));
    dmin = HalfBitsToFloat(LoadU16(block + 2));
    KQuantScaleMin(block + 4, 2 * group, &scale[0], &min[0]);
    KQuantScaleMin(block + 4, 2 * group + 1, &scale[1], &min[1]);
    const uint8_t* nibbles = block + (kFiveBits ? 48 : 16) + 32 * group + 4 * u;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int v = LoadInt4(nibbles + 4 * i);
      lo[i] = v & 0x0f0f0f0f;
      hi[i] = (v >> 4) & 0x0f0f0f0f;
      if constexpr (kFiveBits) {
        const int h = LoadInt4(block + 16 + 4 * u + 4 * i);
        lo[i] |= ((h >> (2 * group)) & 0x01010101) << 4;
        hi[i] |= ((h >> (2 * group + 1)) & 0x01010101) << 4;
      }
    }
  }
  // Four lanes share each sub-block: each takes a quarter of min * s.
  __device__ float Dot(const XBlock* xb, int t) const {
    const int group = t / 4, u = 2 * (t % 4);
    const XBlock& x_lo = xb[2 * group];
    const XBlock& x_hi = xb[2 * group + 1];
    const int sum_lo = Dp4a(lo[1], x_lo.qs[u + 1], Dp4a(lo[0], x_lo.qs[u], 0));
    const int sum_hi = Dp4a(hi[1], x_hi.qs[u + 1], Dp4a(hi[0], x_hi.qs[u], 0));
    return d * (static_cast<float>(scale[0] * sum_lo) * x_lo.d + static_cast<float>(scale[1] * sum_hi) * x_hi.d) -
           0.25f * dmin * (static_cast<float>(min[0]) * x_lo.s + static_cast<float>(min[1]) * x_hi.s);
  }
};
using Q4_KLane = QK45Lane<false>;
using Q5_KLane = QK45Lane<true>;

// Q6_K: value = d * scale * (q6 - 32), q6 = 4 low bits from ql | 2 high bits from qh.
struct Q6_KLane {
  static constexpr int kValues = 256, kBytes = 210, kLanes = 16;
  float d;
  int scale[2];  // quarters q and q + 2
  int a[2], b[2];  // q6 of quarter q (ql's low nibbles) and of quarter q + 2 (high nibbles)
  __device__ void Load(const uint8_t* block, int t) {
    const int half = t / 8, quarter = (t % 8) / 4, c = 2 * (t % 4);
    const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
    d = HalfBitsToFloat(LoadU16(block + 208));
    scale[0] = scales[half * 8 + c / 4 + 2 * quarter];
    scale[1] = scales[half * 8 + c / 4 + 2 * (quarter + 2)];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int low = LoadInt2(block + half * 64 + 32 * quarter + 4 * (c + i));
      const int high = LoadInt2(block + 128 + half * 32 + 4 * (c + i));
      a[i] = (low & 0x0f0f0f0f) | (((high >> (2 * quarter)) & 0x03030303) << 4);
      b[i] = ((low >> 4) & 0x0f0f0f0f) | (((high >> (2 * (quarter + 2))) & 0x03030303) << 4);
    }
  }
  // q6 is 0..63 (a valid signed byte); the -32 offset is a second dp4a with 32s.
  __device__ float Dot(const XBlock* xb, int t) const {
    const int half = t / 8, quarter = (t % 8) / 4, c = 2 * (t % 4);
    const XBlock& xa = xb[4 * half + quarter];
    const XBlock& xc = xb[4 * half + quarter + 2];
    constexpr int kThirtyTwos = 0x20202020;
    int sum_a = 0, sum_b = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      sum_a += Dp4a(a[i], xa.qs[c + i], 0) - Dp4a(kThirtyTwos, xa.qs[c + i], 0);
      sum_b += Dp4a(b[i], xc.qs[c + i], 0) - Dp4a(kThirtyTwos, xc.qs[c + i], 0);
    }
    return d * (static_cast<float>(scale[0] * sum_a) * xa.d + static_cast<float>(scale[1] * sum_b) * xc.d);
  }
};

// sum_k w_row[k] * x[k] over one warp for a weight row of `blocks` blocks and its
// XBlocks `x`; every lane gets the result.
template <typename Lane>
__device__ inline float WarpQuantDotRow(const uint8_t* w_row, int blocks, const XBlock* x) {
  constexpr int kBlocksPerStep = kWarpSize / Lane::kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize, sub = lane / Lane::kLanes, t = lane % Lane::kLanes;
  float acc = 0.0f;
  for (int b = sub; b < blocks; b += kBlocksPerStep) {
    Lane part;
    part.Load(w_row + static_cast<int64_t>(b) * Lane::kBytes, t);
    acc += part.Dot(x + static_cast<int64_t>(b) * (Lane::kValues / kXBlockValues), t);
  }
  return WarpSum(acc);
}

// Calls fn(Lane{}) with the lane type of a block dtype; false for dtypes without one.
template <typename Fn>
bool DispatchQuantLane(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kQ8_0: fn(Q8_0Lane{}); return true;
    case DType::kQ4_0: fn(Q4_0Lane{}); return true;
    case DType::kQ4_K: fn(Q4_KLane{}); return true;
    case DType::kQ5_K: fn(Q5_KLane{}); return true;
    case DType::kQ6_K: fn(Q6_KLane{}); return true;
    default: return false;
  }
}

}  // namespace vt::gpu
