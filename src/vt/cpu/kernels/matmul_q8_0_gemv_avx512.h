// The Q8_0 GEMV path (M <= kGemvMaxRows) on 512-bit vectors, included by
// matmul_avx512.cpp only: out[m0 .. m0+RM, n] = x . w_n for one weight row at a time,
// x as kQ8x32 (int8 values, f32 scale per 32-value block).
//
// Why it is fast: decode streams every weight once, so the loop must issue its loads
// faster than DRAM delivers them, or it adds its own time to the memory's. The
// 256-bit Block32Tiles step spends ~13 instructions on each 34-byte block (its f16
// scale converted, multiplied and broadcast alone, then the sign trick, dot, convert,
// FMA); this one does two blocks a step and the scales of eight blocks at once:
//   per 8 blocks: one gather of their f16 scales, one convert, one multiply by x's
//                 scales per x row;
//   per 2 blocks: the two 32-byte quant runs joined into one zmm, |w| and x with w's
//                 sign (vpabsb, vpmovb2m and a masked subtract: AVX-512 has no
//                 vpsignb), one vpdpbusd, one convert, a permute of the scales and
//                 one FMA per x row.
// The weight lines a fixed distance ahead are prefetched from inside the loop, a few
// per step, instead of a whole row in a burst before it: a burst filled the line fill
// buffers and stalled the loads of the row being computed.
//
// Internal linkage throughout (see matmul_tiles.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "matmul_tiles.h"
#include "vt/quant.h"

namespace vt::cpu::matmul {
namespace {

struct Q8_0Gemv512 {
  // out[m0 .. m0+RM, n0] for the single weight row of panel (RN == 1).
  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel) {
    static_assert(RN == 1, "a GEMV tile is one weight row");
    const int64_t num_blocks = p.k / 32;
    const auto* w = reinterpret_cast<const BlockQ8_0*>(panel.Row(0));
    const int8_t* xq[RM];
    const float* xd[RM];
    for (int i = 0; i < RM; ++i) {
      xq[i] = p.x.q + (m0 + i) * p.k;
      xd[i] = p.x.d + (m0 + i) * num_blocks;
    }
    __m512 acc[RM][2];
    for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
    // Byte offsets of the f16 scales of 8 consecutive blocks (gathered as 32-bit words
    // whose low half is d: the upper half is the block's first two quants).
    const __m256i scale_offsets = _mm256_setr_epi32(0, 34, 68, 102, 136, 170, 204, 238);
    int64_t b = 0;
    for (; b + 8 <= num_blocks; b += 8) {
      const char* here = reinterpret_cast<const char*>(w + b);
      for (int line = 0; line < 8 * 34; line += 64) _mm_prefetch(here + kGemvPrefetchBytes + line, _MM_HINT_T0);
      const __m256i d_words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(here), scale_offsets, 1);
      const __m256 w_scales = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(d_words));
      __m512 scales[RM];  // lanes 0..7: block b + lane's d_w d_x (upper 8 lanes unused)
      for (int i = 0; i < RM; ++i) {
        scales[i] = _mm512_castps256_ps512(_mm256_mul_ps(w_scales, _mm256_loadu_ps(xd[i] + b)));
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const BlockQ8_0* pair = w + b + 2 * q;
        const __m512i wq = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair[0].qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair[1].qs)), 1);
        const __m512i w_abs = _mm512_abs_epi8(wq);
        const __mmask64 negative = _mm512_movepi8_mask(wq);
        // Lanes 0..7 take block 2q's scale, lanes 8..15 block 2q + 1's.
        const __m512i pick = _mm512_set_epi32(2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1,
                                              2 * q + 1, 2 * q + 1, 2 * q, 2 * q, 2 * q, 2 * q, 2 * q, 2 * q, 2 * q, 2 * q);
        for (int i = 0; i < RM; ++i) {
          const __m512i x = _mm512_loadu_si512(xq[i] + 32 * (b + 2 * q));
          const __m512i x_signed = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_abs, x_signed);
          acc[i][q % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, scales[i]), acc[i][q % 2]);
        }
      }
    }
    float tail[RM] = {};
    for (; b < num_blocks; ++b) {
      const float w_scale = _cvtsh_ss(w[b].d);
      for (int i = 0; i < RM; ++i) {
        int32_t dot = 0;
        for (int v = 0; v < 32; ++v) dot += w[b].qs[v] * xq[i][32 * b + v];
        tail[i] += w_scale * xd[i][b] * static_cast<float>(dot);
      }
    }
    for (int i = 0; i < RM; ++i) p.Store(m0 + i, n0, _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1])) + tail[i]);
  }
};

// The Q8_0 GEMV over weight rows n_begin .. n_end.
[[gnu::noinline]] void RunQ8_0Gemv512(const Problem& p, int64_t n_begin, int64_t n_end) {
  RunGemvInTwoStreams<Q8_0Gemv512>(p, n_begin, n_end);
}

}  // namespace
}  // namespace vt::cpu::matmul
