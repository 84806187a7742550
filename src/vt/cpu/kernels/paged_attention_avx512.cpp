// AVX-512 micro-kernels of the CPU PagedAttention (see paged_attention.h).
//
// A cache row is consumed in chunks: 16 values for f32 / f16; 32 for bf16, loaded
// at once and split into their even and odd halves (see Chunks), so bf16 costs one
// instruction per 16 values to widen.
// scores: blocks of up to 4 query rows x 4 positions (1-2 rows x 8 positions) keep
// up to 16 accumulators in registers, so each loaded chunk of a key feeds several
// FMAs; the dot products are then summed in one transposing tree. While a block's
// keys are in use, its values and the next block's keys are prefetched into L1.
// accumulate: for each chunk of the head dim, up to 4 accumulator rows stay in
// registers while the segment's values stream through, each value chunk loaded
// once per block of rows and multiplied by a broadcast weight.
// softmax_step: one masked 16-lane pass (max, exp, sum) per row.
// Head-dim tails use masked loads (q and acc rows are zero-padded to kRowPad), so
// every head_dim takes this path.
#include <cmath>
#include <type_traits>

#include "paged_attention.h"
#include "vec_avx512.h"

namespace vt::cpu::paged_attention {
namespace {

using namespace avx512;

// Sums of 16 vectors in one vector: each step adds pairs of sources while halving
// the lanes each source occupies (512 -> 256 -> 128 -> 64 -> 32 bits), 15 adds in
// all instead of 16 full horizontal reductions. Lane 4 * L + k of the result holds
// the sum of source 4 * k + L (see SumLane).
inline __attribute__((always_inline)) __m512 ReduceSixteen(const __m512 (&v)[16]) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) {  // 128-bit lanes 0-1: source 2i, 2-3: source 2i+1
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lane L: source 4i + L
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
  }
  for (int i = 0; i < 2; ++i) {  // in lane L, floats 0, 2: source 8i + L; floats 1, 3: source 8i + 4 + L
    c[i] = _mm512_add_ps(_mm512_unpacklo_ps(b[2 * i], b[2 * i + 1]), _mm512_unpackhi_ps(b[2 * i], b[2 * i + 1]));
  }
  const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(c[0]), _mm512_castps_pd(c[1]));
  const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(c[0]), _mm512_castps_pd(c[1]));
  return _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
}

// The lane of ReduceSixteen's result that holds source s.
constexpr int SumLane(int s) { return 4 * (s % 4) + s / 4; }

// How a chunk of a cache row becomes f32 vectors. f32 / f16: 16 elements, one
// vector. bf16: 32 elements from one 64-byte load, split into the even and the odd
// elements by a shift and a mask (the upper half of each 32-bit pair already is an
// f32), so a conversion costs one instruction per 16 elements; q and acc rows are
// kept in the same even/odd order (MicroKernels::pairs_split).
template <typename T>
struct Chunks {
  static constexpr int kElems = 16, kParts = 1;
  using Mask = __mmask16;
  static Mask Tail(int64_t remaining) { return TailMask(remaining); }
  static void Load(const T* p, Mask m, bool full, __m512* out) { out[0] = full ? avx512::Load(p) : LoadMasked(p, m); }
};

template <>
struct Chunks<BFloat16> {
  static constexpr int kElems = 32, kParts = 2;
  using Mask = __mmask32;
  static Mask Tail(int64_t remaining) {
    return remaining >= 32 ? static_cast<Mask>(0xFFFFFFFFu) : static_cast<Mask>((1u << remaining) - 1u);
  }
  static void Load(const BFloat16* p, Mask m, bool full, __m512* out) {
    const __m512i w = full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(m, p);
    out[0] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    out[1] = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
};

// Rows [0, RB) x positions [j, j + PB) of the segment; RB * PB <= 16.
// acc[r * PB + p] += q_r . k_p over one chunk at c, full width or masked (the tail).
template <typename T, int RB, int PB, bool kTail>
inline __attribute__((always_inline)) void ScoreChunk(const float* q, int64_t q_stride, const T* k, int64_t k_step,
                                                      int64_t c, typename Chunks<T>::Mask m, __m512 (&acc)[16]) {
  using C = Chunks<T>;
  __m512 qv[RB][C::kParts];
  for (int r = 0; r < RB; ++r) {
    for (int part = 0; part < C::kParts; ++part) qv[r][part] = _mm512_loadu_ps(q + r * q_stride + c + part * kLanes);
  }
  for (int p = 0; p < PB; ++p) {
    __m512 kv[C::kParts];
    C::Load(k + p * k_step + c, m, !kTail, kv);
    for (int r = 0; r < RB; ++r) {
      for (int part = 0; part < C::kParts; ++part) acc[r * PB + p] = _mm512_fmadd_ps(qv[r][part], kv[part], acc[r * PB + p]);
    }
  }
}

// Locals rather than reads through `seg` in loops, and full-width chunks in a loop
// of their own: __m512 may alias anything, and either would pin the accumulators
// to memory. Each cache line of this block's values and of the next block's keys is
// prefetched into L1 while the keys are in use, so accumulate and the next block
// find them there.
template <typename T, int RB, int PB>
void ScoreBlock(const float* q, int64_t q_stride, const KvSegment& seg, int j, int64_t d, float* scores) {
  const int64_t k_step = seg.k_step, v_step = seg.v_step;
  const T* k = static_cast<const T*>(seg.k) + j * k_step;
  const T* v = static_cast<const T*>(seg.v) + j * v_step;
  const bool next_block = j + 2 * PB <= seg.len;
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  using C = Chunks<T>;
  int64_t c = 0;
  for (; c + C::kElems <= d; c += C::kElems) {
    if (c * static_cast<int64_t>(sizeof(T)) % 64 == 0) {
      for (int p = 0; p < PB; ++p) {
        __builtin_prefetch(v + p * v_step + c, 0, 3);
        if (next_block) __builtin_prefetch(k + (PB + p) * k_step + c, 0, 3);
      }
    }
    ScoreChunk<T, RB, PB, false>(q, q_stride, k, k_step, c, C::Tail(C::kElems), acc);
  }
  if (c < d) ScoreChunk<T, RB, PB, true>(q, q_stride, k, k_step, c, C::Tail(d - c), acc);
  float sums[16];
  _mm512_storeu_ps(sums, ReduceSixteen(acc));
  for (int r = 0; r < RB; ++r) {
    for (int p = 0; p < PB; ++p) scores[r * kMaxSegment + j + p] = sums[SumLane(r * PB + p)];
  }
}

// Blocks of 16 / RB positions (at most 8, so the keys fit in registers too): with
// few rows each key chunk still feeds many FMAs.
template <typename T, int RB>
void ScoreRows(const float* q, int64_t q_stride, const KvSegment& seg, int64_t d, float* scores) {
  constexpr int kWide = RB <= 2 ? 8 : 4;
  int j = 0;
  for (; j + kWide <= seg.len; j += kWide) ScoreBlock<T, RB, kWide>(q, q_stride, seg, j, d, scores);
  if constexpr (kWide == 8) {
    if (j + 4 <= seg.len) {
      ScoreBlock<T, RB, 4>(q, q_stride, seg, j, d, scores);
      j += 4;
    }
  }
  switch (seg.len - j) {
    case 3: ScoreBlock<T, RB, 3>(q, q_stride, seg, j, d, scores); break;
    case 2: ScoreBlock<T, RB, 2>(q, q_stride, seg, j, d, scores); break;
    case 1: ScoreBlock<T, RB, 1>(q, q_stride, seg, j, d, scores); break;
    default: break;
  }
}

template <typename T>
void Scores(const float* q, int64_t q_stride, int rows, const KvSegment& seg, int64_t d, float* scores) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) ScoreRows<T, 4>(q + r * q_stride, q_stride, seg, d, scores + r * kMaxSegment);
  const float* qr = q + r * q_stride;
  float* sr = scores + r * kMaxSegment;
  switch (rows - r) {
    case 3: ScoreRows<T, 3>(qr, q_stride, seg, d, sr); break;
    case 2: ScoreRows<T, 2>(qr, q_stride, seg, d, sr); break;
    case 1: ScoreRows<T, 1>(qr, q_stride, seg, d, sr); break;
    default: break;
  }
}

float SoftmaxStep(float* s, int visible, float* m, float* l) {
  const __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), TailMask(visible), s);
  const float m_new = std::fmax(*m, _mm512_reduce_max_ps(x));
  const float rescale = m_new == *m ? 1.0f : std::exp(*m - m_new);
  const __m512 p = Exp(_mm512_sub_ps(x, _mm512_set1_ps(m_new)));
  _mm512_storeu_ps(s, p);
  *l = *l * rescale + ReduceAdd(p);
  *m = m_new;
  return rescale;
}

template <typename T, int RB>
void AccumulateRows(const float* p, const float* rescale, const KvSegment& seg, int64_t d, float* acc,
                    int64_t acc_stride) {
  using C = Chunks<T>;
  const T* v = static_cast<const T*>(seg.v);
  const int64_t v_step = seg.v_step;
  const int len = seg.len;
  __m512 scale[RB];
  for (int r = 0; r < RB; ++r) scale[r] = _mm512_set1_ps(rescale[r]);
  for (int64_t c = 0; c < d; c += C::kElems) {
    const typename C::Mask m = C::Tail(d - c);
    __m512 o[RB][C::kParts];
    for (int r = 0; r < RB; ++r) {
      for (int part = 0; part < C::kParts; ++part) {
        o[r][part] = _mm512_mul_ps(_mm512_loadu_ps(acc + r * acc_stride + c + part * kLanes), scale[r]);
      }
    }
    for (int j = 0; j < len; ++j) {
      __m512 vj[C::kParts];
      C::Load(v + j * v_step + c, m, false, vj);
      for (int r = 0; r < RB; ++r) {
        const __m512 pj = _mm512_set1_ps(p[r * kMaxSegment + j]);
        for (int part = 0; part < C::kParts; ++part) o[r][part] = _mm512_fmadd_ps(pj, vj[part], o[r][part]);
      }
    }
    for (int r = 0; r < RB; ++r) {
      for (int part = 0; part < C::kParts; ++part) _mm512_storeu_ps(acc + r * acc_stride + c + part * kLanes, o[r][part]);
    }
  }
}

template <typename T>
void Accumulate(const float* p, const float* rescale, int rows, const KvSegment& seg, int64_t d, float* acc,
                int64_t acc_stride) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    AccumulateRows<T, 4>(p + r * kMaxSegment, rescale + r, seg, d, acc + r * acc_stride, acc_stride);
  }
  const float* pr = p + r * kMaxSegment;
  float* ar = acc + r * acc_stride;
  switch (rows - r) {
    case 3: AccumulateRows<T, 3>(pr, rescale + r, seg, d, ar, acc_stride); break;
    case 2: AccumulateRows<T, 2>(pr, rescale + r, seg, d, ar, acc_stride); break;
    case 1: AccumulateRows<T, 1>(pr, rescale + r, seg, d, ar, acc_stride); break;
    default: break;
  }
}

template <typename T>
constexpr MicroKernels kKernels = {&Scores<T>, &SoftmaxStep, &Accumulate<T>, std::is_same_v<T, BFloat16>};

}  // namespace

const MicroKernels& MicroKernelsAvx512(DType cache_dtype) {
  switch (cache_dtype) {
    case DType::kBF16: return kKernels<BFloat16>;
    case DType::kF16: return kKernels<Float16>;
    default: return kKernels<float>;
  }
}

}  // namespace vt::cpu::paged_attention
