// Integer register tiles for block-quantized weights against 8-bit quantized
// activations, on 256-bit vectors. Included by matmul_avx2.cpp and
// matmul_avx512.cpp; `Ops` supplies the two integer multiply-adds (AVX2
// maddubs/madd, or AVX-512 VNNI vpdpbusd/vpdpwssd):
//   Ops::DotU8S8(acc, u, s): acc.i32[l] += sum of 4 products u8 x s8 (lanes of 4 bytes)
//   Ops::MaddI16(acc, a, b): acc.i32[l] += a.i16[2l] b.i16[2l] + a.i16[2l+1] b.i16[2l+1]
//
// Why it is fast: the weights are read in their block format (no dequantization),
// and each 32 values cost one or two integer instructions per row pair plus one f32
// scale multiply per block (Q4_0 / Q8_0, whose GEMM path on 256-bit vectors reads the
// products of the two block scales from memory: see Block32Tiles) or per 256-value
// super-block (K-quants, whose 6/8-bit sub-block scales are applied in the integer
// domain).
//
// Internal linkage throughout (see matmul_tiles.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "matmul_tiles.h"
#include "vt/quant.h"

namespace vt::cpu::matmul {
namespace {

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The horizontal sums of v[0..3] in lanes 0..3.
inline __m128 HorizontalSums4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

inline __m256i LoadBytes32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m256i LowNibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
inline __m256i HighNibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f)); }

// Moves bit `from` of every byte to bit `to` (other bits: garbage, mask afterwards).
// 16-bit shifts are fine: the bits that cross a byte boundary are masked away.
template <int from, int to>
__m256i MoveBits(__m256i v) {
  if constexpr (to >= from)
    return _mm256_slli_epi16(v, to - from);
  else
    return _mm256_srli_epi16(v, from - to);
}

// ---- Q8_0 and Q4_0: blocks of 32 against kQ8x32 ---------------------------------

// Q8_0 multiplies |w| (u8) by x with w's sign (s8): w x exactly.
struct Q8_0Format {
  using Block = BlockQ8_0;
  struct Weights {
    __m256i w, w_abs;
  };
  static Weights Load(const Block& b) {
    const __m256i w = LoadBytes32(b.qs);
    return {w, _mm256_sign_epi8(w, w)};
  }
  static __m256i DotStart(int32_t /*x_sum*/) { return _mm256_setzero_si256(); }
  template <class Ops>
  static __m256i Dot(const Weights& w, __m256i x, __m256i start) {
    return Ops::DotU8S8(start, w.w_abs, _mm256_sign_epi8(x, w.w));
  }
};

// Q4_0's nibbles q are unsigned: q . x, with the accumulator starting at -8 sum(x)
// (DotStart, once per x row and block), which is the (q - 8) offset.
struct Q4_0Format {
  using Block = BlockQ4_0;
  struct Weights {
    __m256i q;  // values 0-15 in the low 128 bits, 16-31 in the high
  };
  static Weights Load(const Block& b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i mask = _mm_set1_epi8(0x0f);
    return {_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), _mm_and_si128(packed, mask))};
  }
  static __m256i DotStart(int32_t x_sum) { return _mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * x_sum)); }
  template <class Ops>
  static __m256i Dot(const Weights& w, __m256i x, __m256i start) {
    return Ops::DotU8S8(start, w.q, x);
  }
};

// The block scales of a tile multiplied per pair in the step: x_d[i * num_blocks + b]
// * w_j[b].d (the GEMV path).
struct ScalesInStep {
  const float* x_d;
  int64_t num_blocks;

  template <int RN>
  struct AtBlock {
    float w[RN];
    const float* x_d_b;
    int64_t num_blocks;
    __m256 Pair(int i, int j) const { return _mm256_set1_ps(x_d_b[i * num_blocks] * w[j]); }
  };
  template <int RN, class Block>
  AtBlock<RN> At(const Block* const (&w)[RN], int64_t b) const {
    AtBlock<RN> at{{}, x_d + b, num_blocks};
    for (int j = 0; j < RN; ++j) at.w[j] = _cvtsh_ss(w[j][b].d);
    return at;
  }
};

// The products of the block scales of one block for the pairs of a tile, computed
// beforehand: s[8 * i + (8 / RN) * j] (the GEMM path; see Block32Tiles).
template <int RN>
struct ScaleProducts {
  const float* s;

  __m256 Pair(int i, int j) const { return _mm256_broadcast_ss(s + 8 * i + 8 / RN * j); }
  template <class Block>
  const ScaleProducts& At(const Block* const (&)[RN], int64_t /*b*/) const {
    return *this;
  }
};

// The f32 block scales of the weight rows of a panel, by groups of 8 / RN blocks:
// w_j[b].d at w[8 * (b / (8 / RN)) + (8 / RN) * j + b % (8 / RN)] (the GEMM path).
struct PanelScales {
  const float* w;
};

// The 8 / RN floats at p, RN times over.
template <int RN>
__m256 LoadRepeated(const float* p) {
  static_assert(RN == 1 || RN == 2 || RN == 4, "8 lanes hold whole groups of RN");
  if constexpr (RN == 1) {
    return _mm256_loadu_ps(p);
  } else if constexpr (RN == 2) {
    return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  } else {
    return _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(p)));
  }
}

// One 32-value block per step and row pair: an integer dot, one convert and one FMA
// with the product of the two block scales. Small tiles alternate blocks between
// kChains accumulators so the FMA latency stays off the critical path.
//
// Where the products come from: the GEMV path multiplies them in the step
// (ScalesInStep: an f16 convert per weight row, a scalar multiply and a broadcast
// from a register per pair). On Zen 3 that, not the integer dots, bounded the GEMM
// step (~13.5 cycles a 2 x 2 step; vbroadcastss from a register issues once a
// cycle). The GEMM path of the 256-bit variants broadcasts each pair's product from
// memory instead (ScaleProducts; a plain load on Zen 3): per panel the weight rows'
// scales are converted once (PanelScales), and each tile multiplies those of a group
// of 8 / RN blocks by its x rows' scales, one vector multiply per row, a group ahead
// of the steps that read them. That also left the registers for 4 x 2 Q8_0 tiles:
// a 4 x 2 step takes ~20 cycles on Zen 3 (2.6 a pair, where the pair's sign, maddubs,
// madd, convert and FMA alone run at ~1.75). Measured at Ymm16Int8Shape.
template <class Ops, class Format>
struct Block32Tiles {
  using Block = typename Format::Block;
  template <int RM, int RN>
  static constexpr int kChains = RM* RN >= 4   ? 1
                                 : RM* RN >= 2 ? 2
                                               : 4;

  static const Block* Blocks(const WeightPanel& panel, int j) { return reinterpret_cast<const Block*>(panel.Row(j)); }

  // The x rows m0 .. m0+RM of a tile, as the steps read them.
  struct XRows {
    const int8_t* q;      // row m0's values; row m0 + i at q + i * k
    const int32_t* sums;  // row m0's block sums; row m0 + i at sums + i * num_blocks
    const float* d;       // row m0's block scales; row m0 + i at d + i * num_blocks
    int64_t k, num_blocks;
  };
  static XRows RowsFrom(const Problem& p, int64_t m0) {
    const int64_t num_blocks = p.k / 32;
    return {p.x.q + m0 * p.k, p.x.sums + m0 * num_blocks, p.x.d + m0 * num_blocks, p.k, num_blocks};
  }

  template <int RM, int RN>
  using Accumulators = __m256[kChains<RM, RN>][RM][RN];

  template <int RM, int RN>
  __attribute__((always_inline)) static void SetZero(Accumulators<RM, RN>& acc) {
    for (auto& chain : acc) {
      for (auto& row : chain) {
        for (auto& a : row) a = _mm256_setzero_ps();
      }
    }
  }

  // Always inlined: a tile's steps are unrolled by groups, and a step left out of line
  // would pass the accumulators through memory.
  template <int RM, int RN, class Scales>
  __attribute__((always_inline)) static void Step(const XRows& x, const Block* const (&w)[RN], const Scales& scales,
                                                  int64_t b, __m256 (&acc)[RM][RN]) {
    typename Format::Weights wb[RN];
    for (int j = 0; j < RN; ++j) wb[j] = Format::Load(w[j][b]);
    const auto& at_b = scales.At(w, b);
    for (int i = 0; i < RM; ++i) {
      const __m256i xb = LoadBytes32(x.q + i * x.k + 32 * b);
      const __m256i start = Format::DotStart(x.sums[i * x.num_blocks + b]);
      for (int j = 0; j < RN; ++j) {
        const __m256i dot = Format::template Dot<Ops>(wb[j], xb, start);
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), at_b.Pair(i, j), acc[i][j]);
      }
    }
  }

  // Adds up the chains and stores out[m0 .. m0+RM, n0 .. n0+RN]. The sums first, in
  // loops unrolled from the start: an accumulator indexed at run time would keep acc
  // in memory, written back at every step (or group of steps).
  template <int RM, int RN>
  static void Store(const Problem& p, int64_t m0, int64_t n0, const Accumulators<RM, RN>& acc) {
    float sums[RM][RN];
#pragma GCC unroll 16
    for (int i = 0; i < RM; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < RN; ++j) {
        __m256 sum = acc[0][i][j];
        for (int c = 1; c < kChains<RM, RN>; ++c) sum = _mm256_add_ps(sum, acc[c][i][j]);
        sums[i][j] = HorizontalSum(sum);
      }
    }
    for (int i = 0; i < RM; ++i) {
      for (int j = 0; j < RN; ++j) p.Store(m0 + i, n0 + j, sums[i][j]);
    }
  }

  // The GEMV path's tile.
  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel) {
    constexpr int kC = kChains<RM, RN>;
    const XRows x = RowsFrom(p, m0);
    const ScalesInStep scales{x.d, x.num_blocks};
    const Block* w[RN];
    for (int j = 0; j < RN; ++j) w[j] = Blocks(panel, j);
    Accumulators<RM, RN> acc;
    SetZero<RM, RN>(acc);
    int64_t b = 0;
    for (; b + kC <= x.num_blocks; b += kC) {
      for (int c = 0; c < kC; ++c) Step<RM, RN>(x, w, scales, b + c, acc[c]);
    }
    for (; b < x.num_blocks; ++b) Step<RM, RN>(x, w, scales, b, acc[0]);
    Store<RM, RN>(p, m0, n0, acc);
  }

  // The PanelScales of the RN weight rows of panel, into w.
  template <int RN>
  static void ConvertScales(const WeightPanel& panel, int64_t num_blocks, float* w) {
    constexpr int kGroup = 8 / RN;
    for (int j = 0; j < RN; ++j) {
      const Block* blocks = Blocks(panel, j);
      for (int64_t b = 0; b < num_blocks; ++b) {
        const int64_t group0 = b / kGroup * kGroup;
        w[RN * group0 + kGroup * j + (b - group0)] = _cvtsh_ss(blocks[b].d);
      }
    }
  }

  // Store for the GEMM path: the sums of four pairs at a time, and f32 outputs
  // written directly.
  template <int RM, int RN>
  static void StoreSums(const Problem& p, int64_t m0, int64_t n0, const Accumulators<RM, RN>& acc) {
    constexpr int kPairs = RM * RN;
    __m256 v[kPairs];
#pragma GCC unroll 16
    for (int q = 0; q < kPairs; ++q) {
      v[q] = acc[0][q / RN][q % RN];
      for (int c = 1; c < kChains<RM, RN>; ++c) v[q] = _mm256_add_ps(v[q], acc[c][q / RN][q % RN]);
    }
    float sums[kPairs];
    int q = 0;
#pragma GCC unroll 16
    for (; q + 4 <= kPairs; q += 4) _mm_storeu_ps(sums + q, HorizontalSums4(v[q], v[q + 1], v[q + 2], v[q + 3]));
#pragma GCC unroll 16
    for (; q < kPairs; ++q) sums[q] = HorizontalSum(v[q]);
    if (p.out_dtype == DType::kF32) {
      float* out = static_cast<float*>(p.out) + m0 * p.out_stride + n0;
      for (int i = 0; i < RM; ++i) {
        for (int j = 0; j < RN; ++j) out[i * p.out_stride + j] = sums[i * RN + j];
      }
    } else {
      for (int i = 0; i < RM; ++i) {
        for (int j = 0; j < RN; ++j) p.Store(m0 + i, n0 + j, sums[i * RN + j]);
      }
    }
  }

  // The steps of the blocks b0 + c of a group, with their scale products at s + c
  // (ScaleProducts); block b0 + c on chain c % kChains.
  template <int RM, int RN, int... c>
  __attribute__((always_inline)) static void StepGroup(const XRows& x, const Block* const (&w)[RN], const float* s,
                                                       int64_t b0, Accumulators<RM, RN>& acc,
                                                       std::integer_sequence<int, c...>) {
    (Step<RM, RN>(x, w, ScaleProducts<RN>{s + c}, b0 + c, acc[c % kChains<RM, RN>]), ...);
  }

  // The GEMM path's tile, kGroup = 8 / RN blocks at a time: while one group's steps
  // read their scale products from one buffer, the next group's go into the other.
  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel, const PanelScales& ws) {
    constexpr int kGroup = 8 / RN;
    const XRows x = RowsFrom(p, m0);
    const int64_t num_groups = x.num_blocks / kGroup;
    const Block* w[RN];
    for (int j = 0; j < RN; ++j) w[j] = Blocks(panel, j);
    // products[8 * i + kGroup * j + c]: x row i, weight row j, block b0 + c
    const auto fill = [&](float* products, int64_t b0) {
      const __m256 w_scales = _mm256_loadu_ps(ws.w + RN * b0);
      for (int i = 0; i < RM; ++i) {
        const __m256 x_scales = LoadRepeated<RN>(x.d + i * x.num_blocks + b0);
        _mm256_store_ps(products + 8 * i, _mm256_mul_ps(x_scales, w_scales));
      }
    };
    alignas(32) float buffers[2][8 * RM];
    float* current = buffers[0];
    float* next = buffers[1];
    Accumulators<RM, RN> acc;
    SetZero<RM, RN>(acc);
    if (num_groups > 0) fill(current, 0);
    for (int64_t g = 0; g < num_groups; ++g) {
      const int64_t b0 = g * kGroup;
      if (g + 1 < num_groups) fill(next, b0 + kGroup);
      StepGroup<RM, RN>(x, w, current, b0, acc, std::make_integer_sequence<int, kGroup>());
      std::swap(current, next);
    }
    for (int64_t b = num_groups * kGroup; b < x.num_blocks; ++b) {
      const float* w_scales = ws.w + 8 * num_groups + (b - num_groups * kGroup);
      for (int i = 0; i < RM; ++i) {
        for (int j = 0; j < RN; ++j) current[8 * i + kGroup * j] = x.d[i * x.num_blocks + b] * w_scales[kGroup * j];
      }
      Step<RM, RN>(x, w, ScaleProducts<RN>{current}, b, acc[0]);
    }
    StoreSums<RM, RN>(p, m0, n0, acc);
  }
};

// The GEMM path of Block32Tiles over out[0..M, n_begin..n_end): per panel of RN weight
// rows, their block scales as f32 once (PanelScales, in a buffer of the thread that
// outlives the call), then its tiles; a last partial panel one weight row at a time.
template <class Kernel, int RM, int RN>
void RunBlock32Panels(const Problem& p, int64_t n_begin, int64_t n_end) {
  const int64_t num_blocks = p.k / 32;
  thread_local std::vector<float> scratch;  // PanelScales: whole groups of 8 / RN blocks
  const size_t scratch_size = static_cast<size_t>(RN * num_blocks + 8);
  if (scratch.size() < scratch_size) scratch.resize(scratch_size);
  float* const w_scales = scratch.data();
  const auto run_panel = [&]<int kCols>(int64_t n0, const WeightPanel& panel) {
    Kernel::template ConvertScales<kCols>(panel, num_blocks, w_scales);
    for (int64_t m0 = 0; m0 < p.m; m0 += RM) {
      const int rows = static_cast<int>(std::min<int64_t>(RM, p.m - m0));
      TileWithRows<Kernel, RM, kCols>(rows, p, m0, n0, panel, PanelScales{w_scales});
    }
  };
  for (int64_t n0 = n_begin; n0 < n_end; n0 += RN) {
    const int64_t cols = std::min<int64_t>(RN, n_end - n0);
    const WeightPanel panel{p.WeightRow(n0), p.w_row_bytes};
    if (cols == RN) {
      run_panel.template operator()<RN>(n0, panel);
    } else {
      for (int64_t c = 0; c < cols; ++c) {
        run_panel.template operator()<1>(n0 + c, {panel.Row(static_cast<int>(c)), panel.stride});
      }
    }
  }
}

// The GEMV path of Kernel, a function of its own as before the GEMM path's scale
// products (inlined into RunInt8Tiles, it called RunPanel per weight row: M = 1 took
// 4% longer with the weights in cache).
template <class Kernel>
[[gnu::noinline]] void RunGemv(const Problem& p, int64_t n_begin, int64_t n_end) {
  RunTiles<Kernel, kGemvMaxRows, 1>(p, n_begin, n_end);
}

// Block32Tiles of Kernel over out[0..M, n_begin..n_end): the GEMV path, or the GEMM
// path in RM x Shape::kBlock32Cols tiles, with the scale products of RunBlock32Panels
// where Shape::kBlock32ScaleProducts.
template <class Kernel, class Shape, int RM>
void RunBlock32Tiles(const Problem& p, int64_t n_begin, int64_t n_end) {
  if (p.m <= kGemvMaxRows) return RunGemv<Kernel>(p, n_begin, n_end);
  if constexpr (Shape::kBlock32ScaleProducts) {
    RunBlock32Panels<Kernel, RM, Shape::kBlock32Cols>(p, n_begin, n_end);
  } else {
    RunTiles<Kernel, RM, Shape::kBlock32Cols>(p, n_begin, n_end);
  }
}

// ---- K-quants: super-blocks of 256 against kQ8x256 ---------------------------------
//
// Each format presents a super-block as 8 chunks of 32 unsigned values (Chunk<c>)
// with an int16 multiplier per int16 lane of maddubs(chunk, x) (ChunkScale<c>), plus
// a correction: sum over 16-value groups of corr16[g] * bsum_x[g], weighted by
// corr_scale. Per super-block and row pair:
//   acc += d * dx * sum_c MaddI16(maddubs(Chunk<c>, x_c), ChunkScale<c>)
//        + corr_scale * dx * madd(corr16, bsums_x)
// Q4_K/Q5_K: x = d sc q - dmin m   -> corr16 = m per 16-group, corr_scale = -dmin.
// Q6_K:      x = d sc (q - 32)      -> corr16 = sc per 16-group, corr_scale = -32 d.

// Broadcast of int16 lane `lane` of each 128-bit half (a vpshufb mask).
inline __m256i Int16LaneMask(int low_half_lane, int high_half_lane) {
  auto pattern = [](int lane) { return static_cast<int16_t>((2 * lane + 1) << 8 | (2 * lane)); };
  return _mm256_set_m128i(_mm_set1_epi16(pattern(high_half_lane)), _mm_set1_epi16(pattern(low_half_lane)));
}

// Q4_K / Q5_K scales: the 12 packed bytes -> int16 vectors: sc[0..7] in both halves
// (for per-chunk broadcasts) and each min duplicated per 16-value group.
struct ScaleMinVectors {
  __m256i scales;  // int16 sc[0..7] in each 128-bit half
  __m256i mins;    // int16 m[0], m[0], m[1], m[1], ..., m[7], m[7]
};

// The first 16 bytes of a Q4_K / Q5_K block are d, dmin and the 12 packed scale
// bytes, as dwords H (d, dmin), D0, D1, D2. The scales unpack with 32-bit lane ops:
//   sc[0..3] = D0 & 0x3f..    sc[4..7] = (D2 & 0x0f..) | ((D0 >> 2) & 0x30..)
//   m[0..3]  = D1 & 0x3f..    m[4..7]  = ((D2 >> 4) & 0x0f..) | ((D1 >> 2) & 0x30..)
inline ScaleMinVectors UnpackScaleMinVectors(__m128i head) {
  const __m128i low = _mm_shuffle_epi32(head, _MM_SHUFFLE(3, 2, 3, 1));  // D0, D2, D1, D2
  const __m128i top = _mm_shuffle_epi32(head, _MM_SHUFFLE(2, 2, 1, 1));  // D0, D0, D1, D1
  const __m128i low_bits = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)),
                                         _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i top_bits = _mm_and_si128(_mm_srli_epi32(top, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  // sc16: int16 sc[0..7] in the low half, m[0..7] in the high half.
  const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_or_si128(low_bits, top_bits));
  const __m256i mins_both = _mm256_permute2x128_si256(sc16, sc16, 0x11);
  const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7,  //
                                          8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15);
  return {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_shuffle_epi8(mins_both, dup_lo)};
}

// Header of a Q4_K / Q5_K block (both start with d, dmin, scales[12]).
template <class Block>
struct ScaleMinHeader {
  ScaleMinVectors sm;
  float d, corr_scale;

  static ScaleMinHeader Load(const Block& b) {
    const __m128i head = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b));
    const __m128 d_dmin = _mm_cvtph_ps(head);  // lanes 0, 1
    return {UnpackScaleMinVectors(head), _mm_cvtss_f32(d_dmin), -_mm_cvtss_f32(_mm_movehdup_ps(d_dmin))};
  }
};

struct Q4KFormat {
  using Block = BlockQ4_K;
  using Header = ScaleMinHeader<Block>;
  static Header LoadHeader(const Block& b) { return Header::Load(b); }
  template <int c>
  static __m256i Chunk(const Block& b) {
    const __m256i packed = LoadBytes32(b.qs + 32 * (c / 2));
    return c % 2 ? HighNibbles(packed) : LowNibbles(packed);
  }
  template <int c>
  static __m256i ChunkScale(const Header& h) {
    return _mm256_shuffle_epi8(h.sm.scales, Int16LaneMask(c, c));
  }
  static __m256i Corr16(const Header& h) { return h.sm.mins; }
};

struct Q5KFormat {
  using Block = BlockQ5_K;
  using Header = ScaleMinHeader<Block>;
  static Header LoadHeader(const Block& b) { return Header::Load(b); }
  template <int c>
  static __m256i Chunk(const Block& b) {
    const __m256i packed = LoadBytes32(b.qs + 32 * (c / 2));
    const __m256i low4 = c % 2 ? HighNibbles(packed) : LowNibbles(packed);
    const __m256i high = _mm256_and_si256(MoveBits<c, 4>(LoadBytes32(b.qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(low4, high);
  }
  template <int c>
  static __m256i ChunkScale(const Header& h) {
    return _mm256_shuffle_epi8(h.sm.scales, Int16LaneMask(c, c));
  }
  static __m256i Corr16(const Header& h) { return h.sm.mins; }
};

struct Q6KFormat {
  using Block = BlockQ6_K;
  struct Header {
    __m256i scales;  // int16 sc[0..15]
    float d, corr_scale;
  };
  static Header LoadHeader(const Block& b) {
    const float d = _cvtsh_ss(b.d);
    return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))), d, -32 * d};
  }
  // Chunk c = values 32c..32c+31: half c / 4, part c % 4 (see vt/quant.h).
  template <int c>
  static __m256i Chunk(const Block& b) {
    constexpr int half = c / 4, part = c % 4;
    const __m256i ql = LoadBytes32(b.ql + 64 * half + 32 * (part % 2));
    const __m256i low4 = part < 2 ? LowNibbles(ql) : HighNibbles(ql);
    const __m256i qh = LoadBytes32(b.qh + 32 * half);
    const __m256i high2 = _mm256_and_si256(MoveBits<2 * part, 4>(qh), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(low4, high2);
  }
  // Lanes 0-7 of maddubs(chunk c, x) cover sub-block 2c, lanes 8-15 sub-block 2c + 1.
  template <int c>
  static __m256i ChunkScale(const Header& h) {
    const __m256i half = _mm256_permute2x128_si256(h.scales, h.scales, c < 4 ? 0x00 : 0x11);
    return _mm256_shuffle_epi8(half, Int16LaneMask((2 * c) % 8, (2 * c + 1) % 8));
  }
  static __m256i Corr16(const Header& h) { return h.scales; }
};

template <class Ops, class Format>
struct KQuantTiles {
  using Block = typename Format::Block;

  // Independent integer accumulators per row pair: a small tile has few pairs, so
  // it spreads the chunks over several to keep the multiply-add latency off the
  // critical path.
  template <int RM, int RN>
  static constexpr int kChains = RM* RN >= 4   ? 1
                                 : RM* RN >= 2 ? 2
                                               : 4;

  template <int c, int RM, int RN>
  static void AccumulateChunk(const Block* const* w, const typename Format::Header* h, const int8_t* const* x,
                              __m256i (&isum)[kChains<RM, RN>][RM][RN]) {
    constexpr int chain = c % kChains<RM, RN>;
    __m256i xc[RM];
    for (int i = 0; i < RM; ++i) xc[i] = LoadBytes32(x[i] + 32 * c);
    for (int j = 0; j < RN; ++j) {
      const __m256i q = Format::template Chunk<c>(*w[j]);
      const __m256i scale = Format::template ChunkScale<c>(h[j]);
      for (int i = 0; i < RM; ++i) {
        isum[chain][i][j] = Ops::MaddI16(isum[chain][i][j], _mm256_maddubs_epi16(q, xc[i]), scale);
      }
    }
  }

  template <int RM, int RN, int... c>
  static void AccumulateChunks(const Block* const* w, const typename Format::Header* h, const int8_t* const* x,
                               __m256i (&isum)[kChains<RM, RN>][RM][RN], std::integer_sequence<int, c...>) {
    (AccumulateChunk<c>(w, h, x, isum), ...);
  }

  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel) {
    const int64_t num_blocks = p.k / 256;
    __m256 acc[RM][RN];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < num_blocks; ++b) {
      const Block* w[RN];
      typename Format::Header h[RN];
      for (int j = 0; j < RN; ++j) {
        w[j] = reinterpret_cast<const Block*>(panel.Row(j)) + b;
        h[j] = Format::LoadHeader(*w[j]);
      }
      const int8_t* x[RM];
      for (int i = 0; i < RM; ++i) x[i] = p.x.q + (m0 + i) * p.k + 256 * b;
      __m256i isum[kChains<RM, RN>][RM][RN];
      for (auto& chain : isum) {
        for (auto& row : chain) {
          for (auto& s : row) s = _mm256_setzero_si256();
        }
      }
      AccumulateChunks<RM, RN>(w, h, x, isum, std::make_integer_sequence<int, 8>());
      for (int i = 0; i < RM; ++i) {
        const int64_t row = m0 + i;
        const float x_scale = p.x.d[row * num_blocks + b];
        const __m256i bsums = LoadBytes32(p.x.bsums + row * (p.k / 16) + 16 * b);
        for (int j = 0; j < RN; ++j) {
          __m256i total = isum[0][i][j];
          for (int c = 1; c < kChains<RM, RN>; ++c) total = _mm256_add_epi32(total, isum[c][i][j]);
          const __m256i corr = _mm256_madd_epi16(Format::Corr16(h[j]), bsums);
          acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(h[j].d * x_scale), acc[i][j]);
          acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(h[j].corr_scale * x_scale), acc[i][j]);
        }
      }
    }
    for (int i = 0; i < RM; ++i) {
      for (int j = 0; j < RN; ++j) p.Store(m0 + i, n0 + j, HorizontalSum(acc[i][j]));
    }
  }
};

// The register tiles of the 256-bit variants (AVX2, AVX-VNNI), within the 16 ymm
// registers. The 32-value block formats' GEMM path reads scale products: Q8_0 in 4 x 2
// tiles (8 accumulators, 2 weights and their |w|, x, the ones of maddubs + madd and
// the temporaries; 3 x 2 was 4-5% slower), Q4_0 in 3 x 2 (at 4 x 2 its nibble mask and
// per-row start vector spilled registers: 16-20% slower). Against the 2 x 2 tiles
// with the scales multiplied in the step, on Zen 3 (2 vCPUs, AVX2): one thread, Q8_0,
// M 128, N 3584, K 1024, 62 -> 80 GFLOP/s; vt_bench BM_MatMulGemm (2 threads, medians
// of 5 alternating runs) Q8_0 1.10-1.44x and Q4_0 1.30-1.48x over the mlp shapes at 128
// and 512 tokens; prefill of 128 tokens (vllm-cpp bench latency, 0.8B Q8_0) 1.28x.
// AVX-VNNI was not measured (no such CPU at hand).
struct Ymm16Int8Shape {
  static constexpr int kQ8_0Rows = 4, kQ4_0Rows = 3, kBlock32Cols = 2, kKQuantRows = 2, kKQuantCols = 2;
  static constexpr bool kBlock32ScaleProducts = true;
};

// Runs the integer tiles of p.w_dtype (a block type other than Q8_K). Shape gives
// the register tiles (rows x cols) of the GEMM path for 32-value blocks (rows per
// format) and for K-quant super-blocks. The GEMV path reads one weight row at a time:
// interleaving the rows of a panel defeats the hardware prefetcher when the weights
// come from DRAM (measured: 4 GB/s per core instead of 15).
template <class Ops, class Shape>
void RunInt8Tiles(const Problem& p, int64_t n_begin, int64_t n_end) {
  constexpr int kKR = Shape::kKQuantRows, kKC = Shape::kKQuantCols;
  switch (p.w_dtype) {
    case DType::kQ8_0:
      return RunBlock32Tiles<Block32Tiles<Ops, Q8_0Format>, Shape, Shape::kQ8_0Rows>(p, n_begin, n_end);
    case DType::kQ4_0:
      return RunBlock32Tiles<Block32Tiles<Ops, Q4_0Format>, Shape, Shape::kQ4_0Rows>(p, n_begin, n_end);
    case DType::kQ4_K: return RunGemvOrGemm<KQuantTiles<Ops, Q4KFormat>, kKR, kKC>(p, n_begin, n_end);
    case DType::kQ5_K: return RunGemvOrGemm<KQuantTiles<Ops, Q5KFormat>, kKR, kKC>(p, n_begin, n_end);
    case DType::kQ6_K: return RunGemvOrGemm<KQuantTiles<Ops, Q6KFormat>, kKR, kKC>(p, n_begin, n_end);
    default: return;
  }
}

}  // namespace
}  // namespace vt::cpu::matmul
