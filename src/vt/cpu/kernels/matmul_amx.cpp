// MatMul, AVX-512 + AMX-BF16 variant: the GEMM path of block weights (M >=
// kAmxMinRows; matmul.cpp routes here only where HasAmxBf16()). out[M, N] = x[M, K] .
// w[N, K]^T, with x rounded to bf16 (XFormat::kBf16Tiles, as the AVX-512 bf16 panels
// round it) and each panel of 32 weight rows dequantized to bf16 once, then swept by
// every 32 rows of x.
//
// Tile roles (the weights are A, so a panel's rows load as they are written):
//   A  tmm4, tmm5  weight rows n0 .. n0+15 and n0+16 .. n0+31, 32 values of K: bf16 [16][32]
//   B  tmm6, tmm7  x rows m0 .. m0+15 and m0+16 .. m0+31, the same 32 values, as
//                  [16 value pairs][16 rows][2] (kBf16Tiles)
//   C  tmm0 .. 3   out^T f32 [16 weight rows][16 x rows] of (A i, B j) in tmm(2 i + j)
// TDPBF16PS: C[n][m] += sum over pairs p of A[n][2p] B[p][2m] + A[n][2p+1] B[p][2m+1],
// products exact in f32 (as vdpbf16ps). C is transposed in registers on the way out.
//
// Why it is fast: one TDPBF16PS is 16 x 16 x 32 multiply-adds (16 cycles a
// throughput on Sapphire Rapids: 512 a cycle, against vdpbf16ps's 32 a vector), and
// every tile loaded feeds two of them. The dequantization of Q8_0, Q4_0 and Q4_K
// panels is vectorized here (other formats: vt::DequantizeRow, then rounded), since
// with the products this cheap it is most of what remains.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "matmul_kernels.h"
#include "vt/quant.h"

namespace vt::cpu::matmul {
namespace {

constexpr int kTileRows = 16;  // rows of every tile
constexpr int kTileK = 32;     // bf16 values of K in a tile row (64 bytes)
static_assert(kAmxPanelRows == 2 * kTileRows, "a panel is the two A tiles");

// The 64-byte LDTILECFG operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// tmm0 .. tmm7, each 16 rows of 64 bytes. The configuration belongs to the calling
// thread; every call sets it and releases the tiles at the end.
void ConfigureTiles() {
  TileConfig config{};
  config.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = kTileRows;
  }
  _tile_loadconfig(&config);
}

// ---- weight rows as bf16 ------------------------------------------------------------

// 32 f32 values (lo: the first 16) as bf16, rounded to nearest even.
inline void StoreBf16x32(uint16_t* out, __m512 lo, __m512 hi) {
  _mm512_storeu_si512(out, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

inline __m512 BytesToF32(__m128i bytes, bool is_signed) {
  return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes));
}

void DequantizeQ8_0(const char* row, int64_t k, uint16_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(blocks[b].d));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs));
    StoreBf16x32(out + 32 * b, _mm512_mul_ps(BytesToF32(_mm256_castsi256_si128(q), true), d),
                 _mm512_mul_ps(BytesToF32(_mm256_extracti128_si256(q, 1), true), d));
  }
}

// Q4_0: byte j holds value j (low nibble) and value j + 16 (high nibble); x = d (q - 8).
void DequantizeQ4_0(const char* row, int64_t k, uint16_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(row);
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m512 eight = _mm512_set1_ps(8.0f);
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(blocks[b].d));
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
    const __m512 lo = _mm512_sub_ps(BytesToF32(_mm_and_si128(packed, mask), false), eight);
    const __m512 hi = _mm512_sub_ps(BytesToF32(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), false), eight);
    StoreBf16x32(out + 32 * b, _mm512_mul_ps(lo, d), _mm512_mul_ps(hi, d));
  }
}

// Q4_K: bytes 32g .. 32g+31 of qs hold sub-block 2g (low nibbles) and 2g + 1 (high);
// x = (d sc) q - dmin m per sub-block, as vt::DequantizeRow rounds it.
void DequantizeQ4_K(const char* row, int64_t k, uint16_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ4_K*>(row);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < k / 256; ++b, out += 256) {
    const BlockQ4_K& block = blocks[b];
    const float d = _cvtsh_ss(block.d), dmin = _cvtsh_ss(block.dmin);
    for (int g = 0; g < 4; ++g) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs + 32 * g));
      const __m256i nibbles[2] = {_mm256_and_si256(packed, mask), _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask)};
      for (int h = 0; h < 2; ++h) {
        int sc, m;
        UnpackQ4KScaleMin(block.scales, 2 * g + h, &sc, &m);
        const __m512 scale = _mm512_set1_ps(d * sc), min = _mm512_set1_ps(dmin * m);
        const __m512 lo = BytesToF32(_mm256_castsi256_si128(nibbles[h]), false);
        const __m512 hi = BytesToF32(_mm256_extracti128_si256(nibbles[h], 1), false);
        StoreBf16x32(out + 64 * g + 32 * h, _mm512_sub_ps(_mm512_mul_ps(lo, scale), min),
                     _mm512_sub_ps(_mm512_mul_ps(hi, scale), min));
      }
    }
  }
}

// Any other block format: the reference dequantization, then rounded.
void DequantizeAny(const char* row, DType dtype, int64_t k, uint16_t* out) {
  thread_local std::vector<float> values;
  values.resize(static_cast<size_t>(k));
  DequantizeRow(row, dtype, k, values.data());
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) StoreBf16x32(out + i, _mm512_loadu_ps(&values[i]), _mm512_loadu_ps(&values[i + 16]));
  for (; i < k; ++i) out[i] = F32ToBf16(values[i]);
}

// Weight rows n0 .. n0+rows of p as bf16 into panel [kAmxPanelRows][k_padded]; the
// values past K and the rows past `rows` are zeros.
void FillPanel(const Problem& p, int64_t n0, int rows, int64_t k_padded, uint16_t* panel) {
  for (int r = 0; r < kAmxPanelRows; ++r) {
    uint16_t* out = panel + r * k_padded;
    if (r >= rows) {
      std::memset(out, 0, static_cast<size_t>(k_padded) * 2);
      continue;
    }
    const char* w = p.WeightRow(n0 + r);
    switch (p.w_dtype) {
      case DType::kQ8_0: DequantizeQ8_0(w, p.k, out); break;
      case DType::kQ4_0: DequantizeQ4_0(w, p.k, out); break;
      case DType::kQ4_K: DequantizeQ4_K(w, p.k, out); break;
      default: DequantizeAny(w, p.w_dtype, p.k, out); break;
    }
    std::fill(out + p.k, out + k_padded, uint16_t{0});
  }
}

// ---- tiles --------------------------------------------------------------------------

// rows[n] -> rows[m]: the 16 x 16 f32 matrix in 16 vectors, transposed in registers
// (pairs of lanes, then pairs of pairs, then 128-bit quarters).
void Transpose16x16(__m512 (&r)[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // b[4i + c], quarter L: column 4L + c of rows 4i .. 4i+3.
  for (int i = 0; i < 4; ++i) {
    const __m512d lo0 = _mm512_castps_pd(a[4 * i]), lo1 = _mm512_castps_pd(a[4 * i + 2]);
    const __m512d hi0 = _mm512_castps_pd(a[4 * i + 1]), hi1 = _mm512_castps_pd(a[4 * i + 3]);
    b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 e0 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0x88), e1 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0xdd);
    const __m512 e2 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0x88);
    const __m512 e3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(e0, e2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(e1, e3, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(e0, e2, 0xdd);
    r[12 + c] = _mm512_shuffle_f32x4(e1, e3, 0xdd);
  }
}

// out[m0 .. m0+16, n0 .. n0+16) from a stored C tile c [16 weight rows][16 x rows],
// clipped to M and to n_end.
void StoreTransposed(const Problem& p, const float* c, int64_t m0, int64_t n0, int64_t n_end) {
  __m512 r[16];
  for (int n = 0; n < 16; ++n) r[n] = _mm512_load_ps(c + 16 * n);
  Transpose16x16(r);
  const int cols = static_cast<int>(std::min<int64_t>(16, n_end - n0));
  const int rows = static_cast<int>(std::min<int64_t>(16, p.m - m0));
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int m = 0; m < rows; ++m) {
    if (p.out_dtype == DType::kF32) {
      _mm512_mask_storeu_ps(static_cast<float*>(p.out) + (m0 + m) * p.out_stride + n0, mask, r[m]);
    } else {
      alignas(64) float values[16];
      _mm512_store_ps(values, r[m]);
      for (int n = 0; n < cols; ++n) p.Store(m0 + m, n0 + n, values[n]);
    }
  }
}

// The x rows of 16-row blocks mb .. mb+MB against the NB * 16 rows of a panel, over
// all of K; then out. Tile numbers must be immediates, hence the unrolled ifs.
template <int NB, int MB>
void PanelTimesRowBlocks(const Problem& p, const uint16_t* panel, int64_t k_padded, int64_t mb, int64_t n0,
                         int64_t n_end) {
  const int64_t num_steps = k_padded / kTileK;
  const uint16_t* x0 = p.x.bf16 + mb * num_steps * (kTileRows * kTileK);  // [num_steps][16 pairs][16][2]
  const uint16_t* x1 = x0 + num_steps * (kTileRows * kTileK);
  const uint16_t* w1 = panel + kTileRows * k_padded;
  const int w_stride = static_cast<int>(k_padded * 2), x_stride = 64;
  _tile_zero(0);
  if constexpr (MB == 2) _tile_zero(1);
  if constexpr (NB == 2) _tile_zero(2);
  if constexpr (NB == 2 && MB == 2) _tile_zero(3);
  for (int64_t s = 0; s < num_steps; ++s) {
    _tile_loadd(4, panel + s * kTileK, w_stride);
    _tile_loadd(6, x0 + s * (kTileRows * kTileK), x_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (MB == 2) {
      _tile_loadd(7, x1 + s * (kTileRows * kTileK), x_stride);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (NB == 2) {
      _tile_loadd(5, w1 + s * kTileK, w_stride);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (MB == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float c[4][kTileRows * 16];
  _tile_stored(0, c[0], 64);
  if constexpr (MB == 2) _tile_stored(1, c[1], 64);
  if constexpr (NB == 2) _tile_stored(2, c[2], 64);
  if constexpr (NB == 2 && MB == 2) _tile_stored(3, c[3], 64);
  for (int i = 0; i < NB; ++i) {
    for (int j = 0; j < MB; ++j) {
      const int64_t n = n0 + kTileRows * i;
      if (n < n_end) StoreTransposed(p, c[2 * i + j], (mb + j) * kTileRows, n, n_end);
    }
  }
}

template <int NB>
void PanelTimesX(const Problem& p, const uint16_t* panel, int64_t k_padded, int64_t n0, int64_t n_end) {
  const int64_t num_blocks = (p.m + kTileRows - 1) / kTileRows;
  int64_t mb = 0;
  for (; mb + 2 <= num_blocks; mb += 2) PanelTimesRowBlocks<NB, 2>(p, panel, k_padded, mb, n0, n_end);
  if (mb < num_blocks) PanelTimesRowBlocks<NB, 1>(p, panel, k_padded, mb, n0, n_end);
}

}  // namespace

void MatMulRowsAvx512Amx(const Problem& p, int64_t n_begin, int64_t n_end) {
  const int64_t k_padded = (p.k + kTileK - 1) / kTileK * kTileK;
  thread_local std::vector<uint16_t> panel;  // [kAmxPanelRows][k_padded] bf16
  panel.resize(static_cast<size_t>(kAmxPanelRows * k_padded));
  ConfigureTiles();
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kAmxPanelRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kAmxPanelRows, n_end - n0));
    FillPanel(p, n0, rows, k_padded, panel.data());
    if (rows > kTileRows) {
      PanelTimesX<2>(p, panel.data(), k_padded, n0, std::min(n_end, n0 + kAmxPanelRows));
    } else {
      PanelTimesX<1>(p, panel.data(), k_padded, n0, std::min(n_end, n0 + kAmxPanelRows));
    }
  }
  _tile_release();
}

}  // namespace vt::cpu::matmul
