// K-quant integer tiles on 512-bit vectors (AVX-512 BW + VNNI), included by
// matmul_avx512.cpp only. The same arithmetic as KQuantTiles in
// matmul_int8_x86.h, but a step covers two 32-value chunks (64 values, which are
// contiguous in x): one maddubs and one madd + add per 64 values and row pair instead
// of two each, which is what bounds the decode GEMV of these formats. Not vpdpwssd:
// on an Intel Xeon (2 threads, Q4_K 3584 x 1024) it made the one-token GEMV 266 us
// against 135 with madd + add, and the whole Qwen3.5-0.8B-shaped Q4_K decode 19.2
// tok/s against 29.4 (bench/peer/compare_with_llama_cpp.sh, llama.cpp 26.2 in the
// same runs); at 128 tokens madd + add was also a little faster (153 GFLOP/s, 147).
//
// Each format presents chunk pair g (values 64g .. 64g+63) as 64 unsigned values
// (Pair<g>) and the int16 multiplier of each int16 lane of maddubs(pair, x)
// (PairScale<g>); header and correction are those of the 256-bit formats.
//
// Internal linkage throughout (see matmul_tiles.h).
#pragma once

#include <immintrin.h>

#include "matmul_int8_x86.h"

namespace vt::cpu::matmul {
namespace {

inline __m512i Join(__m256i low, __m256i high) { return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1); }

// Int16 lane `lane[q]` of each 128-bit quarter q (a vpshufb mask).
inline __m512i Int16LaneMask512(int lane0, int lane1, int lane2, int lane3) {
  auto pattern = [](int lane) { return _mm_set1_epi16(static_cast<int16_t>((2 * lane + 1) << 8 | (2 * lane))); };
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(pattern(lane1), pattern(lane0))),
                            _mm256_set_m128i(pattern(lane3), pattern(lane2)), 1);
}

// Q4_K / Q5_K: sc[2g] for the first 32 values of pair g, sc[2g + 1] for the next.
template <int g>
__m512i ScaleMinPairScale(const ScaleMinVectors& sm) {
  return _mm512_shuffle_epi8(_mm512_broadcast_i64x4(sm.scales), Int16LaneMask512(2 * g, 2 * g, 2 * g + 1, 2 * g + 1));
}

struct Q4KPairs {
  using Format = Q4KFormat;
  using Block = BlockQ4_K;
  template <int g>
  static __m512i Pair(const Block& b) {
    const __m256i packed = LoadBytes32(b.qs + 32 * g);
    return _mm512_and_si512(Join(packed, _mm256_srli_epi16(packed, 4)), _mm512_set1_epi8(0x0f));
  }
  template <int g>
  static __m512i PairScale(const Format::Header& h) {
    return ScaleMinPairScale<g>(h.sm);
  }
};

struct Q5KPairs {
  using Format = Q5KFormat;
  using Block = BlockQ5_K;
  template <int g>
  static __m512i Pair(const Block& b) {
    const __m256i packed = LoadBytes32(b.qs + 32 * g), qh = LoadBytes32(b.qh);
    const __m512i low4 = _mm512_and_si512(Join(packed, _mm256_srli_epi16(packed, 4)), _mm512_set1_epi8(0x0f));
    const __m512i high = Join(MoveBits<2 * g, 4>(qh), MoveBits<2 * g + 1, 4>(qh));
    return _mm512_or_si512(low4, _mm512_and_si512(high, _mm512_set1_epi8(0x10)));
  }
  template <int g>
  static __m512i PairScale(const Format::Header& h) {
    return ScaleMinPairScale<g>(h.sm);
  }
};

struct Q6KPairs {
  using Format = Q6KFormat;
  using Block = BlockQ6_K;
  // Pair g: half g / 2; its low nibbles (g even) or high nibbles (g odd) of 64 ql
  // bytes, with qh bit pairs (0-1, 2-3) or (4-5, 6-7).
  template <int g>
  static __m512i Pair(const Block& b) {
    constexpr int half = g / 2, part = 2 * (g % 2);
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * half);
    const __m512i low4 = _mm512_and_si512(g % 2 ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0f));
    const __m256i qh = LoadBytes32(b.qh + 32 * half);
    const __m512i high = Join(MoveBits<2 * part, 4>(qh), MoveBits<2 * part + 2, 4>(qh));
    return _mm512_or_si512(low4, _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
  }
  // Sub-blocks 4g .. 4g+3, one per 128-bit quarter (16 values each).
  template <int g>
  static __m512i PairScale(const Format::Header& h) {
    const __m128i half = g < 2 ? _mm256_castsi256_si128(h.scales) : _mm256_extracti128_si256(h.scales, 1);
    constexpr int l = (4 * g) % 8;
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(half), Int16LaneMask512(l, l + 1, l + 2, l + 3));
  }
};

template <class Pairs>
struct KQuantTiles512 {
  using Format = typename Pairs::Format;
  using Block = typename Pairs::Block;
  template <int RM, int RN>
  static constexpr int kChains = RM* RN >= 4 ? 1 : 2;

  template <int g, int RM, int RN>
  static void AccumulatePair(const Block* const* w, const typename Format::Header* h, const int8_t* const* x,
                             __m512i (&isum)[kChains<RM, RN>][RM][RN]) {
    constexpr int chain = g % kChains<RM, RN>;
    __m512i xg[RM];
    for (int i = 0; i < RM; ++i) xg[i] = _mm512_loadu_si512(x[i] + 64 * g);
    for (int j = 0; j < RN; ++j) {
      const __m512i q = Pairs::template Pair<g>(*w[j]);
      const __m512i scale = Pairs::template PairScale<g>(h[j]);
      for (int i = 0; i < RM; ++i) {
        isum[chain][i][j] = _mm512_add_epi32(isum[chain][i][j], _mm512_madd_epi16(_mm512_maddubs_epi16(q, xg[i]), scale));
      }
    }
  }

  template <int RM, int RN, int... g>
  static void AccumulatePairs(const Block* const* w, const typename Format::Header* h, const int8_t* const* x,
                              __m512i (&isum)[kChains<RM, RN>][RM][RN], std::integer_sequence<int, g...>) {
    (AccumulatePair<g>(w, h, x, isum), ...);
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
      if constexpr (RN == 1) {  // the GEMV path: see kGemvPrefetchBytes
        const char* ahead = reinterpret_cast<const char*>(w[0]) + kGemvPrefetchBytes;
        for (size_t line = 0; line < sizeof(Block); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
      }
      const int8_t* x[RM];
      for (int i = 0; i < RM; ++i) x[i] = p.x.q + (m0 + i) * p.k + 256 * b;
      __m512i isum[kChains<RM, RN>][RM][RN];
      for (auto& chain : isum) {
        for (auto& row : chain) {
          for (auto& s : row) s = _mm512_setzero_si512();
        }
      }
      AccumulatePairs<RM, RN>(w, h, x, isum, std::make_integer_sequence<int, 4>());
      for (int i = 0; i < RM; ++i) {
        const int64_t row = m0 + i;
        const float x_scale = p.x.d[row * num_blocks + b];
        const __m256i bsums = LoadBytes32(p.x.bsums + row * (p.k / 16) + 16 * b);
        for (int j = 0; j < RN; ++j) {
          __m512i total = isum[0][i][j];
          for (int c = 1; c < kChains<RM, RN>; ++c) total = _mm512_add_epi32(total, isum[c][i][j]);
          const __m256i total256 = _mm256_add_epi32(_mm512_castsi512_si256(total), _mm512_extracti64x4_epi64(total, 1));
          const __m256i corr = _mm256_madd_epi16(Format::Corr16(h[j]), bsums);
          acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total256), _mm256_set1_ps(h[j].d * x_scale), acc[i][j]);
          acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(h[j].corr_scale * x_scale), acc[i][j]);
        }
      }
    }
    for (int i = 0; i < RM; ++i) {
      for (int j = 0; j < RN; ++j) p.Store(m0 + i, n0 + j, HorizontalSum(acc[i][j]));
    }
  }
};

}  // namespace
}  // namespace vt::cpu::matmul
