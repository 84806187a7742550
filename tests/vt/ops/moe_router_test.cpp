// Contract tests of vt::MoeRouter against a double-precision reference: softmax
// over the experts, the top k (ties: lower expert id first), renormalised or not;
// f32/bf16/f16 logits, strided rows, Qwen3.5-MoE sizes (256 experts, top 8), every
// device and CPU ISA level.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "testing/op_testing.h"
#include "vt/reach.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::ToInts;

struct Routing {
  std::vector<int64_t> ids;
  std::vector<double> weights;
};

Routing Reference(const Tensor& logits, int64_t k, bool renormalize) {
  const std::vector<double> x = ToDoubles(logits);
  const size_t experts = logits.size(1), tokens = logits.size(0);
  Routing r;
  for (size_t t = 0; t < tokens; ++t) {
    const double* row = &x[t * experts];
    const double max_logit = *std::max_element(row, row + experts);
    std::vector<double> p(experts);
    double sum = 0;
    for (size_t e = 0; e < experts; ++e) sum += p[e] = std::exp(row[e] - max_logit);
    for (double& v : p) v /= sum;
    std::vector<int64_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double kept = 0;
    for (int64_t j = 0; j < k; ++j) kept += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      r.ids.push_back(order[j]);
      r.weights.push_back(renormalize ? p[order[j]] / kept : p[order[j]]);
    }
  }
  return r;
}

// Tolerance 1e-6: f32 softmax of a few hundred terms (weights are at most 1).
// Random logits of distinct values are far enough apart that f32 and double rank
// them alike.
TEST(MoeRouterTest, MatchesReference) {
  std::mt19937 rng(91);
  struct Case {
    int64_t tokens, experts, k;
  };
  // GPUs: one warp per token up to 8 x warp-width experts (256 on CUDA), one block
  // per token above (300 and 512 experts on CUDA).
  const std::vector<Case> cases = {{1, 4, 1}, {5, 8, 2}, {9, 64, 4}, {6, 256, 8}, {3, 7, 7}, {2, 300, 8}, {11, 512, 10}};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Case& c : cases) {
        for (bool renormalize : {true, false}) {
          SCOPED_TRACE(std::string(DTypeName(dtype)) + " T " + std::to_string(c.tokens) + " E " +
                       std::to_string(c.experts) + " k " + std::to_string(c.k) + (renormalize ? " renorm" : ""));
          Tensor logits = testing::WithPaddedRows(RandomTensor({c.tokens, c.experts}, dtype, device, rng, -4.0f, 4.0f), 3);
          Tensor weights = Tensor::Empty({c.tokens, c.k}, DType::kF32, device);
          Tensor ids = Tensor::Empty({c.tokens, c.k}, DType::kI32, device);
          Poison(weights);
          Poison(ids);
          reach::Reset();
          MoeRouter({.logits = logits, .topk_weights = weights, .topk_ids = ids, .renormalize = renormalize});
          if (device.type == DeviceType::kCUDA) {
            const bool warp_rows = c.experts <= 256;
            EXPECT_EQ(reach::Count("MoeRouterGpu.warp_rows"), warp_rows ? 1u : 0u);
            EXPECT_EQ(reach::Count("MoeRouterGpu.block_rows"), warp_rows ? 0u : 1u);
          }
          const Routing ref = Reference(logits, c.k, renormalize);
          EXPECT_EQ(ToInts(ids), ref.ids);
          EXPECT_TRUE(AllClose(ref.weights, weights, 1e-6));
        }
      }
    }
  });
}

TEST(MoeRouterTest, TiesGoToTheLowerExpertId) {
  ForEachDeviceAndIsa([&](Device device) {
    // Row 0: all equal. Row 1: experts 1, 2 and 4 tie for the top.
    Tensor logits = Tensor::FromVector(std::vector<float>{0, 0, 0, 0, 0, 1, 3, 3, 2, 3}, {2, 5}).To(device);
    Tensor weights = Tensor::Empty({2, 2}, DType::kF32, device);
    Tensor ids = Tensor::Empty({2, 2}, DType::kI32, device);
    MoeRouter({.logits = logits, .topk_weights = weights, .topk_ids = ids, .renormalize = false});
    EXPECT_EQ(ToInts(ids), (std::vector<int64_t>{0, 1, 1, 2}));
    EXPECT_TRUE(AllClose({0.2, 0.2}, ToDoubles(weights.Select(0, 0)), 1e-6));
    MoeRouter({.logits = logits, .topk_weights = weights, .topk_ids = ids, .renormalize = true});
    EXPECT_EQ(ToInts(ids), (std::vector<int64_t>{0, 1, 1, 2}));
    EXPECT_TRUE(AllClose({0.5, 0.5, 0.5, 0.5}, weights, 1e-6));
  });
}

}  // namespace
}  // namespace vt
