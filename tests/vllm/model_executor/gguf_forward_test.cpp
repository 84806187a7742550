// The reference models converted to GGUF with the project's converter
// (ConvertHfToGguf, llama.cpp's layout: norms +1, ssm_a = -exp(A_log), GDN value
// heads tiled, ...) and run through the same engine path as their HF folders.
//
// Float outtypes (f32, f16, bf16): the GGUF must give the logits of the HF folder
// whose matrices were rounded to the same outtype, up to 1e-5 relative per row
// (what differs is f32 rounding: the loader recovers a norm weight w as
// (w + 1) - 1, off by up to 2^-24 of 1+w, and the tiled value-head order permutes
// GDN heads; the measured difference is ~1e-7). When the outtype loses nothing
// (f32, or the checkpoint's own bf16) the GGUF is also held to HF's references with
// the 1e-4 of hf_reference_test.cpp, greedy continuations included.
//
// Quantized outtypes: see QuantizedLogitsTrackTheWeightError.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "testing/op_testing.h"
#include "vllm/model_loader/gdn_value_heads.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/testing/engine_harness.h"
#include "vllm/testing/model_fixtures.h"
#include "vllm/testing/model_reference.h"
#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/registry.h"

namespace vllm {
namespace {

using testing::GenerateGreedy;
using testing::GenerateResult;
using testing::ReferenceModel;

constexpr double kSameWeightsRelTol = 1e-5;
constexpr double kHfRelTol = 1e-4;

std::vector<std::vector<int32_t>> AllPrompts(const ReferenceModel& ref) {
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : ref.prompts) prompts.push_back(p.prompt_ids);
  return prompts;
}

const std::vector<int> kAllPromptIndices = {0, 1, 2, 3, 4};

GenerateResult RunPrompts(const LoadedModel& loaded, const ReferenceModel& ref, int64_t max_tokens) {
  const std::unique_ptr<Model> model = testing::CreateModel(loaded, {});
  return GenerateGreedy(*model, AllPrompts(ref), max_tokens, {});
}


// Per matrix: the relative RMS error sqrt(sum (q - w)^2 / sum w^2) of the GGUF's
// values (dequantized) against the HF folder's, compared in the GGUF's head order.
std::map<std::string, double> MatrixRoundingErrors(const LoadedModel& gguf, const LoadedModel& hf) {
  WeightStore reference = hf.weights;
  if (gguf.config.gdn_tiled_value_heads) {
    ReorderGdnValueHeads(reference, hf.config, ValueHeadOrder::kGrouped, ValueHeadOrder::kTiled);
  }
  std::map<std::string, double> errors;
  for (const WeightSpec& spec : ModelWeightSpecs(hf.config)) {
    if (!testing::IsMatrixKind(spec.kind)) continue;
    const std::vector<float> q = gguf.weights.Get(spec.name).ToFloatVector();
    const std::vector<float> w = reference.Get(spec.name).ToFloatVector();
    double err = 0, norm = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      err += (double{q[i]} - w[i]) * (double{q[i]} - w[i]);
      norm += double{w[i]} * w[i];
    }
    errors[spec.name] = std::sqrt(err / norm);
  }
  return errors;
}

// Quantized outtypes cannot match HF to 1e-4: every weight is rounded to 8 (Q8_0)
// or ~4.5 (Q4_K) bits per block, and these random-weight models amplify weight
// errors 5-30x into their logits, so a fixed tolerance would say little. Three runs,
// each compared with the reference logits at every prompt position, separate the
// sources of error:
//   noise:   the HF weights plus Gaussian noise of each matrix's own rounding-error
//            RMS (the model's sensitivity to weight errors of that size);
//   dequant: the GGUF's weights dequantized to f32 (the file's rounding alone);
//   kernel:  the GGUF as users run it (quantized MatMul: integer dots against
//            activations quantized to 8 bits per block), once with each prompt in
//            one step (GEMM kernels) and once one token per step (GEMV kernels,
//            which may quantize activations differently).
// Requirements: dequant <= 2 x noise (the converter's rounding hurts no more than
// random noise of its size; misplaced blocks, wrong scales or a wrong head order
// would be far worse); kernel <= 2 x dequant on both paths (8-bit activations add
// an error of the weights' relative size, ~sqrt(2) in quadrature; measured
// 1.0-1.6x); the kernel's argmax differs from the reference's at no more than
// 2 x (noise run's) + 2 positions.
void ExpectQuantizedErrorsExplained(const LoadedModel& gguf, const LoadedModel& hf,
                                    const std::vector<std::vector<int32_t>>& prompts,
                                    const std::vector<const float*>& ref_logits, const std::string& key) {
  const std::map<std::string, double> rounding = MatrixRoundingErrors(gguf, hf);
  const testing::PromptLogitErrors noise =
      testing::MeasurePromptLogits(testing::WithMatrixNoise(hf, rounding, 7), prompts, ref_logits);
  const testing::PromptLogitErrors dequant =
      testing::MeasurePromptLogits(testing::WithMatricesIn(gguf, vt::DType::kF32), prompts, ref_logits);
  const testing::PromptLogitErrors kernel = testing::MeasurePromptLogits(gguf, prompts, ref_logits);
  const testing::PromptLogitErrors token_by_token =
      testing::MeasurePromptLogits(gguf, prompts, ref_logits, {.max_num_batched_tokens = 1});
  EXPECT_LE(dequant.rel_rms, 2 * noise.rel_rms) << "dequantized weights " << dequant.rows.ToString();
  EXPECT_LE(kernel.rel_rms, 2 * dequant.rel_rms) << "quantized kernels " << kernel.rows.ToString();
  EXPECT_LE(token_by_token.rel_rms, 2 * dequant.rel_rms) << "token by token " << token_by_token.rows.ToString();
  EXPECT_LE(kernel.rows.argmax_mismatches, 2 * noise.rows.argmax_mismatches + 2) << kernel.rows.ToString();
  const auto record = [&](const std::string& what, double value) {
    ::testing::Test::RecordProperty(key + "_" + what, std::to_string(value));
  };
  record("noise_rel_rms", noise.rel_rms);
  record("dequant_rel_rms", dequant.rel_rms);
  record("kernel_rel_rms", kernel.rel_rms);
  record("token_by_token_rel_rms", token_by_token.rel_rms);
  record("kernel_max_rel", kernel.rows.max_rel);
  record("kernel_argmax_agreement", 1.0 - static_cast<double>(kernel.rows.argmax_mismatches) / kernel.rows.rows);
  record("noise_argmax_agreement", 1.0 - static_cast<double>(noise.rows.argmax_mismatches) / noise.rows.rows);
}

class GgufForwardTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ref_ = testing::LoadReference(GetParam());
    hf_ = LoadModel(ref_.hf_folder);
  }
  // The HF folder converted with `outtype`, loaded back.
  LoadedModel Converted(GgufOutType outtype) const {
    const std::string path = dir_.File(GetParam() + "_" + GgufOutTypeName(outtype) + ".gguf");
    ConvertHfToGguf(ref_.hf_folder, path, {.outtype = outtype, .copy_tokenizer = false});
    LoadedModel gguf = LoadModel(path);
    EXPECT_EQ(gguf.format, CheckpointFormat::kGguf);
    EXPECT_EQ(gguf.config.gdn_tiled_value_heads, gguf.config.has_linear_attention());
    return gguf;
  }

  ReferenceModel ref_;
  LoadedModel hf_;
  testing::TempDir dir_;
};

TEST_P(GgufForwardTest, FloatOutTypesGiveTheLogitsOfTheirRoundedWeights) {
  const vt::DType checkpoint = hf_.config.dtype;
  for (GgufOutType outtype : {GgufOutType::kF32, GgufOutType::kF16, GgufOutType::kBF16}) {
    const vt::DType dtype = outtype == GgufOutType::kF32 ? vt::DType::kF32
                            : outtype == GgufOutType::kF16 ? vt::DType::kF16
                                                           : vt::DType::kBF16;
    SCOPED_TRACE(GgufOutTypeName(outtype));
    const LoadedModel gguf = Converted(outtype);
    const GenerateResult got = RunPrompts(gguf, ref_, 24);
    const bool lossless = dtype == vt::DType::kF32 || dtype == checkpoint;
    const GenerateResult same_weights = RunPrompts(testing::WithMatricesIn(hf_, dtype), ref_, 24);
    const testing::RunErrors e = testing::CompareRuns(got, same_weights);
    EXPECT_LE(e.prompt.max_rel, kSameWeightsRelTol) << e.prompt.ToString();
    EXPECT_LE(e.decode.max_rel, kSameWeightsRelTol) << e.decode.ToString();
    EXPECT_EQ(e.greedy_mismatches, 0);
    const testing::RunErrors hf = testing::CompareRun(ref_, kAllPromptIndices, got);
    ::testing::Test::RecordProperty(std::string(GgufOutTypeName(outtype)) + "_vs_hf_prompt_max_rel",
                                    std::to_string(hf.prompt.max_rel));
    if (lossless) {
      EXPECT_LE(hf.prompt.max_rel, kHfRelTol) << hf.prompt.ToString();
      EXPECT_LE(hf.decode.max_rel, kHfRelTol) << hf.decode.ToString();
      EXPECT_EQ(hf.greedy_mismatches, 0);
    }
  }
}

// GGUF keeps GDN value heads in the tiled order (value head j reads key head
// j % Hk); putting the same weights back in HF's grouped order and running the
// grouped GDN path must give the same logits.
TEST_P(GgufForwardTest, TiledValueHeadsMatchTheGroupedOrder) {
  LoadedModel tiled = Converted(GgufOutType::kF32);
  if (!tiled.config.has_linear_attention()) GTEST_SKIP() << "no GDN layers";
  LoadedModel grouped = tiled;
  ConvertGdnToGroupedOrder(grouped);
  ASSERT_FALSE(grouped.config.gdn_tiled_value_heads);
  const testing::RunErrors e = testing::CompareRuns(RunPrompts(tiled, ref_, 4), RunPrompts(grouped, ref_, 4));
  EXPECT_LE(e.prompt.max_rel, kSameWeightsRelTol) << e.prompt.ToString();
  EXPECT_EQ(e.greedy_mismatches, 0);
}

TEST_P(GgufForwardTest, QuantizedLogitsTrackTheWeightError) {
  std::vector<const float*> ref_logits;
  for (const auto& p : ref_.prompts) ref_logits.push_back(p.logits.data());
  ExpectQuantizedErrorsExplained(Converted(GgufOutType::kQ8_0), hf_, AllPrompts(ref_), ref_logits, "q8_0");
  // Q4_K needs rows of whole 256-value blocks; the converter stores the other
  // rows as Q8_0. Of these models only two have such rows (o_proj, out_proj).
  if (GetParam() == "qwen35_tied_realshapes" || GetParam() == "qwen3") {
    ExpectQuantizedErrorsExplained(Converted(GgufOutType::kQ4_K), hf_, AllPrompts(ref_), ref_logits, "q4_k");
  }
}

// Every matrix of this fixture (hidden 256, three GDN layers and one attention
// layer) has rows of whole 256-value blocks, so its Q4_K file is Q4_K throughout
// (and its Q8_0 and Q4_0 files are Q8_0 and Q4_0 throughout).
// No HF data exists for it: the reference is the engine's f32 run of its HF
// folder, which the tests above hold to HF.
TEST(GgufKQuantTest, FullyQuantizedModelsTrackTheWeightError) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::KQuantDenseDims());
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kF32, .seed = 3, .with_tokenizer = false});
  const LoadedModel hf = LoadModel(dir.File("hf"));
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size - 1));
  std::vector<std::vector<int32_t>> prompts = {std::vector<int32_t>(9), std::vector<int32_t>(70)};
  for (auto& p : prompts) {
    for (int32_t& id : p) id = token(rng);
  }
  const GenerateResult reference = GenerateGreedy(*testing::CreateModel(hf, {}), prompts, 1, {});
  const std::vector<const float*> ref_logits = {reference.requests[0].prompt_logits.data(),
                                                reference.requests[1].prompt_logits.data()};
  for (auto [outtype, dtype] : {std::pair{GgufOutType::kQ8_0, vt::DType::kQ8_0},
                                {GgufOutType::kQ4_0, vt::DType::kQ4_0},
                                {GgufOutType::kQ4_K, vt::DType::kQ4_K}}) {
    SCOPED_TRACE(GgufOutTypeName(outtype));
    const std::string path = dir.File(std::string(GgufOutTypeName(outtype)) + ".gguf");
    ConvertHfToGguf(dir.File("hf"), path, {.outtype = outtype, .copy_tokenizer = false});
    const LoadedModel gguf = LoadModel(path);
    for (const WeightSpec& spec : ModelWeightSpecs(gguf.config)) {
      if (!testing::IsMatrixKind(spec.kind)) continue;
      EXPECT_EQ(gguf.weights.Get(spec.name).dtype(), dtype) << spec.name;
    }
    ExpectQuantizedErrorsExplained(gguf, hf, prompts, ref_logits, GgufOutTypeName(outtype));
  }
}

// Issue 3's dense F16 fixture (hidden 64, vocab 32, 2 query heads, 1 KV head, head
// width 32, two full-attention layers) without qwen35.rope.dimension_count: the
// loader reads a rotary width of 0, so the model runs without rotation and RopeNeox
// is never dispatched; with the key present, every AttnBlock rotates q and k.
TEST(GgufFixtureTest, DenseF16WithoutRopeDimensionNeverRotates) {
  const std::vector<int32_t> prompt = {3, 17, 5, 29, 0, 11, 8, 21, 30, 2};
  for (bool omit_rope_dimension : {true, false}) {
    SCOPED_TRACE(omit_rope_dimension ? "rope.dimension_count omitted" : "rope.dimension_count present");
    const LoadedModel loaded =
        LoadModel(testing::BuildDenseF16Gguf(testing::DenseDims{}, false, omit_rope_dimension),
                  {.on_warning = [](const std::string&) {}});
    ASSERT_EQ(loaded.config.rotary_dim, omit_rope_dimension ? 0 : testing::DenseDims{}.rotary_dim);
    const std::unique_ptr<Model> model = testing::CreateModel(loaded, {});
    vt::Registry::Get().ResetDispatchCounts();
    vt::reach::Reset();
    const GenerateResult run = GenerateGreedy(*model, {prompt}, 4, {});
    EXPECT_EQ(vt::reach::Count("ModelRegistry::Forward"), 4u);
    EXPECT_EQ(vt::reach::Count("dense_attn::AttnBlock"), 4u * 2);
    EXPECT_EQ(vt::Registry::Get().DispatchCount(vt::OpId::kPagedAttention, vt::DeviceType::kCPU), 4u * 2);
    EXPECT_EQ(vt::Registry::Get().DispatchCount(vt::OpId::kRopeNeox, vt::DeviceType::kCPU),
              omit_rope_dimension ? 0u : 4u * 2 * 2);
    for (float v : run.requests[0].prompt_logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(run.requests[0].output_ids.size(), 4u);
  }
}

// The same recipe with the HF folder kept: the rotary-0 GGUF gives the logits of
// its HF folder run with rotary_dim 0 (and F16 matrices), not those with rotation.
TEST(GgufFixtureTest, RotaryWidthZeroMeansNoRotation) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{});
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kF32, .with_tokenizer = false});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("norope.gguf"), GgufOutType::kF16,
                           [](GgufWriter& w) { w.metadata().Remove("qwen35.rope.dimension_count"); });
  const LoadedModel gguf = LoadModel(dir.File("norope.gguf"), {.on_warning = [](const std::string&) {}});
  const LoadedModel rotating = testing::WithMatricesIn(LoadModel(dir.File("hf")), vt::DType::kF16);
  LoadedModel not_rotating = rotating;
  not_rotating.config.rotary_dim = 0;
  const std::vector<std::vector<int32_t>> prompts = {{3, 17, 5, 29, 0, 11, 8, 21, 30, 2, 9, 14}};
  const auto run = [&](const LoadedModel& m) { return GenerateGreedy(*testing::CreateModel(m, {}), prompts, 4, {}); };
  const GenerateResult got = run(gguf);
  const testing::RunErrors same = testing::CompareRuns(got, run(not_rotating));
  EXPECT_LE(same.prompt.max_rel, kSameWeightsRelTol) << same.prompt.ToString();
  EXPECT_EQ(same.greedy_mismatches, 0);
  EXPECT_GT(testing::CompareRuns(got, run(rotating)).prompt.max_rel, 1e-3) << "rotation should change the logits";
}

INSTANTIATE_TEST_SUITE_P(Models, GgufForwardTest,
                         ::testing::Values("qwen35_dense_untied", "qwen35_tied_realshapes", "qwen35_norope",
                                           "qwen35_moe", "qwen3", "qwen35_causallm", "demo"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace vllm
