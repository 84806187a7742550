// Quantized GGUFs (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) written by our converter from an
// f32 HF folder: weights stay in their block format in memory, and dequantized they
// are within the format's error bound of the f32 originals. (Logits against the
// f32 model need the forward pass: the model tests add that.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "loader_test_util.h"
#include "testing/op_testing.h"
#include "vllm/model_loader/gdn_value_heads.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

// Largest error a block format allows for one value, from the block it sits in
// (`block` = the values sharing its scale; `super` = its 256-value super-block, which
// every tensor here has: rows are multiples of 256 values).
// Q8_0: d = amax/127 stored in f16 (relative error 2^-11): |x - f16(d) q| <= d/2 +
//   127 d 2^-11 < 0.57 d.
// Q4_0: d = -max/8 maps the largest magnitude to -8; the opposite extreme rounds to
//   16 and is clipped to 15, so the error is at most |d| (+ the f16 scale's 8|d|2^-11).
// K-quants: sub-block scales (and mins) are themselves quantized against the
//   super-block, so the step is bounded by the super-block's: amax / 2^(bits-1) for
//   Q6_K (symmetric; one step covers rounding plus the 8-bit scale). Q4_K / Q5_K pick
//   scale and min by a search that may clip an extreme value to lower the total
//   error, so allow 1.5 steps of (max - min) / (2^bits - 1) (measured: up to 1.2).
double ErrorBound(vt::DType dtype, const float* block, const float* super) {
  auto amax = [](const float* p, int n) {
    float m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(p[i]));
    return static_cast<double>(m);
  };
  auto range = [](const float* p, int n) {
    return static_cast<double>(*std::max_element(p, p + n) - *std::min_element(p, p + n));
  };
  switch (dtype) {
    case vt::DType::kQ8_0: return 0.57 * amax(block, 32) / 127;
    case vt::DType::kQ4_0: return 1.01 * amax(block, 32) / 8;
    case vt::DType::kQ4_K: return 1.5 * range(super, 256) / 15;
    case vt::DType::kQ5_K: return 1.5 * range(super, 256) / 31;
    case vt::DType::kQ6_K: return 1.01 * amax(super, 256) / 32;
    default: return 0;
  }
}

// `quantized` holds values of format `dtype` (still in blocks, or dequantized).
void ExpectWithinBound(const std::string& name, const vt::Tensor& original, const vt::Tensor& quantized,
                       vt::DType dtype) {
  const std::vector<float> x = original.Contiguous().ToFloatVector();
  const std::vector<float> q = quantized.ToFloatVector();
  ASSERT_EQ(x.size(), q.size());
  const size_t block = static_cast<size_t>(vt::Info(dtype).block_elems);
  double worst_ratio = 0, err2 = 0, ref2 = 0;
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    const double bound = ErrorBound(dtype, x.data() + b0, x.data() + b0 / 256 * 256) + 1e-12;
    for (size_t i = b0; i < b0 + block; ++i) {
      const double err = std::fabs(static_cast<double>(q[i]) - x[i]);
      worst_ratio = std::max(worst_ratio, err / bound);
      err2 += err * err;
      ref2 += static_cast<double>(x[i]) * x[i];
    }
  }
  EXPECT_LE(worst_ratio, 1.0) << name << " (" << vt::DTypeName(dtype) << "): worst error / bound";
  // And the typical error is what the format gives uniform values (about twice the
  // relative RMS measured here: q8_0 0.004, q6_k 0.013, q5_k 0.028, q4_k 0.056, q4_0 0.068).
  const double relative_rms = std::sqrt(err2 / ref2);
  const double rms_limit = dtype == vt::DType::kQ8_0   ? 0.01
                           : dtype == vt::DType::kQ6_K ? 0.03
                           : dtype == vt::DType::kQ5_K ? 0.06
                           : dtype == vt::DType::kQ4_K ? 0.12
                                                       : 0.14;
  EXPECT_LT(relative_rms, rms_limit) << name << " (" << vt::DTypeName(dtype) << ")";
}

struct QuantCase {
  GgufOutType outtype;
  vt::DType dtype;
};

class QuantizedGgufTest : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantizedGgufTest, WeightsStayQuantizedAndMatchTheF32Originals) {
  const QuantCase c = GetParam();
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::KQuantDenseDims());
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kF32, .seed = 3});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("q.gguf"), c.outtype);
  const LoadedModel hf = LoadHfFolder(dir.File("hf"));
  LoadedModel q = LoadGgufFile(dir.File("q.gguf"));
  EXPECT_EQ(q.config.dtype, c.dtype);
  EXPECT_EQ(GgufFile::Open(dir.File("q.gguf")).metadata().GetInt("general.quantization_version"), 2);
  for (const WeightSpec& spec : ModelWeightSpecs(q.config)) {
    const vt::Tensor& t = q.weights.Get(spec.name);
    if (IsExpandedToF32(spec.kind)) {
      EXPECT_EQ(t.dtype(), vt::DType::kF32) << spec.name;
      continue;
    }
    EXPECT_EQ(t.dtype(), c.dtype) << spec.name;  // kept in its block format
  }
  ConvertGdnToGroupedOrder(q);
  for (const WeightSpec& spec : ModelWeightSpecs(q.config)) {
    const vt::Tensor& t = q.weights.Get(spec.name);
    if (vt::IsQuantized(t.dtype())) ExpectWithinBound(spec.name, hf.weights.Get(spec.name), t, c.dtype);
  }
  // out_proj columns move in blocks of Dv = 64: whole Q8_0/Q4_0 blocks stay quantized,
  // 256-value K-quant blocks hold four heads and are dequantized to move (a row of
  // 256 values is one super-block in either order, so the bound still applies).
  const vt::Tensor& out_proj = q.weights.Get("layers.0.linear_attn.out_proj.weight");
  EXPECT_EQ(out_proj.dtype(), vt::Info(c.dtype).block_elems <= 64 ? c.dtype : vt::DType::kF32);
  ExpectWithinBound("out_proj in grouped order", hf.weights.Get("layers.0.linear_attn.out_proj.weight"), out_proj,
                    c.dtype);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedGgufTest,
                         ::testing::Values(QuantCase{GgufOutType::kQ8_0, vt::DType::kQ8_0},
                                           QuantCase{GgufOutType::kQ4_0, vt::DType::kQ4_0},
                                           QuantCase{GgufOutType::kQ4_K, vt::DType::kQ4_K},
                                           QuantCase{GgufOutType::kQ5_K, vt::DType::kQ5_K},
                                           QuantCase{GgufOutType::kQ6_K, vt::DType::kQ6_K}),
                         [](const auto& info) { return std::string(vt::DTypeName(info.param.dtype)); });

TEST(QuantizedGgufFallbackTest, RowsWithoutWholeBlocksFallBack) {
  // The dense dims: rows of 64 (hidden) and 96 (intermediate) values.
  testing::TempDir dir;
  testing::WriteHfFolder(dir.File("hf"), testing::DenseConfig(testing::DenseDims{}), {.dtype = vt::DType::kF32});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("k.gguf"), GgufOutType::kQ4_K);
  const LoadedModel m = LoadGgufFile(dir.File("k.gguf"));
  EXPECT_EQ(m.weights.Get("layers.0.mlp.gate_proj.weight").dtype(), vt::DType::kQ8_0);  // 64 % 256 != 0
  EXPECT_EQ(m.weights.Get("layers.0.mlp.down_proj.weight").dtype(), vt::DType::kQ8_0);  // 96 = 3 x 32
  testing::DenseDims odd;
  odd.intermediate_size = 40;
  testing::WriteHfFolder(dir.File("hf2"), testing::DenseConfig(odd), {.dtype = vt::DType::kF32});
  testing::WriteGgufFromHf(dir.File("hf2"), dir.File("q.gguf"), GgufOutType::kQ8_0);
  EXPECT_EQ(LoadGgufFile(dir.File("q.gguf")).weights.Get("layers.0.mlp.down_proj.weight").dtype(), vt::DType::kF16);
}

// Relative to the largest reference value: the quantized kernels may also quantize
// the activations (Q8 blocks), a ~1% effect; a wrong block layout is an O(1) error.
::testing::AssertionResult CloseToReference(const vt::Tensor& got, const vt::Tensor& reference) {
  const std::vector<float> a = got.ToFloatVector(), b = reference.ToFloatVector();
  float scale = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  if (worst <= 0.03f * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max error " << worst << " vs reference scale " << scale;
}

vt::Tensor Dequantized(const vt::Tensor& t) {
  vt::Tensor f = vt::Tensor::Empty(t.shape(), vt::DType::kF32);
  f.CopyFrom(t);
  return f;
}

TEST_P(QuantizedGgufTest, LoadedWeightsGoStraightIntoTheOps) {
  const QuantCase c = GetParam();
  const LoadedModel m = LoadGgufFile(testing::BuildDenseGguf(testing::KQuantDenseDims(), c.outtype));
  std::mt19937 rng(9);
  const vt::Tensor& w = m.weights.Get("layers.3.self_attn.q_proj.weight");  // [N, K] in blocks
  ASSERT_EQ(w.dtype(), c.dtype);
  const vt::Tensor x = vt::testing::RandomTensor({3, w.size(1)}, vt::DType::kF32, vt::kCpu, rng);
  vt::Tensor out = vt::Tensor::Empty({3, w.size(0)}, vt::DType::kF32), ref = vt::Tensor::Empty({3, w.size(0)}, vt::DType::kF32);
  vt::MatMul({.x = x, .w = w, .out = out});
  vt::MatMul({.x = x, .w = Dequantized(w), .out = ref});
  EXPECT_TRUE(CloseToReference(out, ref));

  const vt::Tensor& table = m.weights.Get("embed_tokens.weight");
  const vt::Tensor ids = vt::Tensor::FromVector(std::vector<int32_t>{0, 7, 63}, {3});
  vt::Tensor rows = vt::Tensor::Empty({3, table.size(1)}, vt::DType::kF32);
  vt::GatherRows({.table = table, .ids = ids, .out = rows});
  const vt::Tensor full = Dequantized(table);
  EXPECT_EQ(rows.Select(0, 1).ToFloatVector(), full.Select(0, 7).ToFloatVector());
  EXPECT_EQ(rows.Select(0, 2).ToFloatVector(), full.Select(0, 63).ToFloatVector());
}

// MoE experts as loaded (HF fused gate_up views with a free expert stride, GGUF Q8_0
// blocks) are accepted by vt::MoeExperts and compute what contiguous f32 copies do.
TEST(MoeWeightsTest, ExpertViewsAndBlocksFeedMoeExperts) {
  testing::TempDir dir;
  const ModelConfig config = testing::MoeConfig(testing::MoeDims{});
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kF32, .fused_experts = true});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("q.gguf"), GgufOutType::kQ8_0);
  const LoadedModel hf = LoadHfFolder(dir.File("hf"));
  const LoadedModel q = LoadGgufFile(dir.File("q.gguf"));
  std::mt19937 rng(4);
  const vt::Tensor x = vt::testing::RandomTensor({5, config.hidden_size}, vt::DType::kF32, vt::kCpu, rng);
  const vt::Tensor ids = vt::Tensor::FromVector(std::vector<int32_t>{0, 3, 1, 2, 2, 0, 3, 1, 1, 2}, {5, 2});
  const vt::Tensor weights = vt::testing::RandomTensor({5, 2}, vt::DType::kF32, vt::kCpu, rng, 0.1f, 1.0f);
  auto run = [&](const LoadedModel& m, bool contiguous) {
    auto get = [&](const char* name) {
      const vt::Tensor& t = m.weights.Get(std::string("layers.1.mlp.experts.") + name);
      return contiguous ? Dequantized(t) : t;
    };
    vt::Tensor out = vt::Tensor::Empty({5, config.hidden_size}, vt::DType::kF32);
    vt::MoeExperts({.x = x, .w_gate = get("gate_proj"), .w_up = get("up_proj"), .w_down = get("down_proj"),
                    .topk_weights = weights, .topk_ids = ids, .out = out});
    return out;
  };
  ASSERT_FALSE(hf.weights.Get("layers.1.mlp.experts.gate_proj").is_contiguous());
  const vt::Tensor reference = run(hf, true);
  EXPECT_EQ(run(hf, false).ToFloatVector(), reference.ToFloatVector());
  EXPECT_TRUE(CloseToReference(run(q, true), reference));  // Q8_0 weights, dequantized
  EXPECT_TRUE(CloseToReference(run(q, false), run(q, true)));
}

}  // namespace
}  // namespace vllm
