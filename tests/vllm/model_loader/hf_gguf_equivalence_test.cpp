// The same model as an HF folder and as the GGUF our converter writes from it:
// identical ModelConfig (but for the fields only one source has) and identical
// tensors once the GGUF's value heads are put back in grouped order. Dense (with
// Hv > Hk, so the tiled order matters), MoE (fused gate_up) and Qwen3, each in
// f32, f16 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "loader_test_util.h"
#include "vllm/model_loader/gdn_value_heads.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

bool SameBytes(const vt::Tensor& a, const vt::Tensor& b) {
  const vt::Tensor ca = a.Contiguous(), cb = b.Contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() &&
         std::memcmp(ca.data(), cb.data(), static_cast<size_t>(ca.nbytes())) == 0;
}

// Fields only one source has: the architecture string (HF class vs GGUF arch) and
// the value-head order flag (set for GGUF until ConvertGdnToGroupedOrder).
void ExpectSameConfig(ModelConfig hf, ModelConfig gguf) {
  EXPECT_EQ(gguf.architecture, GgufArchitectureName(hf.family));
  hf.architecture = gguf.architecture;
  EXPECT_TRUE(hf == gguf) << "HF:\n" << DescribeModelConfig(hf) << "GGUF:\n" << DescribeModelConfig(gguf);
}

// Zero-centred norms are stored as fl(w + 1) in f32 and loaded as fl(fl(w + 1) - 1).
// The subtraction is exact (Sterbenz: fl(w + 1) lies in [0.5, 2] for |w| <= 0.5), so
// the only error is the rounding of w + 1: |loaded - w| <= 2^-24 * |1 + w|. It is 0
// when w has no bits below 2^-23 (every bf16 or f16 w with |w| >= 2^-16 or 2^-13).
void ExpectNormWithinRounding(const std::string& name, const vt::Tensor& hf, const vt::Tensor& gguf, bool exact) {
  const std::vector<float> w = hf.ToFloatVector(), loaded = gguf.ToFloatVector();
  ASSERT_EQ(w.size(), loaded.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const double bound = std::ldexp(std::fabs(1.0 + w[i]), -24);
    EXPECT_LE(std::fabs(static_cast<double>(loaded[i]) - w[i]), bound) << name << "[" << i << "]";
    if (exact && std::fabs(w[i]) >= 0x1p-13f) {
      EXPECT_EQ(loaded[i], w[i]) << name << "[" << i << "]";
    }
  }
}

void ExpectEquivalent(const ModelConfig& config, vt::DType dtype, GgufOutType outtype) {
  testing::TempDir dir;
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = dtype, .seed = 11});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("m.gguf"), outtype);
  const LoadedModel hf = LoadHfFolder(dir.File("hf"));
  LoadedModel gguf = LoadGgufFile(dir.File("m.gguf"));
  EXPECT_EQ(gguf.config.gdn_tiled_value_heads, config.has_linear_attention());
  ConvertGdnToGroupedOrder(gguf);
  ExpectSameConfig(hf.config, gguf.config);
  ASSERT_EQ(hf.weights.size(), gguf.weights.size());
  for (const WeightSpec& spec : ModelWeightSpecs(hf.config)) {
    const vt::Tensor& a = hf.weights.Get(spec.name);
    const vt::Tensor& b = gguf.weights.Get(spec.name);
    if (spec.kind == WeightKind::kNorm && config.zero_centered_norms) {
      ExpectNormWithinRounding(spec.name, a, b, dtype != vt::DType::kF32);
    } else {
      EXPECT_TRUE(SameBytes(a, b)) << spec.name << ": " << a.Describe() << " vs " << b.Describe();
    }
  }
}

struct DtypeCase {
  vt::DType dtype;
  GgufOutType outtype;
};
constexpr DtypeCase kDtypes[] = {{vt::DType::kF32, GgufOutType::kF32},
                                 {vt::DType::kF16, GgufOutType::kF16},
                                 {vt::DType::kBF16, GgufOutType::kBF16}};

TEST(HfGgufEquivalenceTest, DenseWithMoreValueThanKeyHeads) {
  testing::DenseDims dims;
  dims.layer_types = {testing::kLinear, testing::kLinear, testing::kFull};
  dims.linear_num_key_heads = 2;
  dims.linear_num_value_heads = 6;
  dims.linear_key_head_dim = dims.linear_value_head_dim = 16;
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(vt::DTypeName(c.dtype));
    ExpectEquivalent(testing::DenseConfig(dims), c.dtype, c.outtype);
    ExpectEquivalent(testing::DenseConfig(dims, true), c.dtype, c.outtype);
  }
}

TEST(HfGgufEquivalenceTest, MoeWithFusedExperts) {
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(vt::DTypeName(c.dtype));
    ExpectEquivalent(testing::MoeConfig(testing::MoeDims{}), c.dtype, c.outtype);
  }
}

TEST(HfGgufEquivalenceTest, Qwen3) {
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(vt::DTypeName(c.dtype));
    ExpectEquivalent(testing::Qwen3Config(testing::Qwen3Dims{}), c.dtype, c.outtype);
    ExpectEquivalent(testing::Qwen3Config(testing::Qwen3Dims{}, true), c.dtype, c.outtype);
  }
}

TEST(HfGgufEquivalenceTest, TiledOrderDiffersUntilConverted) {
  testing::DenseDims dims;
  dims.layer_types = {testing::kLinear, testing::kFull};
  testing::TempDir dir;
  testing::WriteHfFolder(dir.File("hf"), testing::DenseConfig(dims), {.dtype = vt::DType::kF32});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("m.gguf"), GgufOutType::kF32);
  const LoadedModel hf = LoadHfFolder(dir.File("hf"));
  const LoadedModel gguf = LoadGgufFile(dir.File("m.gguf"));
  for (const char* name : {"layers.0.linear_attn.in_proj_z.weight", "layers.0.linear_attn.out_proj.weight",
                           "layers.0.linear_attn.A", "layers.0.linear_attn.in_proj_qkv.weight"}) {
    EXPECT_FALSE(SameBytes(hf.weights.Get(name), gguf.weights.Get(name))) << name;
  }
  // The q and k rows of in_proj_qkv are not value heads: untouched.
  const int64_t qk = 2 * dims.linear_num_key_heads * dims.linear_key_head_dim;
  EXPECT_TRUE(SameBytes(hf.weights.Get("layers.0.linear_attn.in_proj_qkv.weight").Slice(0, 0, qk),
                        gguf.weights.Get("layers.0.linear_attn.in_proj_qkv.weight").Slice(0, 0, qk)));
}

TEST(GdnValueHeadsTest, TiledIndexFollowsTheConverter) {
  // Hk = 2, r = 3: grouped [K0v0 K0v1 K0v2 K1v0 K1v1 K1v2] -> tiled [K0v0 K1v0 K0v1 K1v1 K0v2 K1v2].
  const std::vector<int64_t> expected = {0, 2, 4, 1, 3, 5};
  for (int64_t g = 0; g < 6; ++g) EXPECT_EQ(TiledIndexOfGroupedHead(g, 2, 6), expected[g]) << g;
}

}  // namespace
}  // namespace vllm
