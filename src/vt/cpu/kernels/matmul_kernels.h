// Internal interface of the MatMul CPU kernel (matmul.cpp): the problem as every
// variant sees it, with x already prepared in the input format that variant's dot
// products read, and the per-ISA entry points that compute a range of weight rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../cpu_util.h"
#include "vt/dtype.h"
#include "vt/op_args.h"

namespace vt::cpu::matmul {

// Up to this many rows of x take the GEMV path: a single register tile holds all of
// them, so each weight row is streamed from memory once, in order, and used for
// every row. Above it, the GEMM path reuses each cached panel of weight rows across
// tiles of x (see matmul_tiles.h).
inline constexpr int64_t kGemvMaxRows = 4;

// How x is handed to the dot products:
//   kF32:      f32 rows (float weights; every weight dtype on the portable path)
//   kBf16:     x as bf16 rows: bf16 x against bf16 weights (vdpbf16ps, exact), and
//              the AVX-512 GEMM path of block weights, whose panels are dequantized
//              to bf16 (x rounded to bf16 there: the weights' rounding is coarser)
//   kQ8x32:    per 32 values int8 q, f32 d and int32 sum(q): Q4_0 / Q8_0 weights
//   kQ8x256:   per 256 values int8 q, f32 d and int16 sums of 16 q: K-quant weights
//   kBf16Tiles: bf16 x laid out as AMX B tiles (the AMX GEMM of block weights): per
//              16 rows (the last block padded with zero rows) and per 32 values of K
//              (zero-padded), the rows' value pairs as [16 pairs][16 rows][2], so
//              [ceil(M / 16)][ceil(K / 32)][16][16][2] bf16 in all, in `bf16`
enum class XFormat { kF32, kBf16, kQ8x32, kQ8x256, kBf16Tiles };

struct PreparedX {
  PreparedX() = default;
  PreparedX(PreparedX&&) = default;  // the pointers below stay valid: vectors move their buffers
  PreparedX& operator=(PreparedX&&) = default;
  PreparedX(const PreparedX&) = delete;

  XFormat format = XFormat::kF32;
  const float* f32 = nullptr;  // kF32: [M, f32_stride], x itself when it is f32 with unit stride
  int64_t f32_stride = 0;
  const uint16_t* bf16 = nullptr;  // kBf16: [M, K]; kBf16Tiles: see XFormat
  const int8_t* q = nullptr;       // kQ8x32 / kQ8x256: [M, K]
  const float* d = nullptr;        // [M, K / block]
  const int32_t* sums = nullptr;   // kQ8x32: [M, K / 32]
  const int16_t* bsums = nullptr;  // kQ8x256: [M, K / 16]

  std::vector<float> f32_storage;
  std::vector<uint16_t> bf16_storage;
  std::vector<int8_t> q_storage;
  std::vector<float> d_storage;
  std::vector<int32_t> sums_storage;
  std::vector<int16_t> bsums_storage;
};

struct Problem {
  int64_t m, n, k;
  DType w_dtype;
  const char* w;        // weight row 0
  int64_t w_row_bytes;  // bytes between consecutive weight rows
  PreparedX x;
  void* out;  // [M, N] with row stride out_stride (elements), dtype out_dtype
  int64_t out_stride;
  DType out_dtype;

  const char* WeightRow(int64_t row) const { return w + row * w_row_bytes; }
  void Store(int64_t row, int64_t col, float value) const { StoreFloat(out, out_dtype, row * out_stride + col, value); }
};

// Converters of one f32 row of x (K values) into the 8-bit and bf16-pair formats;
// each variant brings its own (vectorised) set. q8x32 also writes sum(q) per block,
// q8x256 the sums of each 16 q; bf16 rounds to nearest even.
struct XRowOps {
  void (*q8x32)(const float* x, int64_t k, int8_t* q, float* d, int32_t* sums);
  void (*q8x256)(const float* x, int64_t k, int8_t* q, float* d, int16_t* bsums);
  void (*bf16)(const float* x, int64_t k, uint16_t* out);
};
XRowOps PortableXRowOps();
XRowOps Avx2XRowOps();
XRowOps Avx512XRowOps();

// Converts or quantizes x [M, K] (float dtype, rows strided by x_stride elements)
// into `format` with `ops`, in parallel over rows.
void PrepareX(const void* x, DType x_dtype, int64_t x_stride, int64_t m, int64_t k, XFormat format, const XRowOps& ops,
              PreparedX* out);

// Each computes out[0..M, n_begin..n_end) for every weight dtype MatMul accepts
// (AVX-512: block types only with VNNI, bf16 only with AVX512_BF16; matmul.cpp
// routes the others to AVX2; Avx2Vnni: block types only, x as Avx2XRowOps makes it).
// Safe to call concurrently on disjoint ranges.
void MatMulRowsPortable(const Problem& p, int64_t n_begin, int64_t n_end);
void MatMulRowsAvx2(const Problem& p, int64_t n_begin, int64_t n_end);
void MatMulRowsAvx2Vnni(const Problem& p, int64_t n_begin, int64_t n_end);
void MatMulRowsAvx512(const Problem& p, int64_t n_begin, int64_t n_end);
// aarch64 with the dot-product extension: Q8_0 and Q4_0 weights, x as kQ8x32
// (matmul_neon.cpp, built for aarch64 only).
void MatMulRowsNeonDotprod(const Problem& p, int64_t n_begin, int64_t n_end);
// AVX-512 with AMX-BF16: the GEMM path of block weights, x as kBf16Tiles
// (matmul_amx.cpp). n_begin and n_end may fall anywhere, but ranges of whole
// kAmxPanelRows fill its tiles.
void MatMulRowsAvx512Amx(const Problem& p, int64_t n_begin, int64_t n_end);

// From this many rows of x, block weights on AVX-512 with BF16 take the bf16 GEMM:
// each weight panel is dequantized once (about 0.2 ns per value) and then feeds
// vdpbf16ps, which does twice the multiply-adds per instruction of the integer
// tiles once their per-block scaling is counted. Below it the dequantization would
// cost more than it saves.
inline constexpr int64_t kBf16PanelMinRows = 32;

// From this many rows of x, block weights take the AMX GEMM where the CPU has
// AMX-BF16 (HasAmxBf16): panels of kAmxPanelRows weight rows dequantized to bf16 once,
// against x in AMX tile layout. vt_bench BM_MatMulIsa, mlp_gate_up, 2 threads, Xeon
// with AMX: at 32 rows 3.3-3.4x the AVX-512 int8 tiles (q8_0, q4_k); at 8 rows q8_0
// 391 us against 429, but q4_k 452 against 317 (dequantizing its panels costs more
// than the tiles save), so not below 16.
inline constexpr int64_t kAmxMinRows = 16;
inline constexpr int64_t kAmxPanelRows = 32;

// Weight rows per work item, so parallel chunks start on a register-tile boundary
// (the AMX GEMM: on a panel boundary, kAmxPanelRows).
inline constexpr int64_t kRowsPerWorkItem = 8;

// A MatMul ready to run: x prepared for the chosen variant, and that variant's row
// function. Work items are rows_per_item weight rows each; disjoint items may run
// on any threads.
struct PreparedMatMul {
  Problem problem;
  void (*rows)(const Problem& p, int64_t n_begin, int64_t n_end);
  int64_t rows_per_item = kRowsPerWorkItem;

  int64_t num_items() const { return (problem.n + rows_per_item - 1) / rows_per_item; }
  void RunItems(int64_t begin, int64_t end) const {
    rows(problem, begin * rows_per_item, std::min(problem.n, end * rows_per_item));
  }
};

// Chooses the variant for ActiveIsa(), prepares x and counts the reach hit
// "MatMulCpu.<w dtype>.<gemv|gemm>.<variant>". args must satisfy MatMulArgs (the op
// layer has refused q8_k weights).
PreparedMatMul PrepareMatMul(const MatMulArgs& args);

// Runs all work items of several prepared MatMuls in one parallel region (fewer
// thread hand-offs than one region each, which matters for decode-sized MatMuls).
void RunPreparedMatMuls(const std::vector<PreparedMatMul>& matmuls);

// The registered CPU kernel of MatMul (args as validated by vt::MatMul).
void MatMulCpu(const MatMulArgs& args);

}  // namespace vt::cpu::matmul
