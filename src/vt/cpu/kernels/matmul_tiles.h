// The register-tile loop shared by the MatMul CPU variants (included by the ISA
// translation units, whose tile kernels it instantiates).
//
// A tile kernel computes out[m0 .. m0+RM, n0 .. n0+RN]: RM rows of x against RN
// weight rows, every pair's accumulator in a register, over all of K:
//
//        weight rows n0 .. n0+RN  (a panel: read from memory once, then from L1)
//   x    +------+
//   rows | RMxRN| <- tile 0
//        | RMxRN| <- tile 1   (the panel is reused for every tile of x rows)
//        |  ... |
//
// Weight panels are the outer loop and threads take disjoint panel ranges, so each
// thread streams its own weights exactly once. With M <= kGemvMaxRows (decode) the
// whole of x is one tile and a panel is a single weight row, so each thread reads
// its weights strictly in address order, which keeps the hardware prefetcher
// streaming from DRAM (the GEMV path). Larger M sweeps tiles of x under panels of
// several rows (the GEMM path), where the panel is reused from cache.
//
// Internal linkage throughout: each including TU is compiled with its own ISA flags
// and must keep its own copy.
#pragma once

#include <algorithm>
#include <cstdint>

#include "matmul_kernels.h"

namespace vt::cpu::matmul {
namespace {

// Weight rows of one panel: row j is at w0 + j * stride bytes.
struct WeightPanel {
  const char* w0;
  int64_t stride;
  const char* Row(int j) const { return w0 + j * stride; }
};

// Calls Kernel::template Tile<rows, RN>(p, m0, n0, panel, extra...), turning the
// run-time row count (1 .. kMaxRows) into a template argument.
template <class Kernel, int kMaxRows, int RN, int kRows = 1, class... Extra>
void TileWithRows(int rows, const Problem& p, int64_t m0, int64_t n0, const WeightPanel& panel,
                  const Extra&... extra) {
  if constexpr (kRows <= kMaxRows) {
    if (rows == kRows) {
      Kernel::template Tile<kRows, RN>(p, m0, n0, panel, extra...);
    } else {
      TileWithRows<Kernel, kMaxRows, RN, kRows + 1>(rows, p, m0, n0, panel, extra...);
    }
  }
}

// All tiles of out[0..M, n0..n0+cols) for one panel of weight rows; cols == RN, or a
// remainder done one weight row at a time.
template <class Kernel, int kMaxRows, int RN>
void RunPanel(const Problem& p, int64_t n0, int64_t cols, const WeightPanel& panel) {
  for (int64_t m0 = 0; m0 < p.m; m0 += kMaxRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, p.m - m0));
    if (cols == RN) {
      TileWithRows<Kernel, kMaxRows, RN>(rows, p, m0, n0, panel);
    } else {
      for (int64_t c = 0; c < cols; ++c) {
        TileWithRows<Kernel, kMaxRows, 1>(rows, p, m0, n0 + c, {panel.Row(static_cast<int>(c)), panel.stride});
      }
    }
  }
}

// The GEMV path asks for the cache lines of the weight row kGemvPrefetchRows ahead
// before it walks this one, into L2 (prefetcht2). The hardware prefetcher alone left
// the block-format GEMVs at 0.5 of the DRAM read bandwidth on a 2-core Intel Xeon
// (AVX-512): the next row prefetched into L1 took the 0.8B decode shapes' Q8_0 and
// Q4_K GEMVs 15-33% faster (vt_bench BM_MatMulGemv, medians); f32 unchanged. On a
// later Xeon with AMX (2026-12-07) those L1 prefetches stalled the loop (58% of the
// decode's samples on the instruction after prefetcht0: the line fill buffers were
// full); into L2 and two rows ahead, the Q8_0 GEMVs of 4 decode shapes went from
// 0.54-0.58 of the DRAM read to 0.59-0.62 and Q4_K from 0.40-0.51 to 0.52-0.56 (two
// alternating runs of old and new library, vt_bench BM_MatMulGemv medians; one row
// ahead into L2 gained about half as much, four rows no more than two).
inline constexpr int64_t kGemvPrefetchRows = 2;

// Kernels that prefetch from inside their block loop (the AVX-512 Q8_0 and K-quant
// GEMVs) ask, every step, for the weight lines this many bytes ahead of the block they
// read (prefetcht0), a few lines a step rather than a row in a burst (a burst filled
// the line fill buffers and stalled the loads of the row being computed). On the
// 2-core Xeon VM with AMX (2026-12-08), a Q8_0 decode layer (6 GEMVs, 22.8 MB, huge
// pages, one stream), 3 runs each, prefetcht2: 1 KiB ahead 14.0-15.0 GB/s, 2 KiB
// 17.4-19.1, 3 KiB 17.6-19.2, 4 KiB 17.3-18.2, 8 KiB 17.2-18.9; prefetcht0 at 2 KiB
// 18.5-20.1; prefetchnta 8.9-9.5. With two streams (RunGemvInTwoStreams), 9 runs
// each over three alternating rounds: prefetcht0 20.3-26.9 (Q4_K layer 16.7-21.1),
// prefetcht2 21.1-24.1 (14.8-18.4).
inline constexpr int64_t kGemvPrefetchBytes = 2048;

// out[0..M, n_begin..n_end) with weights read in place.
template <class Kernel, int kMaxRows, int RN>
void RunTiles(const Problem& p, int64_t n_begin, int64_t n_end) {
  for (int64_t n0 = n_begin; n0 < n_end; n0 += RN) {
    if constexpr (RN == 1) {
      if (n0 + kGemvPrefetchRows < n_end) {
        const char* ahead = p.WeightRow(n0 + kGemvPrefetchRows);
        for (int64_t b = 0; b < p.w_row_bytes; b += 64) __builtin_prefetch(ahead + b, 0, 1);
      }
    }
    RunPanel<Kernel, kMaxRows, RN>(p, n0, std::min<int64_t>(RN, n_end - n0), {p.WeightRow(n0), p.w_row_bytes});
  }
}

// The GEMV path for kernels that prefetch inside their own loop (no row burst here):
// the rows n_begin .. n_end cut into two halves, a row of each in turn. Two streams
// keep two runs of the hardware prefetcher going where one row at a time had one;
// on the 2-core Xeon VM (AMX, 2026-12-08) a Q8_0 decode layer read 18.8-19.8 GB/s
// in one stream, 20.1-22.3 in two and 18.4-21.6 in four (3 runs each).
template <class Kernel>
void RunGemvInTwoStreams(const Problem& p, int64_t n_begin, int64_t n_end) {
  const int64_t half = (n_end - n_begin + 1) / 2;
  for (int64_t i = 0; i < half; ++i) {
    for (const int64_t n : {n_begin + i, n_begin + half + i}) {
      if (n < n_end) TileWithRows<Kernel, kGemvMaxRows, 1>(static_cast<int>(p.m), p, 0, n, {p.WeightRow(n), p.w_row_bytes});
    }
  }
}

// The GEMV path (M <= kGemvMaxRows: one tile of x rows per single weight row) or the
// GEMM path (RM x RN register tiles) of Kernel over out[0..M, n_begin..n_end).
template <class Kernel, int RM, int RN>
void RunGemvOrGemm(const Problem& p, int64_t n_begin, int64_t n_end) {
  if (p.m <= kGemvMaxRows) {
    RunTiles<Kernel, kGemvMaxRows, 1>(p, n_begin, n_end);
  } else {
    RunTiles<Kernel, RM, RN>(p, n_begin, n_end);
  }
}

}  // namespace
}  // namespace vt::cpu::matmul
