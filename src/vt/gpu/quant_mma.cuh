// Int8 tensor-core tiles of GGUF block weights (CUDA): the products of
// matmul_quant_mma.cu (MatMul at batch sizes between the GEMV and the dense route)
// and of moe_grouped.cu (the grouped MoE experts).
//
// out[r, c] = sum_K x[r, :] w[c, :] with x quantized per 32 values to XBlocks
// (gpu_quant_dot.cuh: x ~ d q, s = d sum(q)) and each 32-value block of a weight row
// decoded to 32 int8 values q_w, a scale and a min (w ~ scale q_w - min):
//   x . w over a block = d scale (q . q_w) - s min
// (min is 0 for Q8_0 and Q4_0). q . q_w is one mma.m16n8k32.s8.s8.s32 per 32-value
// block (exact in int32); the two products with the scales are f32 FMAs into the
// accumulators (the int32 turned into a float by a magic-number add, since the
// int-to-float conversion runs at a quarter of the FMA rate and would bound the tile). No weight is ever widened to 16 bits: a block costs its own bytes
// from memory, 32 bytes of shared memory and a quarter of an MMA.
//
// A block of kQmmaThreads (4 warps) computes a tile of 16 kWarpsM rows x kQmmaCols
// columns; warps are arranged kWarpsM x (4 / kWarpsM), each warp 16 rows x
// 64 / (4 / kWarpsM) columns. K runs in stages of kQmmaStageBlocks weight blocks:
// every thread decodes its share of the stage's weight blocks and activation
// blocks into shared memory (int8 rows padded to kQmmaPitch bytes, so the 8 rows of
// an ldmatrix fall in different banks), then each warp multiplies its part.
// With kTwo the tile has a second weight matrix sharing the rows (gate and up of
// the MoE: silu(gate) * up needs both in the same thread).
//
// Fragments (PTX ISA, mma.m16n8k32 with .s8): the byte layout is that of the bf16
// m16n8k16 of docs/gpu_kernels.md §1.1 with 4 int8 per register in place of 2
// bf16, so the same ldmatrix addressing loads A (rows as stored) and B (weight rows
// stored [column][K]); C is 4 int32 in the f32 C layout: (row g, cols 2t, 2t+1),
// (row g + 8, cols 2t, 2t+1) for g = lane / 4, t = lane % 4.
#pragma once

#include <cstdint>

#include "gpu_mma.cuh"
#include "gpu_quant_dot.cuh"

#if !VT_GPU_HIP
namespace vt::gpu {

inline constexpr int kQmmaCols = 64;          // output columns per block
inline constexpr int kQmmaStageBlocks = 4;    // 32-value weight blocks of K per stage (128 values)
inline constexpr int kQmmaThreads = 128;
inline constexpr int kQmmaPitch = kQmmaStageBlocks * 32 + 16;  // bytes per shared row

// c = a b (int32) for a 16 x 32 int8 A and a 32 x 8 int8 B. Not volatile: a pure
// function of its registers, which the compiler may schedule among the loads.
__device__ inline void MmaInt8(int32_t (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// kWords 32-bit words starting at the 2-byte aligned address p, read as aligned
// words joined by funnel shifts. When p is not 4-byte aligned one more word is
// read, whose last two bytes lie past the data but inside the same aligned word
// as its last bytes (never across a page or an allocation's end).
template <int kWords>
__device__ inline void LoadWordsAt2(const uint8_t* p, uint32_t (&out)[kWords]) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  const auto* words = reinterpret_cast<const uint32_t*>(address & ~uintptr_t{3});
  const uint32_t shift = static_cast<uint32_t>(address & 3) * 8;  // 0 or 16
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    const uint32_t hi = shift != 0 ? words[i + 1] : 0u;
    out[i] = __funnelshift_r(words[i], hi, shift);
  }
}

// How a weight format's 32-value block j of a row (block-aligned start) decodes:
// Decode writes its 32 values as int8 (value 4i + b in byte b of q[i]) and returns
// scale and min with w ~ scale q - min.
template <DType kW>
struct QmmaWeight;

template <>
struct QmmaWeight<DType::kQ8_0> {  // [d f16][32 x int8]
  static constexpr bool kHasMin = false;
  static __device__ void Decode(const uint8_t* row, int64_t j, uint32_t (&q)[8], float* scale, float* min) {
    const uint8_t* block = row + j * 34;
    *scale = HalfBitsToFloat(LoadU16(block));
    *min = 0.0f;
    LoadWordsAt2<8>(block + 2, q);
  }
};

template <>
struct QmmaWeight<DType::kQ4_0> {  // [d f16][16 B: value i low nibble of byte i, value i + 16 high], w = d (q - 8)
  static constexpr bool kHasMin = false;
  static __device__ void Decode(const uint8_t* row, int64_t j, uint32_t (&q)[8], float* scale, float* min) {
    const uint8_t* block = row + j * 18;
    *scale = HalfBitsToFloat(LoadU16(block));
    *min = 0.0f;
    uint32_t packed[4];
    LoadWordsAt2<4>(block + 2, packed);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      q[i] = __vsub4(packed[i] & 0x0f0f0f0fu, 0x08080808u);
      q[i + 4] = __vsub4((packed[i] >> 4) & 0x0f0f0f0fu, 0x08080808u);
    }
  }
};

// Q4_K / Q5_K: 32-value block j is sub-block s = j % 8 of super-block j / 8 (layouts in
// gpu_quant.cuh); w = d sc_s q - dmin m_s with q in [0, 15] (Q4_K) or [0, 31] (Q5_K),
// which int8 holds as is. Rows start on 4 bytes (QuantLanesRead checks), so the
// nibble and high-bit bytes are aligned words.
template <bool kFiveBits>
struct QmmaKQuant {
  static constexpr bool kHasMin = true;
  static constexpr int64_t kBytes = kFiveBits ? 176 : 144;
  static __device__ void Decode(const uint8_t* row, int64_t j, uint32_t (&q)[8], float* scale, float* min) {
    const uint8_t* block = row + (j / 8) * kBytes;
    const int s = static_cast<int>(j % 8);
    int sc, m;
    KQuantScaleMin(block + 4, s, &sc, &m);
    *scale = HalfBitsToFloat(LoadU16(block)) * static_cast<float>(sc);
    *min = HalfBitsToFloat(LoadU16(block + 2)) * static_cast<float>(m);
    const auto* nibbles = reinterpret_cast<const uint32_t*>(block + (kFiveBits ? 48 : 16) + (s / 2) * 32);
    const int nibble_shift = 4 * (s % 2);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = (nibbles[i] >> nibble_shift) & 0x0f0f0f0fu;
    if constexpr (kFiveBits) {
      const auto* high = reinterpret_cast<const uint32_t*>(block + 16);
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] |= ((high[i] >> s) & 0x01010101u) << 4;
    }
  }
};
template <>
struct QmmaWeight<DType::kQ4_K> : QmmaKQuant<false> {};
template <>
struct QmmaWeight<DType::kQ5_K> : QmmaKQuant<true> {};

// Calls fn(integral_constant<DType, w>) for the weight dtypes the tiles decode.
template <typename Fn>
bool DispatchQmmaWeight(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kQ8_0: fn(std::integral_constant<DType, DType::kQ8_0>{}); return true;
    case DType::kQ4_0: fn(std::integral_constant<DType, DType::kQ4_0>{}); return true;
    case DType::kQ4_K: fn(std::integral_constant<DType, DType::kQ4_K>{}); return true;
    case DType::kQ5_K: fn(std::integral_constant<DType, DType::kQ5_K>{}); return true;
    default: return false;
  }
}

// c (|c| < 2^22: 32 products of at most 127 x 128) as a float without the
// quarter-rate int-to-float conversion: 1.5 * 2^23 + c has the integer c in its
// mantissa exactly, so one integer add and one float subtraction recover it.
__device__ inline float SmallIntToFloat(int32_t c) {
  constexpr int32_t kMagicBits = 0x4B400000;  // 12582912.0f = 1.5 * 2^23
  return __int_as_float(c + kMagicBits) - 12582912.0f;
}

// out += c scaled for rows (x_lo: outputs 0, 1; x_hi: 2, 3) and columns (w0: outputs
// 0, 2; w1: 1, 3), each float2 a (scale, min) pair: d scale c - s min.
template <bool kHasMin>
__device__ inline void ScaleInto(float (&out)[4], const int32_t (&c)[4], float2 x_lo, float2 x_hi, float2 w0,
                                 float2 w1) {
  out[0] += SmallIntToFloat(c[0]) * (x_lo.x * w0.x);
  out[1] += SmallIntToFloat(c[1]) * (x_lo.x * w1.x);
  out[2] += SmallIntToFloat(c[2]) * (x_hi.x * w0.x);
  out[3] += SmallIntToFloat(c[3]) * (x_hi.x * w1.x);
  if constexpr (kHasMin) {
    out[0] -= x_lo.y * w0.y;
    out[1] -= x_lo.y * w1.y;
    out[2] -= x_hi.y * w0.y;
    out[3] -= x_hi.y * w1.y;
  }
}

// The shared memory of one tile: int8 rows of the stage and their scales.
template <int kWarpsM, bool kTwo>
struct QmmaShared {
  static constexpr int kRows = 16 * kWarpsM;
  static constexpr int kWeights = kTwo ? 2 : 1;
  alignas(16) uint8_t x[kRows * kQmmaPitch];
  alignas(16) uint8_t w[kWeights][kQmmaCols * kQmmaPitch];
  float2 x_scale[kRows][kQmmaStageBlocks];               // (d, s) of each activation block
  float2 w_scale[kWeights][kQmmaCols][kQmmaStageBlocks];  // (scale, min) of each weight block
};

// What a tile multiplies: rows of XBlocks and up to two weight matrices.
struct QmmaOperands {
  const XBlock* x;            // rows of kblocks XBlocks
  int64_t x_row_blocks;       // XBlocks between consecutive x rows
  const uint8_t* w[2];        // weight rows from column 0 of this tile's matrix (w[1] only with kTwo)
  int64_t w_row_bytes;        // bytes between weight rows
  int64_t columns;            // weight rows that exist from column 0 (columns n0 + c >= this are zero)
  int64_t kblocks;            // 32-value blocks of K
};

// The accumulators of one warp: 16 rows x kTiles 8-column tiles for each weight.
template <int kWarpsM, bool kTwo>
struct QmmaAccumulators {
  static constexpr int kWarpsN = 4 / kWarpsM;
  static constexpr int kTiles = kQmmaCols / 8 / kWarpsN;
  float c[kTwo ? 2 : 1][kTiles][4] = {};
  // The tile row (0 .. 16 kWarpsM) and column (0 .. kQmmaCols) of c[.][t][i].
  static __device__ int Row(int i) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    return (warp % kWarpsM) * 16 + lane / 4 + 8 * (i / 2);
  }
  static __device__ int Column(int t, int i) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    return (warp / kWarpsM) * (kQmmaCols / kWarpsN) + t * 8 + 2 * (lane % 4) + i % 2;
  }
};

// acc += the tile's products over all of K. rows[r] is the x row of tile row r or -1
// (a row past the end: it reads nothing and its outputs are left to the caller to
// skip); n0 is the tile's first column. Called by all kQmmaThreads threads.
template <DType kW, int kWarpsM, bool kTwo>
__device__ void QmmaAccumulate(const QmmaOperands& op, const int32_t* rows, int64_t n0,
                               QmmaShared<kWarpsM, kTwo>& sh, QmmaAccumulators<kWarpsM, kTwo>& acc) {
  using Shared = QmmaShared<kWarpsM, kTwo>;
  using Acc = QmmaAccumulators<kWarpsM, kTwo>;
  constexpr int kRows = Shared::kRows;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int warp_row = (warp % kWarpsM) * 16, warp_col = (warp / kWarpsM) * (kQmmaCols / Acc::kWarpsN);
  for (int64_t kb0 = 0; kb0 < op.kblocks; kb0 += kQmmaStageBlocks) {
    __syncthreads();  // the previous stage is no longer read
    // Weight blocks: item = column * kQmmaStageBlocks + block, four neighbouring
    // threads reading one row's consecutive blocks.
    for (int item = tid; item < kQmmaCols * kQmmaStageBlocks; item += kQmmaThreads) {
      const int col = item / kQmmaStageBlocks, b = item % kQmmaStageBlocks;
      const int64_t j = kb0 + b;
      const bool valid = n0 + col < op.columns && j < op.kblocks;
#pragma unroll
      for (int m = 0; m < Shared::kWeights; ++m) {
        uint32_t q[8] = {};
        float scale = 0.0f, min = 0.0f;
        if (valid) QmmaWeight<kW>::Decode(op.w[m] + (n0 + col) * op.w_row_bytes, j, q, &scale, &min);
        auto* dst = reinterpret_cast<uint4*>(sh.w[m] + col * kQmmaPitch + b * 32);
        dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
        dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
        sh.w_scale[m][col][b] = make_float2(scale, min);
      }
    }
    // Activation blocks: 8-byte loads (an XBlock's q starts 8 bytes into 40).
    for (int item = tid; item < kRows * kQmmaStageBlocks; item += kQmmaThreads) {
      const int r = item / kQmmaStageBlocks, b = item % kQmmaStageBlocks;
      const int64_t j = kb0 + b;
      uint2 q[4] = {};
      float2 ds = make_float2(0.0f, 0.0f);
      if (rows[r] >= 0 && j < op.kblocks) {
        const XBlock& xb = op.x[rows[r] * op.x_row_blocks + j];
        const auto* src = reinterpret_cast<const uint2*>(xb.qs);
#pragma unroll
        for (int i = 0; i < 4; ++i) q[i] = src[i];
        ds = make_float2(xb.d, xb.s);
      }
      auto* dst = reinterpret_cast<uint4*>(sh.x + r * kQmmaPitch + b * 32);
      dst[0] = make_uint4(q[0].x, q[0].y, q[1].x, q[1].y);
      dst[1] = make_uint4(q[2].x, q[2].y, q[3].x, q[3].y);
      sh.x_scale[r][b] = ds;
    }
    __syncthreads();
#pragma unroll
    for (int b = 0; b < kQmmaStageBlocks; ++b) {
      uint32_t a[4];
      LoadMatrices(a, sh.x + (warp_row + lane % 8 + 8 * ((lane / 8) % 2)) * kQmmaPitch + b * 32 + 16 * (lane / 16));
      const float2 x_lo = sh.x_scale[warp_row + lane / 4][b], x_hi = sh.x_scale[warp_row + lane / 4 + 8][b];
#pragma unroll
      for (int m = 0; m < Shared::kWeights; ++m) {
#pragma unroll
        for (int np = 0; np < Acc::kTiles / 2; ++np) {
          const int col = warp_col + np * 16;
          uint32_t w[4];
          LoadMatrices(w, sh.w[m] + (col + lane % 8 + 8 * (lane / 16)) * kQmmaPitch + b * 32 + 16 * ((lane / 8) % 2));
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            int32_t c[4];
            MmaInt8(c, a, w[2 * h], w[2 * h + 1]);
            const int t = 2 * np + h;
            const int c0 = col + h * 8 + 2 * (lane % 4);
            ScaleInto<QmmaWeight<kW>::kHasMin>(acc.c[m][t], c, x_lo, x_hi, sh.w_scale[m][c0][b],
                                               sh.w_scale[m][c0 + 1][b]);
          }
        }
      }
    }
  }
}

}  // namespace vt::gpu
#endif
