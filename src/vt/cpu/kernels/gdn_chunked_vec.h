// Vectorised products and exp of GdnChunkedPrefill (see gdn_chunked.cpp), written
// against `Vec` (gdn_vec.h) and compiled by gdn_chunked_avx2.cpp and
// gdn_chunked_avx512.cpp.
//
// C = c_scale C + ab_scale A B is computed in register micro-tiles of kTileRows rows
// x 2 vectors of columns: per step of the inner dimension, two vector loads of a B
// row and one broadcast of A per row feed 2 * kTileRows FMAs, so the FMA units, not
// loads, set the pace. Column strips are the outer loop, so the strip of B (inner
// dim x 2 vectors, at most 16 KiB) stays in L1 while the row tiles pass over it.
#pragma once

#include <algorithm>

#include "gdn_kernels.h"
#include "gdn_vec.h"

namespace vt::cpu::gdn {
namespace {

template <int kRows, int kVecs>
void MatMulTile(const ChunkMatMulArgs& p, int64_t i0, int64_t j0) {
  using Reg = Vec::Reg;
  Reg acc[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = Vec::Zero();
  const int64_t k_end = p.a_lower_triangular ? std::min<int64_t>(p.k, i0 + kRows) : p.k;
  const float* a = p.a + i0 * p.a_row_stride;
  const float* b = p.b + j0;
  for (int64_t kk = 0; kk < k_end; ++kk) {
    Reg bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = Vec::Load(b + kk * p.ldb + v * Vec::kLanes);
    for (int r = 0; r < kRows; ++r) {
      const Reg av = Vec::Set(a[r * p.a_row_stride + kk * p.a_col_stride]);
      for (int v = 0; v < kVecs; ++v) acc[r][v] = Vec::Fma(av, bv[v], acc[r][v]);
    }
  }
  const Reg ab_scale = Vec::Set(p.ab_scale), c_scale = Vec::Set(p.c_scale);
  for (int r = 0; r < kRows; ++r) {
    float* c = p.c + (i0 + r) * p.ldc + j0;
    for (int v = 0; v < kVecs; ++v) {
      Reg value = Vec::Mul(ab_scale, acc[r][v]);
      if (p.c_scale != 0.0f) value = Vec::Fma(c_scale, Vec::Load(c + v * Vec::kLanes), value);
      Vec::Store(c + v * Vec::kLanes, value);
    }
  }
}

// A tile of `rows` <= kRows rows.
template <int kRows, int kVecs>
void MatMulRows(const ChunkMatMulArgs& p, int64_t i0, int rows, int64_t j0) {
  if constexpr (kRows > 1) {
    if (rows < kRows) return MatMulRows<kRows - 1, kVecs>(p, i0, rows, j0);
  }
  MatMulTile<kRows, kVecs>(p, i0, j0);
}

void MatMulVectorised(const ChunkMatMulArgs& p) {
  constexpr int64_t kStrip = 2 * Vec::kLanes;
  for (int64_t j0 = 0; j0 < p.n;) {
    const bool wide = p.n - j0 >= kStrip;
    for (int64_t i0 = 0; i0 < p.m; i0 += Vec::kTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(Vec::kTileRows, p.m - i0));
      if (p.c_lower_triangular && j0 > i0 + rows - 1) continue;  // the strip is above the tile's diagonal
      if (wide) {
        MatMulRows<Vec::kTileRows, 2>(p, i0, rows, j0);
      } else {
        MatMulRows<Vec::kTileRows, 1>(p, i0, rows, j0);
      }
    }
    j0 += wide ? kStrip : Vec::kLanes;
  }
}

void ExpInPlaceVectorised(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += Vec::kLanes) Vec::Store(x + i, Vec::Exp(Vec::Load(x + i)));
}

}  // namespace
}  // namespace vt::cpu::gdn
