// Portable micro-kernels of the CPU PagedAttention (see paged_attention.h): plain
// loops over f32 / bf16 / f16 cache rows, the path of CPUs without AVX2 and the
// fallback for head dims the vector paths do not take. Four partial sums per dot
// product keep the f32 rounding error small and let the compiler vectorise. Also
// the row permutation of MicroKernels::pairs_split.
#include <algorithm>
#include <cmath>
#include <limits>

#include "paged_attention.h"
#include "scalar_elems.h"

namespace vt::cpu::paged_attention {
namespace {

using portable::ToF32;

template <typename T>
float Dot(const float* q, const T* k, int64_t d) {
  float partial[4] = {};
  int64_t i = 0;
  for (; i + 4 <= d; i += 4) {
    for (int j = 0; j < 4; ++j) partial[j] += q[i + j] * ToF32(k[i + j]);
  }
  for (; i < d; ++i) partial[0] += q[i] * ToF32(k[i]);
  return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

template <typename T>
void Scores(const float* q, int64_t q_stride, int rows, const KvSegment& seg, int64_t d, float* scores) {
  const T* k = static_cast<const T*>(seg.k);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < seg.len; ++j) scores[r * kMaxSegment + j] = Dot(q + r * q_stride, k + j * seg.k_step, d);
  }
}

float SoftmaxStep(float* s, int visible, float* m, float* l) {
  const float m_new = std::max(*m, *std::max_element(s, s + visible));
  const float rescale = m_new == *m ? 1.0f : std::exp(*m - m_new);
  float sum = 0;
  for (int j = 0; j < visible; ++j) sum += s[j] = std::exp(s[j] - m_new);
  std::fill(s + visible, s + kMaxSegment, 0.0f);
  *l = *l * rescale + sum;
  *m = m_new;
  return rescale;
}

template <typename T>
void Accumulate(const float* p, const float* rescale, int rows, const KvSegment& seg, int64_t d, float* acc,
                int64_t acc_stride) {
  const T* v = static_cast<const T*>(seg.v);
  for (int r = 0; r < rows; ++r) {
    float* o = acc + r * acc_stride;
    for (int64_t i = 0; i < d; ++i) o[i] *= rescale[r];
    for (int j = 0; j < seg.len; ++j) {
      const float pj = p[r * kMaxSegment + j];
      const T* vj = v + j * seg.v_step;
      for (int64_t i = 0; i < d; ++i) o[i] += pj * ToF32(vj[i]);
    }
  }
}

template <typename T>
constexpr MicroKernels kKernels = {&Scores<T>, &SoftmaxStep, &Accumulate<T>, false};

}  // namespace

void SplitPairs(float* row, int64_t padded_dim) {
  float pairs[32];
  for (int64_t g = 0; g < padded_dim; g += 32) {
    std::copy(row + g, row + g + 32, pairs);
    for (int i = 0; i < 16; ++i) {
      row[g + i] = pairs[2 * i];
      row[g + 16 + i] = pairs[2 * i + 1];
    }
  }
}

void JoinPairs(float* row, int64_t padded_dim) {
  float split[32];
  for (int64_t g = 0; g < padded_dim; g += 32) {
    std::copy(row + g, row + g + 32, split);
    for (int i = 0; i < 16; ++i) {
      row[g + 2 * i] = split[i];
      row[g + 2 * i + 1] = split[16 + i];
    }
  }
}

const MicroKernels& MicroKernelsPortable(DType cache_dtype) {
  switch (cache_dtype) {
    case DType::kBF16: return kKernels<BFloat16>;
    case DType::kF16: return kKernels<Float16>;
    default: return kKernels<float>;
  }
}

}  // namespace vt::cpu::paged_attention
