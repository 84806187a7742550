// f32 FMA register tiles for float weights (f32, f16, bf16 converted on load),
// shared by matmul_avx2.cpp (8-lane ymm) and matmul_avx512.cpp (16-lane zmm).
//
// `W` is the weight loader of one dtype for the TU's vector width:
//   using Vec = __m256 / __m512;  kLanes;  Vec Load(const char* row, int64_t k);
//   float At(const char* row, int64_t k);       (scalar, for the K % kLanes tail)
//   Vec Zero(); Vec LoadX(const float*); Vec Fma(Vec a, Vec b, Vec acc); float Sum(Vec)
//
// Why it is fast: every x vector is used against RN weight vectors and every weight
// vector against RM x vectors from registers, so a tile does RM x RN FMAs per
// RM + RN loads. For 16-bit weights in the GEMM path a panel of weight rows is
// first converted to f32 once, instead of once per tile of x rows.
//
// Internal linkage throughout (see matmul_tiles.h).
#pragma once

#include <vector>

#include "matmul_tiles.h"

namespace vt::cpu::matmul {
namespace {

// Small tiles (the GEMV path) alternate K steps between kChains accumulators so the
// FMA latency stays off the critical path.
template <int RM, int RN>
inline constexpr int kFloatChains = RM* RN >= 4   ? 1
                                    : RM* RN >= 2 ? 2
                                                  : 4;

template <class W>
struct FloatTiles {
  using Vec = typename W::Vec;

  template <int RM, int RN>
  static void Step(const float* const* x, const WeightPanel& panel, int64_t k, Vec (&acc)[RM][RN]) {
    Vec w[RN];
    for (int j = 0; j < RN; ++j) w[j] = W::Load(panel.Row(j), k);
    for (int i = 0; i < RM; ++i) {
      const Vec xv = W::LoadX(x[i] + k);
      for (int j = 0; j < RN; ++j) acc[i][j] = W::Fma(xv, w[j], acc[i][j]);
    }
  }

  template <int RM, int RN>
  static void Tile(const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel) {
    constexpr int kC = kFloatChains<RM, RN>, kL = W::kLanes;
    const int64_t k_vec = p.k / kL * kL;
    const float* x[RM];
    for (int i = 0; i < RM; ++i) x[i] = p.x.f32 + (m0 + i) * p.x.f32_stride;
    Vec acc[kC][RM][RN];
    for (auto& chain : acc) {
      for (auto& row : chain) {
        for (auto& a : row) a = W::Zero();
      }
    }
    int64_t k = 0;
    for (; k + kC * kL <= k_vec; k += kC * kL) {
      for (int c = 0; c < kC; ++c) Step<RM, RN>(x, panel, k + c * kL, acc[c]);
    }
    for (; k < k_vec; k += kL) Step<RM, RN>(x, panel, k, acc[0]);
    for (int i = 0; i < RM; ++i) {
      for (int j = 0; j < RN; ++j) {
        float sum = 0;
        for (int c = 0; c < kC; ++c) sum += W::Sum(acc[c][i][j]);
        for (k = k_vec; k < p.k; ++k) sum += x[i][k] * W::At(panel.Row(j), k);
        p.Store(m0 + i, n0 + j, sum);
      }
    }
  }
};

// GEMM over 16-bit weights: each panel of RN weight rows is converted to f32 once
// (into a per-call buffer that stays in L2), then swept by f32 tiles.
template <class W, class F32W, int kMaxRows, int RN>
void RunConvertedPanels(const Problem& p, int64_t n_begin, int64_t n_end) {
  std::vector<float> buffer(static_cast<size_t>(RN * p.k));  // [RN, K]
  const int64_t k_vec = p.k / W::kLanes * W::kLanes;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += RN) {
    const int64_t cols = std::min<int64_t>(RN, n_end - n0);
    for (int64_t c = 0; c < cols; ++c) {
      const char* row = p.WeightRow(n0 + c);
      float* dst = buffer.data() + c * p.k;
      for (int64_t k = 0; k < k_vec; k += W::kLanes) W::Store(dst + k, W::Load(row, k));
      for (int64_t k = k_vec; k < p.k; ++k) dst[k] = W::At(row, k);
    }
    const WeightPanel panel{reinterpret_cast<const char*>(buffer.data()), p.k * static_cast<int64_t>(sizeof(float))};
    RunPanel<FloatTiles<F32W>, kMaxRows, RN>(p, n0, cols, panel);
  }
}

}  // namespace
}  // namespace vt::cpu::matmul
