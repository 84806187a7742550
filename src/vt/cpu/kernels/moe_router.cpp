// CPU kernel for MoeRouter: per token, p = softmax(logits) over the E experts in
// f32, then the k experts with the largest p (ties: the lower expert id first),
// their weights renormalised to sum to 1 when asked (Qwen3.5-MoE always asks).
//
// logits [T, E] (any float dtype, strided rows); topk_weights [T, k] f32 and
// topk_ids [T, k] i32, both contiguous. Ranking compares the f32 probabilities, as
// HF's torch.topk on the softmax output does. E is a few hundred at most, so a
// partial sort per token is cheap; tokens are split across threads.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

// p = softmax(row) in f32.
void Softmax(const char* row, DType dtype, int64_t n, float* p) {
  LoadRow(row, dtype, n, p);
  const float max_logit = *std::max_element(p, p + n);
  float sum = 0;
  for (int64_t e = 0; e < n; ++e) {
    p[e] = std::exp(p[e] - max_logit);
    sum += p[e];
  }
  for (int64_t e = 0; e < n; ++e) p[e] /= sum;
}

// NaN (from NaN logits) ranks last, so the ordering stays strict and weak.
float RankKey(float p) { return std::isnan(p) ? -1.0f : p; }

void MoeRouterCpu(const MoeRouterArgs& a) {
  const int64_t tokens = a.logits.size(0), experts = a.logits.size(1), k = a.topk_weights.size(1);
  float* weights = a.topk_weights.data_ptr<float>();
  int32_t* ids = a.topk_ids.data_ptr<int32_t>();
  ParallelFor(tokens, std::max<int64_t>(1, 2048 / experts), [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(experts));
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int64_t t = begin; t < end; ++t) {
      Softmax(ElementAddress(a.logits.data(), a.logits.dtype(), t * a.logits.stride(0)), a.logits.dtype(), experts,
              p.data());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t x, int32_t y) {
        return RankKey(p[x]) > RankKey(p[y]) || (RankKey(p[x]) == RankKey(p[y]) && x < y);
      });
      float kept = 0;
      for (int64_t j = 0; j < k; ++j) kept += p[order[j]];
      for (int64_t j = 0; j < k; ++j) {
        ids[t * k + j] = order[j];
        weights[t * k + j] = a.renormalize ? p[order[j]] / kept : p[order[j]];
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(MoeRouter, kCPU, MoeRouterCpu);

}  // namespace vt::cpu
