// Block-weight GEMM on AVX2 without VNNI (M > kGemvMaxRows, prefill and batched
// decode), included by matmul_avx2.cpp only: each panel of kPanelRows weight rows is
// widened to int16 once per call, then swept by int16 x int16 register tiles
// (vpmaddwd) against x quantized to int16 with one scale per row (XFormat::kI16Row).
//
// Every GGUF block type is presented, per 32-value block b of weight row j, as
//   w[j][32b + l] = s[j][b] * v[j][32b + l] + o[j][b]          (v int16, |v| <= 4096)
//   Q8_0: v = q,            s = d, o = 0
//   Q4_0: v = n - 8,        s = d, o = 0
//   Q4_K: v = sc * n,       s = d, o = -dmin * m     (a sub-block is one block of 32)
//   Q5_K: the same with 5-bit n
//   Q6_K: v = sc * (q - 32) (sc per 16 values), s = d, o = 0
// so that, with x[i][k] ~ dx[i] * xq[i][k] and xsum[i][b] the f32 sum of x over block b,
//   out[i][j] = dx[i] * sum_b s[j][b] * dot_b(xq[i], v[j]) + sum_b o[j][b] * xsum[i][b].
//
// Why it is faster than the int8 tiles here: without VNNI a pair's 32 int8 products
// cost sign + maddubs + madd (+ a scale product per block); widened, they cost two
// vpmaddwd and one add, and x needs no per-block scale. The widening is paid once per
// weight row per call and shared by every tile of x. x at 16 bits is also closer to
// its f32 values than the 8-bit blocks.
// Range: |xq| <= 32767 and |v| <= 4096, so a lane of one block's sum (4 products) stays
// below 2^29, and vpmaddwd never meets its one overflow (-32768 * -32768, twice).
//
// Internal linkage throughout (see matmul_tiles.h).
#pragma once

#include <immintrin.h>

#include <utility>
#include <vector>

#include "matmul_int8_x86.h"

namespace vt::cpu::matmul {
namespace {

// Weight rows widened per call: one work item, so a panel never spans two threads.
constexpr int64_t kInt16PanelRows = kRowsPerWorkItem;
// Register tiles: RM x RN f32 accumulators, 2 RN weight and 2 x vectors, temporaries:
// 4 x 2 fits the 16 ymm registers.
constexpr int kInt16TileRows = 4, kInt16TileCols = 2;

inline void Store16(int16_t* dst, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v); }

// 32 int8 values (in order) -> two int16 vectors at dst.
inline void WidenSigned32(__m256i q, int16_t* dst) {
  Store16(dst, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)));
  Store16(dst + 16, _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)));
}

// 32 unsigned bytes (in order) times int16 factors for the first and second 16.
inline void WidenScaled32(__m256i u, int16_t low_factor, int16_t high_factor, int16_t* dst) {
  Store16(dst, _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(u)), _mm256_set1_epi16(low_factor)));
  Store16(dst + 16,
          _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(u, 1)), _mm256_set1_epi16(high_factor)));
}

// One weight row of `k` values in its block form -> v [k], s [k / 32], o [k / 32].
void WidenRowQ8_0(const char* row, int64_t k, int16_t* v, float* s, float* o) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
  for (int64_t b = 0; b < k / 32; ++b) {
    WidenSigned32(LoadBytes32(blocks[b].qs), v + 32 * b);
    s[b] = _cvtsh_ss(blocks[b].d);
    o[b] = 0;
  }
}

void WidenRowQ4_0(const char* row, int64_t k, int16_t* v, float* s, float* o) {
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(row);
  for (int64_t b = 0; b < k / 32; ++b) {
    const Q4_0Format::Weights w = Q4_0Format::Load(blocks[b]);
    WidenSigned32(_mm256_sub_epi8(w.q, _mm256_set1_epi8(8)), v + 32 * b);
    s[b] = w.scale;
    o[b] = 0;
  }
}

// Q4_K / Q5_K: Format::Chunk<c> is sub-block c as 32 unsigned values in order.
template <class Format, int... c>
void WidenScaleMinBlock(const typename Format::Block& block, int16_t* v, float* s, float* o,
                        std::integer_sequence<int, c...>) {
  const float d = _cvtsh_ss(block.d), dmin = _cvtsh_ss(block.dmin);
  auto widen = [&](int j, __m256i chunk) {
    int scale = 0, min = 0;
    UnpackQ4KScaleMin(block.scales, j, &scale, &min);
    WidenScaled32(chunk, static_cast<int16_t>(scale), static_cast<int16_t>(scale), v + 32 * j);
    s[j] = d;
    o[j] = -dmin * static_cast<float>(min);
  };
  (widen(c, Format::template Chunk<c>(block)), ...);
}

template <class Format>
void WidenRowScaleMin(const char* row, int64_t k, int16_t* v, float* s, float* o) {
  const auto* blocks = reinterpret_cast<const typename Format::Block*>(row);
  for (int64_t b = 0; b < k / 256; ++b) {
    WidenScaleMinBlock<Format>(blocks[b], v + 256 * b, s + 8 * b, o + 8 * b, std::make_integer_sequence<int, 8>());
  }
}

// Q6_K: Chunk<c> holds the 6-bit q of values 32c .. 32c+31; sc[2c] scales the first
// 16 of them, sc[2c + 1] the next.
template <int... c>
void WidenQ6KBlock(const BlockQ6_K& block, int16_t* v, float* s, float* o, std::integer_sequence<int, c...>) {
  const float d = _cvtsh_ss(block.d);
  auto widen = [&](int j, __m256i chunk) {
    const __m256i centred = _mm256_sub_epi8(chunk, _mm256_set1_epi8(32));  // q - 32 in [-32, 31]
    Store16(v + 32 * j, _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(centred)),
                                           _mm256_set1_epi16(block.scales[2 * j])));
    Store16(v + 32 * j + 16, _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(centred, 1)),
                                                _mm256_set1_epi16(block.scales[2 * j + 1])));
    s[j] = d;
    o[j] = 0;
  };
  (widen(c, Q6KFormat::Chunk<c>(block)), ...);
}

void WidenRowQ6_K(const char* row, int64_t k, int16_t* v, float* s, float* o) {
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(row);
  for (int64_t b = 0; b < k / 256; ++b) {
    WidenQ6KBlock(blocks[b], v + 256 * b, s + 8 * b, o + 8 * b, std::make_integer_sequence<int, 8>());
  }
}

using WidenRowFn = void (*)(const char* row, int64_t k, int16_t* v, float* s, float* o);

WidenRowFn WidenRowFor(DType w_dtype) {
  switch (w_dtype) {
    case DType::kQ8_0: return WidenRowQ8_0;
    case DType::kQ4_0: return WidenRowQ4_0;
    case DType::kQ4_K: return WidenRowScaleMin<Q4KFormat>;
    case DType::kQ5_K: return WidenRowScaleMin<Q5KFormat>;
    case DType::kQ6_K: return WidenRowQ6_K;
    default: return nullptr;
  }
}

// A panel of widened weight rows: row j at v + j * k, its blocks' s and o at j * (k / 32).
struct Int16Panel {
  const int16_t* v;
  const float* s;
  const float* o;
  int64_t k;
  bool has_offsets;
};

// out[m0 .. m0+RM, n0 .. n0+RN) from panel rows j0 .. j0+RN.
template <int RM, int RN>
void Int16Tile(const Problem& p, int64_t m0, int64_t n0, const Int16Panel& panel, int j0) {
  const int64_t k = panel.k, num_blocks = k / 32;
  const int16_t* x[RM];
  for (int i = 0; i < RM; ++i) x[i] = p.x.q16 + (m0 + i) * k;
  const int16_t* v[RN];
  const float* s[RN];
  for (int j = 0; j < RN; ++j) {
    v[j] = panel.v + (j0 + j) * k;
    s[j] = panel.s + (j0 + j) * num_blocks;
  }
  __m256 acc[RM][RN];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    __m256i w0[RN], w1[RN];
    for (int j = 0; j < RN; ++j) {
      w0[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v[j] + 32 * b));
      w1[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v[j] + 32 * b + 16));
    }
    for (int i = 0; i < RM; ++i) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i] + 32 * b));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i] + 32 * b + 16));
      for (int j = 0; j < RN; ++j) {
        const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(x0, w0[j]), _mm256_madd_epi16(x1, w1[j]));
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcast_ss(s[j] + b), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < RM; ++i) {
    const int64_t row = m0 + i;
    const float* xsum = p.x.block_sums + row * num_blocks;
    for (int j = 0; j < RN; ++j) {
      float offset = 0;
      if (panel.has_offsets) {
        const float* o = panel.o + (j0 + j) * num_blocks;
        for (int64_t b = 0; b < num_blocks; ++b) offset += o[b] * xsum[b];
      }
      p.Store(row, n0 + j, p.x.d[row] * HorizontalSum(acc[i][j]) + offset);
    }
  }
}

// Int16Tile<rows, RN> for a run-time rows in 1 .. kInt16TileRows.
template <int RN, int kRows = 1>
void Int16TileWithRows(int rows, const Problem& p, int64_t m0, int64_t n0, const Int16Panel& panel, int j0) {
  if constexpr (kRows <= kInt16TileRows) {
    if (rows == kRows) {
      Int16Tile<kRows, RN>(p, m0, n0, panel, j0);
    } else {
      Int16TileWithRows<RN, kRows + 1>(rows, p, m0, n0, panel, j0);
    }
  }
}

// out[0..M, n_begin..n_end): per panel, widen its rows, then for each tile of x rows
// (which stays in L1 across the panel) sweep the panel's column groups.
void RunInt16Panels(const Problem& p, int64_t n_begin, int64_t n_end) {
  const WidenRowFn widen = WidenRowFor(p.w_dtype);
  const int64_t num_blocks = p.k / 32;
  std::vector<int16_t> v(static_cast<size_t>(kInt16PanelRows * p.k));  // [kInt16PanelRows, K]
  std::vector<float> s(static_cast<size_t>(kInt16PanelRows * num_blocks)), o(s.size());
  const Int16Panel panel{v.data(), s.data(), o.data(), p.k,
                         p.w_dtype == DType::kQ4_K || p.w_dtype == DType::kQ5_K};
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kInt16PanelRows) {
    const int cols = static_cast<int>(std::min(kInt16PanelRows, n_end - n0));
    for (int c = 0; c < cols; ++c) {
      widen(p.WeightRow(n0 + c), p.k, v.data() + c * p.k, s.data() + c * num_blocks, o.data() + c * num_blocks);
    }
    for (int64_t m0 = 0; m0 < p.m; m0 += kInt16TileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kInt16TileRows, p.m - m0));
      int j0 = 0;
      for (; j0 + kInt16TileCols <= cols; j0 += kInt16TileCols) {
        Int16TileWithRows<kInt16TileCols>(rows, p, m0, n0 + j0, panel, j0);
      }
      for (; j0 < cols; ++j0) Int16TileWithRows<1>(rows, p, m0, n0 + j0, panel, j0);
    }
  }
}

}  // namespace
}  // namespace vt::cpu::matmul
