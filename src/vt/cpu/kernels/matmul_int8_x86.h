// Integer register tiles for block-quantized weights against 8-bit quantized
// activations, on 256-bit vectors. Included by matmul_avx2.cpp and
// matmul_avx512.cpp; `Ops` supplies the two integer multiply-adds (AVX2
// maddubs/madd, or AVX-512 VNNI vpdpbusd/vpdpwssd):
//   Ops::DotU8S8(acc, u, s): acc.i32[l] += sum of 4 products u8 x s8 (lanes of 4 bytes)
//   Ops::MaddI16(acc, a, b): acc.i32[l] += a.i16[2l] b.i16[2l] + a.i16[2l+1] b.i16[2l+1]
//
// Why it is fast: the weights are read in their block format (no dequantization),
// and each 32 values cost one or two integer instructions per row pair plus one f32
// scale multiply per block (Q4_0 / Q8_0) or per 256-value super-block (K-quants,
// whose 6/8-bit sub-block scales are applied in the integer domain).
//
// Internal linkage throughout (see matmul_tiles.h).
#pragma once

#include <immintrin.h>

#include <cstring>
#include <utility>

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
    float scale;
  };
  static Weights Load(const Block& b) {
    const __m256i w = LoadBytes32(b.qs);
    return {w, _mm256_sign_epi8(w, w), _cvtsh_ss(b.d)};
  }
  template <class Ops>
  static __m256i Dot(const Weights& w, __m256i x, int32_t /*x_sum*/) {
    return Ops::DotU8S8(_mm256_setzero_si256(), w.w_abs, _mm256_sign_epi8(x, w.w));
  }
};

// Q4_0's nibbles q are unsigned: q . x, with the accumulator starting at -8 sum(x),
// which is the (q - 8) offset.
struct Q4_0Format {
  using Block = BlockQ4_0;
  struct Weights {
    __m256i q;  // values 0-15 in the low 128 bits, 16-31 in the high
    float scale;
  };
  static Weights Load(const Block& b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i mask = _mm_set1_epi8(0x0f);
    return {_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), _mm_and_si128(packed, mask)),
            _cvtsh_ss(b.d)};
  }
  template <class Ops>
  static __m256i Dot(const Weights& w, __m256i x, int32_t x_sum) {
    return Ops::DotU8S8(_mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * x_sum)), w.q, x);
  }
};

// One 32-value block per step and row pair: an integer dot, one convert and one FMA
// with the product of the two block scales. Small tiles alternate blocks between
// kChains accumulators so the FMA latency stays off the critical path.
template <class Ops, class Format>
struct Block32Tiles {
  using Block = typename Format::Block;
  template <int RM, int RN>
  static constexpr int kChains = RM* RN >= 4   ? 1
                                 : RM* RN >= 2 ? 2
                                               : 4;

  template <int RM, int RN>
  static void Step(const Problem& p, int64_t m0, const WeightPanel& panel, int64_t b, __m256 (&acc)[RM][RN]) {
    const int64_t num_blocks = p.k / 32;
    typename Format::Weights w[RN];
    for (int j = 0; j < RN; ++j) w[j] = Format::Load(reinterpret_cast<const Block*>(panel.Row(j))[b]);
    for (int i = 0; i < RM; ++i) {
      const int64_t row = m0 + i;
      const __m256i x = LoadBytes32(p.x.q + row * p.k + 32 * b);
      const float x_scale = p.x.d[row * num_blocks + b];
      const int32_t x_sum = p.x.sums[row * num_blocks + b];
      for (int j = 0; j < RN; ++j) {
        const __m256i dot = Format::template Dot<Ops>(w[j], x, x_sum);
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(x_scale * w[j].scale), acc[i][j]);
      }
    }
  }

  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel) {
    constexpr int kC = kChains<RM, RN>;
    const int64_t num_blocks = p.k / 32;
    __m256 acc[kC][RM][RN];
    for (auto& chain : acc) {
      for (auto& row : chain) {
        for (auto& a : row) a = _mm256_setzero_ps();
      }
    }
    int64_t b = 0;
    for (; b + kC <= num_blocks; b += kC) {
      for (int c = 0; c < kC; ++c) Step<RM, RN>(p, m0, panel, b + c, acc[c]);
    }
    for (; b < num_blocks; ++b) Step<RM, RN>(p, m0, panel, b, acc[0]);
    for (int i = 0; i < RM; ++i) {
      for (int j = 0; j < RN; ++j) {
        __m256 sum = acc[0][i][j];
        for (int c = 1; c < kC; ++c) sum = _mm256_add_ps(sum, acc[c][i][j]);
        p.Store(m0 + i, n0 + j, HorizontalSum(sum));
      }
    }
  }
};

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

// The register tiles of the 256-bit variants (AVX2, AVX-VNNI): 2 x 2 accumulators
// and their operands fit the 16 ymm registers.
struct Ymm16Int8Shape {
  static constexpr int kBlock32Rows = 2, kBlock32Cols = 2, kKQuantRows = 2, kKQuantCols = 2;
};

// Runs the integer tiles of p.w_dtype (a block type other than Q8_K). Shape gives
// the register tiles (rows x cols) of the GEMM path for 32-value blocks and for
// K-quant super-blocks. The GEMV path reads one weight row at a time: interleaving
// the rows of a panel defeats the hardware prefetcher when the weights come from
// DRAM (measured: 4 GB/s per core instead of 15).
template <class Ops, class Shape>
void RunInt8Tiles(const Problem& p, int64_t n_begin, int64_t n_end) {
  constexpr int kR = Shape::kBlock32Rows, kC = Shape::kBlock32Cols;
  constexpr int kKR = Shape::kKQuantRows, kKC = Shape::kKQuantCols;
  switch (p.w_dtype) {
    case DType::kQ8_0: return RunGemvOrGemm<Block32Tiles<Ops, Q8_0Format>, kR, kC>(p, n_begin, n_end);
    case DType::kQ4_0: return RunGemvOrGemm<Block32Tiles<Ops, Q4_0Format>, kR, kC>(p, n_begin, n_end);
    case DType::kQ4_K: return RunGemvOrGemm<KQuantTiles<Ops, Q4KFormat>, kKR, kKC>(p, n_begin, n_end);
    case DType::kQ5_K: return RunGemvOrGemm<KQuantTiles<Ops, Q5KFormat>, kKR, kKC>(p, n_begin, n_end);
    case DType::kQ6_K: return RunGemvOrGemm<KQuantTiles<Ops, Q6KFormat>, kKR, kKC>(p, n_begin, n_end);
    default: return;
  }
}

}  // namespace
}  // namespace vt::cpu::matmul
