// The reference models with bf16 activations and KV cache, against HF transformers'
// f32 logits and greedy paths, on every test device: cuda:0 on the GPU machine (the
// issue's acceptance run), and the CPU everywhere, so the test's own logic and the
// bf16 bound are checked on machines without a GPU. (hf_reference_test.cpp holds the
// f32 runs, at the CPU tolerance on every device.)
//
// Each prompt runs alone through the engine path (whole prompt in one step, then 24
// greedy decode steps). Rounding every op output to bf16 (8 mantissa bits) moves the
// logits by far more than f32 summation order does, and how much depends on each
// random-weight model's own sensitivity, so the bounds are taken from a control run
// of that model: f32 activations with every weight matrix perturbed by Gaussian
// noise of relative rms u = 2^-9 / sqrt(3), the rms error of one bf16 rounding (one
// rounding per matrix). The bf16 path rounds 2-3x as many tensors per layer, so its
// error should be a small multiple of the control's (the CPU runs measure 1.0-2.7x
// in rms, hf_reference_test.cpp); the bounds are 4x the control's:
//   prompt logits (every position, teacher-forced): rms relative error over all
//     logits <= 4 x control; per row, max |got - ref| <= B = 4 x the control's worst
//     row max |got - ref|;
//   decode logits: every row up to the first greedy divergence, max |got - ref| <= B;
//   greedy ids: identical to HF's, or, at the first divergence, HF's own top-1/top-2
//     gap at that step is below 2B (two logits each off by at most B can swap only
//     then): a bf16 near-tie, reported with the gap, the row's error and the rank of
//     the token taken in HF's row.
// On a GPU the test also checks that the run computed there: MatMul was dispatched
// on the device and not on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vllm/testing/engine_harness.h"
#include "vllm/testing/model_reference.h"
#include "vt/registry.h"

namespace vllm {
namespace {

using testing::HarnessOptions;
using testing::ReferenceModel;
using testing::ReferencePrompt;

constexpr int64_t kDecodeSteps = 24;
constexpr double kBoundOverControl = 4.0;
// The trained demo model rounds worse in bf16 activations, relative to one rounding of
// its weights, than the random-weight models: its trained norms give activations with
// outlier channels. Measured when it was added: prompt rms 3.4x the control (the others
// 1.0-2.7x), worst decode row 4.2x on the CPU and 3.3x on cuda:0 (an H200).
constexpr double kDemoBoundOverControl = 5.0;

struct Bounds {
  double rel_rms = 0;  // prompt logits, over everything
  double row_abs = 0;  // B: max |got - ref| in any row
};

struct LoadedReference {
  ReferenceModel ref;
  LoadedModel loaded;
  Bounds bounds;
};

// The control run (f32, matrices with one bf16 rounding's worth of noise) on the CPU.
Bounds ControlBounds(const LoadedReference& r) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<const float*> ref_logits;
  for (const ReferencePrompt& p : r.ref.prompts) {
    prompts.push_back(p.prompt_ids);
    ref_logits.push_back(p.logits.data());
  }
  const double u = std::ldexp(1.0, -9) / std::sqrt(3.0);
  const testing::PromptLogitErrors control = testing::MeasurePromptLogits(
      testing::WithMatrixNoise(r.loaded, testing::UniformNoiseLevels(r.loaded, u), 1), prompts, ref_logits);
  const double factor = r.ref.name == "demo" ? kDemoBoundOverControl : kBoundOverControl;
  return {factor * control.rel_rms, factor * control.rows.max_abs};
}

const LoadedReference& Reference(const std::string& variant) {
  static std::map<std::string, std::unique_ptr<LoadedReference>> cache;
  auto& slot = cache[variant];
  if (!slot) {
    slot = std::make_unique<LoadedReference>();
    slot->ref = testing::LoadReferenceVariant(variant);
    slot->loaded = LoadModel(slot->ref.hf_folder);
    slot->bounds = ControlBounds(*slot);
  }
  return *slot;
}

// Position of `token` in `row` sorted by descending logit (0 = the argmax).
int64_t RankOf(const float* row, int64_t vocab, int32_t token) {
  int64_t rank = 0;
  for (int64_t v = 0; v < vocab; ++v) rank += row[v] > row[token] ? 1 : 0;
  return rank;
}

double RowMaxAbs(const float* got, const float* ref, int64_t vocab) {
  double worst = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double d = std::isnan(got[v]) ? INFINITY : std::fabs(double{got[v]} - ref[v]);
    worst = std::max(worst, d);
  }
  return worst;
}

struct PromptOutcome {
  double prompt_sq_err = 0, prompt_sq_ref = 0, prompt_max_abs = 0;
  double decode_max_abs = 0;
  int64_t decode_rows = 0;
  std::string divergence;  // empty when the greedy ids are HF's
};

// Compares one prompt's run; EXPECTs the per-row and near-tie rules of the top comment.
PromptOutcome ComparePrompt(const ReferencePrompt& p, const testing::RequestTrace& t, int64_t vocab,
                            const Bounds& bounds) {
  PromptOutcome o;
  for (int64_t row = 0; row < p.prompt_len(); ++row) {
    const float* got = t.prompt_logits.data() + row * vocab;
    const float* ref = p.logits.data() + row * vocab;
    for (int64_t v = 0; v < vocab; ++v) {
      o.prompt_sq_err += (double{got[v]} - ref[v]) * (double{got[v]} - ref[v]);
      o.prompt_sq_ref += double{ref[v]} * ref[v];
    }
    o.prompt_max_abs = std::max(o.prompt_max_abs, RowMaxAbs(got, ref, vocab));
  }
  const int64_t steps = std::min<int64_t>(p.greedy_len(), static_cast<int64_t>(t.output_ids.size()));
  for (int64_t i = 0; i < steps; ++i) {
    const float* got = t.decode_logits.data() + i * vocab;
    const float* ref = p.decode_logits.data() + i * vocab;
    const double row_abs = RowMaxAbs(got, ref, vocab);
    o.decode_max_abs = std::max(o.decode_max_abs, row_abs);
    ++o.decode_rows;
    if (t.output_ids[i] == p.greedy_ids[i]) continue;
    const double gap = testing::TopTwoGap(ref, vocab);
    char text[256];
    std::snprintf(text, sizeof(text),
                  "diverged at decode step %lld: took %d (rank %lld in HF's row), HF took %d; HF top-1/top-2 gap %.4g, "
                  "2B %.4g, this row's max |got - ref| %.4g",
                  static_cast<long long>(i), t.output_ids[i], static_cast<long long>(RankOf(ref, vocab, t.output_ids[i])),
                  p.greedy_ids[i], gap, 2 * bounds.row_abs, row_abs);
    o.divergence = text;
    EXPECT_LT(gap, 2 * bounds.row_abs) << "a greedy divergence where HF's top two are not within the bf16 bound: "
                                       << text;
    break;  // later steps continue different sequences: nothing left to compare
  }
  return o;
}

class Bf16DeviceReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16DeviceReferenceTest, LogitsWithinTheBf16BoundAndGreedyIdsOrExplainedTies) {
  const LoadedReference& r = Reference(GetParam());
  const int64_t vocab = r.ref.vocab_size;
  for (vt::Device device : vt::testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    const HarnessOptions options{.device = device, .activation_dtype = vt::DType::kBF16};
    const std::unique_ptr<Model> model = testing::CreateModel(r.loaded, options);
    vt::Registry::Get().ResetDispatchCounts();
    PromptOutcome all;
    int64_t divergences = 0;
    for (size_t i = 0; i < r.ref.prompts.size(); ++i) {
      SCOPED_TRACE("prompt " + std::to_string(i));
      const ReferencePrompt& p = r.ref.prompts[i];
      const testing::GenerateResult run = testing::GenerateGreedy(*model, {p.prompt_ids}, kDecodeSteps, options);
      const PromptOutcome o = ComparePrompt(p, run.requests.at(0), vocab, r.bounds);
      all.prompt_sq_err += o.prompt_sq_err;
      all.prompt_sq_ref += o.prompt_sq_ref;
      all.prompt_max_abs = std::max(all.prompt_max_abs, o.prompt_max_abs);
      all.decode_max_abs = std::max(all.decode_max_abs, o.decode_max_abs);
      all.decode_rows += o.decode_rows;
      if (!o.divergence.empty()) {
        ++divergences;
        std::printf("[ bf16 tie ] %s %s prompt %zu: %s\n", GetParam().c_str(), device.ToString().c_str(), i,
                    o.divergence.c_str());
        RecordProperty(device.ToString() + "_prompt" + std::to_string(i) + "_divergence", o.divergence);
      }
    }
    const double rel_rms = std::sqrt(all.prompt_sq_err / all.prompt_sq_ref);
    std::printf("[ bf16 ] %s %s: prompt rel rms %.3g (bound %.3g), prompt max abs %.3g, decode max abs %.3g over %lld "
                "rows (B %.3g), greedy divergences %lld of %zu prompts\n",
                GetParam().c_str(), device.ToString().c_str(), rel_rms, r.bounds.rel_rms, all.prompt_max_abs,
                all.decode_max_abs, static_cast<long long>(all.decode_rows), r.bounds.row_abs,
                static_cast<long long>(divergences), r.ref.prompts.size());
    EXPECT_LE(rel_rms, r.bounds.rel_rms);
    EXPECT_LE(all.prompt_max_abs, r.bounds.row_abs);
    EXPECT_LE(all.decode_max_abs, r.bounds.row_abs);
    const std::string key = device.ToString() + "_bf16_";
    RecordProperty(key + "prompt_rel_rms", std::to_string(rel_rms));
    RecordProperty(key + "prompt_max_abs", std::to_string(all.prompt_max_abs));
    RecordProperty(key + "decode_max_abs", std::to_string(all.decode_max_abs));
    RecordProperty(key + "row_bound", std::to_string(r.bounds.row_abs));
    if (device.type != vt::DeviceType::kCPU) {
      EXPECT_GT(vt::Registry::Get().DispatchCount(vt::OpId::kMatMul, device.type), 0u);
      EXPECT_EQ(vt::Registry::Get().DispatchCount(vt::OpId::kMatMul, vt::DeviceType::kCPU), 0u)
          << "the device run computed on the CPU";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Bf16DeviceReferenceTest, ::testing::ValuesIn(testing::ReferenceModelVariants()),
                         [](const auto& info) { return testing::VariantTestName(info.param); });

}  // namespace
}  // namespace vllm
