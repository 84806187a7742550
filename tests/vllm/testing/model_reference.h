// The HF transformers reference data of tests/data/models/<name> (tools/oracle) and
// the logit comparisons the model tests make against it.
//
//   vllm::testing::ReferenceModel ref = vllm::testing::LoadReference("qwen35_moe");
//   ref.prompts[4].logits     // [100, vocab]: HF's full forward over prompt 4
//
// Error measure (LogitsError): each row of logits is one next-token distribution,
// and softmax is invariant to a shift of the row, so a row's error is judged against
// the row's own scale: rel(row) = max_v |got - ref| / max_v |ref|. A tensor's
// relative error is the worst row's. (A per-tensor max would let a large row hide a
// badly wrong small one; the logit std is ~2.5 and max|ref| per row ~6-12 here.)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/testing/engine_harness.h"

namespace vllm::testing {

struct ReferencePrompt {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;    // HF's greedy continuation (EOS disabled)
  std::vector<float> logits;          // [prompt_len, vocab]: HF's forward without cache
  std::vector<float> decode_logits;   // [greedy_len, vocab]: the rows generate() picked from
  int64_t prompt_len() const { return static_cast<int64_t>(prompt_ids.size()); }
  int64_t greedy_len() const { return static_cast<int64_t>(greedy_ids.size()); }
};

struct ReferenceModel {
  std::string name;       // "qwen35_moe"
  std::string hf_folder;  // tests/data/models/<name>/<hf subfolder>
  int64_t vocab_size = 0;
  std::vector<ReferencePrompt> prompts;  // lengths 1, 5, 17, 64, 100
};

// tests/data/models/<name>/reference.safetensors and the folder `hf_subfolder`
// ("hf", or "hf_fused" for the MoE's fused-expert copy).
ReferenceModel LoadReference(const std::string& name, const std::string& hf_subfolder = "hf");

// The reference models, and the HF subfolder of each variant: "name" or "name/hf_fused".
std::vector<std::string> ReferenceModelVariants();
// A variant as a test-name suffix ('/' is not allowed there): "qwen35_moe_hf_fused".
std::string VariantTestName(const std::string& variant);
ReferenceModel LoadReferenceVariant(const std::string& variant);

struct LogitsError {
  int64_t rows = 0;
  double max_abs = 0;     // max |got - ref| over every compared logit
  double max_rel = 0;     // max over rows of max|got - ref| / max|ref| of the row
  int64_t worst_row = -1;  // index (in Add order) of the row with max_rel
  int64_t argmax_mismatches = 0;

  // Compares `rows` rows of `vocab` logits (row-major); NaN in `got` counts as an
  // infinite error.
  void Add(const float* got, const float* ref, int64_t rows, int64_t vocab);
  void Merge(const LogitsError& other);
  std::string ToString() const;  // "rows 100, max abs 1.2e-06, max rel 2.3e-07 (row 17), argmax mismatches 0"
};

// A GenerateGreedy run against the reference: run.requests[r] ran prompt which[r].
struct RunErrors {
  LogitsError prompt, decode;
  int64_t greedy_mismatches = 0;  // requests whose output ids differ from HF's greedy ids
  void Merge(const RunErrors& other);
};
RunErrors CompareRun(const ReferenceModel& ref, const std::vector<int>& which, const GenerateResult& run);
// Two runs of the same prompts (e.g. a GGUF against its HF folder); `ref` is the reference side.
RunErrors CompareRuns(const GenerateResult& got, const GenerateResult& ref);

struct PromptLogitErrors {
  double rel_rms = 0;  // sqrt(sum (got - ref)^2 / sum ref^2) over every logit of every prompt position
  LogitsError rows;
};
// Prompt logits of `loaded` (all prompts in one batch, on the CPU, f32 activations
// unless `options` says otherwise) against ref_logits[i] [len_i, vocab] of prompt i.
PromptLogitErrors MeasurePromptLogits(const LoadedModel& loaded, const std::vector<std::vector<int32_t>>& prompts,
                                      const std::vector<const float*>& ref_logits, const HarnessOptions& options = {});

// Weights that are matrices (projections, embeddings, experts), the ones a GGUF
// outtype quantizes or casts.
bool IsMatrixKind(WeightKind kind);
// `model` with every matrix in `dtype` (cast, or dequantized for dtype f32).
LoadedModel WithMatricesIn(const LoadedModel& model, vt::DType dtype);
// `model` with each named matrix w replaced by f32 w + N(0, (rel_rms[name] * rms(w))^2).
LoadedModel WithMatrixNoise(const LoadedModel& model, const std::map<std::string, double>& rel_rms, uint32_t seed);
// rel_rms for every matrix of `model`: `level`.
std::map<std::string, double> UniformNoiseLevels(const LoadedModel& model, double level);

// Index of the largest value (first on ties).
int64_t Argmax(const float* row, int64_t n);
// Largest minus second largest value of a row.
double TopTwoGap(const float* row, int64_t n);

}  // namespace vllm::testing
