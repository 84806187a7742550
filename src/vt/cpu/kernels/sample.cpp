// CPU kernel of Sample: one token per row of logits x [R, V], greedy or drawn after
// min_p, top-k and top-p, with the counter-based noise of sample_noise.h (op_args.h
// states the contract; the GPU kernels in src/vt/gpu/sampling.cu give the same tokens).
//
// Per row, in f32 as the GPU: the candidates (allowed, not NaN), their maximum m, the
// threshold thr = max(m + T log(min_p), k-th largest value, top-p value), then the
// race argmax (x_i / T + Gumbel_i) over the candidates at or above thr. The k-th
// largest comes from nth_element, the top-p value from the candidates sorted by
// value. Rows are split across threads.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/sample_noise.h"

namespace vt::cpu {
namespace {

// A SampleRow's fields as the row's math uses them.
struct RowParams {
  float temperature;
  int32_t top_k;
  float top_p, min_p;
  uint64_t seed;
  int64_t offset;
  explicit RowParams(const SampleRow& r)
      : temperature(r.temperature),
        top_k(r.top_k),
        top_p(r.top_p),
        min_p(r.min_p),
        seed(r.Seed()),
        offset(r.Offset()) {}
};

// The index of the candidate with the largest key(i), the first on ties; 0 if none.
template <typename Key>
int32_t FirstLargest(const std::vector<int32_t>& candidates, const Key& key) {
  int32_t best = -1;
  float best_key = 0;
  for (int32_t i : candidates) {
    const float k = key(i);
    if (best < 0 || k > best_key) {
      best = i;
      best_key = k;
    }
  }
  return std::max(best, 0);
}

// The threshold of op_args.h's filters over the candidates' values (m: their maximum).
float KeepThreshold(const float* x, const std::vector<int32_t>& candidates, float m, const RowParams& p,
                    int64_t vocab) {
  float thr = -std::numeric_limits<float>::infinity();
  if (p.min_p > 0) thr = m + p.temperature * logf(p.min_p);
  std::vector<float> kept;
  kept.reserve(candidates.size());
  for (int32_t i : candidates) {
    if (x[i] >= thr) kept.push_back(x[i]);
  }
  if (p.top_k > 0 && p.top_k < vocab && static_cast<size_t>(p.top_k) < kept.size()) {
    std::nth_element(kept.begin(), kept.begin() + (p.top_k - 1), kept.end(), std::greater<float>());
    thr = std::max(thr, kept[p.top_k - 1]);
    std::erase_if(kept, [&](float v) { return v < thr; });
  }
  if (p.top_p < 1) {
    std::sort(kept.begin(), kept.end(), std::greater<float>());
    double total = 0;
    for (float v : kept) total += expf((v - m) / p.temperature);
    double mass = 0;
    for (float v : kept) {
      mass += expf((v - m) / p.temperature);
      if (mass >= p.top_p * total) {
        thr = std::max(thr, v);
        break;
      }
    }
  }
  return thr;
}

int32_t DrawRow(const float* x, int64_t vocab, const uint32_t* allowed, const RowParams& p) {
  std::vector<int32_t> candidates;
  candidates.reserve(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    if (allowed != nullptr && !((allowed[i >> 5] >> (i & 31)) & 1u)) continue;
    if (!std::isnan(x[i])) candidates.push_back(static_cast<int32_t>(i));
  }
  if (!(p.temperature > 0)) return FirstLargest(candidates, [&](int32_t i) { return x[i]; });
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i : candidates) m = std::max(m, x[i]);
  const float thr = KeepThreshold(x, candidates, m, p, vocab);
  std::erase_if(candidates, [&](int32_t i) { return x[i] < thr; });
  return FirstLargest(candidates, [&](int32_t i) {
    return x[i] / p.temperature + sample_noise::Gumbel(p.seed, p.offset, i);
  });
}

void SampleCpu(const SampleArgs& a) {
  reach::Hit("SampleCpu");
  const int64_t vocab = a.x.size(1);
  const auto* params = static_cast<const SampleRow*>(a.params.data());  // [R], contiguous
  int32_t* out = a.out.data_ptr<int32_t>();
  const auto* allowed = a.allowed.defined() ? static_cast<const uint32_t*>(a.allowed.data()) : nullptr;
  const int64_t words = a.allowed.defined() ? a.allowed.size(1) : 0;
  const DType dtype = a.x.dtype();
  const char* data = static_cast<const char*>(a.x.data());
  const Rows rows(a.x);
  ParallelFor(a.x.size(0), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(vocab));
    for (int64_t r = begin; r < end; ++r) {
      LoadRow(data + BytesFor(dtype, rows.Offset(r)), dtype, vocab, row.data());
      const RowParams p(params[r]);
      out[r] = DrawRow(row.data(), vocab, allowed ? allowed + r * words : nullptr, p);
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(Sample, kCPU, SampleCpu);

}  // namespace vt::cpu
