// AVX2 micro-kernels of the CPU PagedAttention (see paged_attention.h), for head
// dims that are a multiple of 8 (the plan routes the others to portable code).
//
// scores: blocks of up to 4 query rows x 2 positions (1-2 rows x 4 positions) keep
// up to 8 accumulators in registers, so each loaded (and converted) 8-element chunk
// of a key feeds several FMAs; the dot products are summed in one transposing tree. accumulate: for each 8-element chunk
// of the head dim, up to 4 accumulator rows stay in registers while the segment's
// values stream through, each value chunk loaded and converted once per block of
// rows. softmax_step: two 8-lane vectors (max, exp, sum) per row.
#include <cmath>

#include "paged_attention.h"
#include "vec_avx2.h"

namespace vt::cpu::paged_attention {
namespace {

using namespace avx2;

// Sums of 8 vectors in one vector, 7 adds' worth of shuffling instead of 8 full
// horizontal reductions. Lane 4 * H + k of the result holds the sum of source
// 2 * k + H (see SumLane).
inline __attribute__((always_inline)) __m256 ReduceEight(const __m256 (&v)[8]) {
  __m256 a[4];
  for (int i = 0; i < 4; ++i) {  // 128-bit half 0: source 2i, half 1: source 2i+1
    a[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  }
  // Half H of hadd(a0, a1): floats 0-1 from source H, 2-3 from source 2 + H.
  const __m256 b0 = _mm256_hadd_ps(a[0], a[1]), b1 = _mm256_hadd_ps(a[2], a[3]);
  return _mm256_hadd_ps(b0, b1);
}

// The lane of ReduceEight's result that holds source s.
constexpr int SumLane(int s) { return 4 * (s % 2) + s / 2; }

// Rows [0, RB) x positions [j, j + PB) of the segment; RB * PB <= 8.
// Locals rather than reads through `seg` in the loop: __m256 may alias anything, and
// a field read would pin the accumulators to memory. Each cache line of this
// block's values and of the next block's keys is prefetched into L1 while the keys
// are in use, so accumulate and the next block find them there.
template <typename T, int RB, int PB>
void ScoreBlock(const float* q, int64_t q_stride, const KvSegment& seg, int j, int64_t d, float* scores) {
  const int64_t k_step = seg.k_step, v_step = seg.v_step;
  const T* k = static_cast<const T*>(seg.k) + j * k_step;
  const T* v = static_cast<const T*>(seg.v) + j * v_step;
  const bool next_block = j + 2 * PB <= seg.len;
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; c += kLanes) {
    if (c * static_cast<int64_t>(sizeof(T)) % 64 == 0) {
      for (int p = 0; p < PB; ++p) {
        __builtin_prefetch(v + p * v_step + c, 0, 3);
        if (next_block) __builtin_prefetch(k + (PB + p) * k_step + c, 0, 3);
      }
    }
    __m256 kv[PB];
    for (int p = 0; p < PB; ++p) kv[p] = Load(k + p * k_step + c);
    for (int r = 0; r < RB; ++r) {
      const __m256 qv = _mm256_loadu_ps(q + r * q_stride + c);
      for (int p = 0; p < PB; ++p) acc[r * PB + p] = _mm256_fmadd_ps(qv, kv[p], acc[r * PB + p]);
    }
  }
  float sums[8];
  _mm256_storeu_ps(sums, ReduceEight(acc));
  for (int r = 0; r < RB; ++r) {
    for (int p = 0; p < PB; ++p) scores[r * kMaxSegment + j + p] = sums[SumLane(r * PB + p)];
  }
}

// Blocks of 8 / RB positions (at most 4, so the keys fit in registers too): with
// few rows each key chunk still feeds several FMAs.
template <typename T, int RB>
void ScoreRows(const float* q, int64_t q_stride, const KvSegment& seg, int64_t d, float* scores) {
  constexpr int kWide = RB <= 2 ? 4 : 2;
  int j = 0;
  for (; j + kWide <= seg.len; j += kWide) ScoreBlock<T, RB, kWide>(q, q_stride, seg, j, d, scores);
  if constexpr (kWide == 4) {
    if (j + 2 <= seg.len) {
      ScoreBlock<T, RB, 2>(q, q_stride, seg, j, d, scores);
      j += 2;
    }
  }
  if (j < seg.len) ScoreBlock<T, RB, 1>(q, q_stride, seg, j, d, scores);
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

float ReduceMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

float SoftmaxStep(float* s, int visible, float* m, float* l) {
  for (int j = visible; j < kMaxSegment; ++j) s[j] = -__builtin_inff();
  const __m256 x0 = _mm256_loadu_ps(s), x1 = _mm256_loadu_ps(s + 8);
  const float m_new = std::fmax(*m, ReduceMax(_mm256_max_ps(x0, x1)));
  const float rescale = m_new == *m ? 1.0f : std::exp(*m - m_new);
  const __m256 shift = _mm256_set1_ps(m_new);
  const __m256 p0 = Exp(_mm256_sub_ps(x0, shift)), p1 = Exp(_mm256_sub_ps(x1, shift));
  _mm256_storeu_ps(s, p0);
  _mm256_storeu_ps(s + 8, p1);
  *l = *l * rescale + ReduceAdd(_mm256_add_ps(p0, p1));
  *m = m_new;
  return rescale;
}

template <typename T, int RB>
void AccumulateRows(const float* p, const float* rescale, const KvSegment& seg, int64_t d, float* acc,
                    int64_t acc_stride) {
  const T* v = static_cast<const T*>(seg.v);
  for (int64_t c = 0; c < d; c += kLanes) {
    __m256 o[RB];
    for (int r = 0; r < RB; ++r) o[r] = _mm256_mul_ps(_mm256_loadu_ps(acc + r * acc_stride + c), _mm256_set1_ps(rescale[r]));
    for (int j = 0; j < seg.len; ++j) {
      const __m256 vj = Load(v + j * seg.v_step + c);
      for (int r = 0; r < RB; ++r) o[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[r * kMaxSegment + j]), vj, o[r]);
    }
    for (int r = 0; r < RB; ++r) _mm256_storeu_ps(acc + r * acc_stride + c, o[r]);
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
constexpr MicroKernels kKernels = {&Scores<T>, &SoftmaxStep, &Accumulate<T>, false};

}  // namespace

const MicroKernels& MicroKernelsAvx2(DType cache_dtype) {
  switch (cache_dtype) {
    case DType::kBF16: return kKernels<BFloat16>;
    case DType::kF16: return kKernels<Float16>;
    default: return kKernels<float>;
  }
}

}  // namespace vt::cpu::paged_attention
