#include "model_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "vllm/model_loader/safetensors.h"
#include "vt/error.h"

namespace vllm::testing {
namespace {

constexpr int kNumPrompts = 5;

std::string ModelsDir() { return std::string(VT_TEST_DATA_DIR) + "/models"; }

// tests/data/models/<name>, except the demo model, which ships in models/demo.
std::string ModelDir(const std::string& name) {
  return name == "demo" ? std::string(VLLM_DEMO_MODEL_DIR) : ModelsDir() + "/" + name;
}

template <typename T>
std::vector<T> ReadAll(const SafetensorsFile& file, const std::string& name, vt::DType dtype, vt::Shape* shape) {
  const SafetensorsTensorInfo* info = file.FindTensor(name);
  if (info == nullptr || info->dtype != dtype) {
    throw vt::Error(file.path() + ": missing tensor '" + name + "' of dtype " + vt::DTypeName(dtype));
  }
  const vt::Tensor t = file.Tensor(*info);
  if (shape != nullptr) *shape = t.shape();
  std::vector<T> values(static_cast<size_t>(t.numel()));
  std::memcpy(values.data(), t.data(), values.size() * sizeof(T));
  return values;
}

}  // namespace

ReferenceModel LoadReference(const std::string& name, const std::string& hf_subfolder) {
  const std::string dir = ModelDir(name);
  const SafetensorsFile file = SafetensorsFile::Open(dir + "/reference.safetensors");
  ReferenceModel model;
  model.name = name;
  model.hf_folder = dir + "/" + hf_subfolder;
  for (int i = 0; i < kNumPrompts; ++i) {
    const std::string suffix = "." + std::to_string(i);
    ReferencePrompt p;
    vt::Shape shape;
    p.prompt_ids = ReadAll<int32_t>(file, "prompt_ids" + suffix, vt::DType::kI32, nullptr);
    p.greedy_ids = ReadAll<int32_t>(file, "greedy_ids" + suffix, vt::DType::kI32, nullptr);
    p.logits = ReadAll<float>(file, "logits" + suffix, vt::DType::kF32, &shape);
    model.vocab_size = shape.at(1);
    p.decode_logits = ReadAll<float>(file, "decode_logits" + suffix, vt::DType::kF32, nullptr);
    model.prompts.push_back(std::move(p));
  }
  return model;
}

std::string VariantTestName(const std::string& variant) {
  std::string name = variant;
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

std::vector<std::string> ReferenceModelVariants() {
  return {"qwen35_dense_untied", "qwen35_tied_realshapes", "qwen35_norope", "qwen35_moe",
          "qwen35_moe/hf_fused",  "qwen3",                  "qwen35_causallm",       "demo"};
}

ReferenceModel LoadReferenceVariant(const std::string& variant) {
  const size_t slash = variant.find('/');
  if (slash == std::string::npos) return LoadReference(variant);
  return LoadReference(variant.substr(0, slash), variant.substr(slash + 1));
}

void LogitsError::Add(const float* got, const float* ref, int64_t num_rows, int64_t vocab) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* g = got + r * vocab;
    const float* x = ref + r * vocab;
    double row_abs = 0, row_scale = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double d = std::isnan(g[v]) ? std::numeric_limits<double>::infinity() : std::fabs(double{g[v]} - x[v]);
      row_abs = std::max(row_abs, d);
      row_scale = std::max(row_scale, std::fabs(double{x[v]}));
    }
    const double rel = row_abs / std::max(row_scale, 1e-30);
    max_abs = std::max(max_abs, row_abs);
    if (rel > max_rel || worst_row < 0) {
      max_rel = std::max(max_rel, rel);
      worst_row = rows + r;
    }
    if (Argmax(g, vocab) != Argmax(x, vocab)) ++argmax_mismatches;
  }
  rows += num_rows;
}

void LogitsError::Merge(const LogitsError& other) {
  if (other.rows > 0 && (worst_row < 0 || other.max_rel > max_rel)) worst_row = rows + other.worst_row;
  max_rel = std::max(max_rel, other.max_rel);
  max_abs = std::max(max_abs, other.max_abs);
  argmax_mismatches += other.argmax_mismatches;
  rows += other.rows;
}

std::string LogitsError::ToString() const {
  char text[160];
  std::snprintf(text, sizeof(text), "rows %lld, max abs %.3g, max rel %.3g (row %lld), argmax mismatches %lld",
                static_cast<long long>(rows), max_abs, max_rel, static_cast<long long>(worst_row),
                static_cast<long long>(argmax_mismatches));
  return text;
}

void RunErrors::Merge(const RunErrors& other) {
  prompt.Merge(other.prompt);
  decode.Merge(other.decode);
  greedy_mismatches += other.greedy_mismatches;
}

RunErrors CompareRun(const ReferenceModel& ref, const std::vector<int>& which, const GenerateResult& run) {
  RunErrors e;
  const int64_t V = ref.vocab_size;
  for (size_t r = 0; r < which.size(); ++r) {
    const ReferencePrompt& p = ref.prompts.at(which[r]);
    const RequestTrace& t = run.requests.at(r);
    e.prompt.Add(t.prompt_logits.data(), p.logits.data(), p.prompt_len(), V);
    const int64_t decoded = std::min<int64_t>(p.greedy_len(), static_cast<int64_t>(t.output_ids.size()));
    e.decode.Add(t.decode_logits.data(), p.decode_logits.data(), decoded, V);
    if (t.output_ids != p.greedy_ids) ++e.greedy_mismatches;
  }
  return e;
}

RunErrors CompareRuns(const GenerateResult& got, const GenerateResult& ref) {
  RunErrors e;
  for (size_t r = 0; r < ref.requests.size(); ++r) {
    const RequestTrace& g = got.requests.at(r);
    const RequestTrace& x = ref.requests.at(r);
    const int64_t V = static_cast<int64_t>(x.prompt_logits.size() / x.prompt_ids.size());
    e.prompt.Add(g.prompt_logits.data(), x.prompt_logits.data(), static_cast<int64_t>(x.prompt_ids.size()), V);
    e.decode.Add(g.decode_logits.data(), x.decode_logits.data(), static_cast<int64_t>(x.output_ids.size()), V);
    if (g.output_ids != x.output_ids) ++e.greedy_mismatches;
  }
  return e;
}

PromptLogitErrors MeasurePromptLogits(const LoadedModel& loaded, const std::vector<std::vector<int32_t>>& prompts,
                                      const std::vector<const float*>& ref_logits, const HarnessOptions& options) {
  const std::unique_ptr<Model> model = CreateModel(loaded, options);
  const GenerateResult run = GenerateGreedy(*model, prompts, 1, options);
  const int64_t V = model->vocab_size();
  PromptLogitErrors e;
  double err = 0, norm = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t rows = static_cast<int64_t>(prompts[i].size());
    const float* got = run.requests[i].prompt_logits.data();
    e.rows.Add(got, ref_logits[i], rows, V);
    for (int64_t j = 0; j < rows * V; ++j) {
      err += (double{got[j]} - ref_logits[i][j]) * (double{got[j]} - ref_logits[i][j]);
      norm += double{ref_logits[i][j]} * ref_logits[i][j];
    }
  }
  e.rel_rms = std::sqrt(err / norm);
  return e;
}

bool IsMatrixKind(WeightKind kind) {
  return kind == WeightKind::kMatrix || kind == WeightKind::kEmbedding || kind == WeightKind::kExperts;
}

LoadedModel WithMatricesIn(const LoadedModel& model, vt::DType dtype) {
  LoadedModel out = model;
  for (const WeightSpec& spec : ModelWeightSpecs(model.config)) {
    const vt::Tensor& w = model.weights.Get(spec.name);
    if (!IsMatrixKind(spec.kind) || w.dtype() == dtype) continue;
    vt::Tensor converted = vt::Tensor::Empty(w.shape(), dtype, vt::kCpu);
    converted.CopyFrom(w);
    out.weights.Replace(spec.name, converted);
  }
  return out;
}

LoadedModel WithMatrixNoise(const LoadedModel& model, const std::map<std::string, double>& rel_rms, uint32_t seed) {
  LoadedModel out = model;
  std::mt19937 rng(seed);
  for (const auto& [name, rel] : rel_rms) {
    const vt::Tensor& original = model.weights.Get(name);
    std::vector<float> w = original.ToFloatVector();
    double sum_sq = 0;
    for (float v : w) sum_sq += double{v} * v;
    std::normal_distribution<double> noise(0.0, rel * std::sqrt(sum_sq / static_cast<double>(w.size())));
    for (float& v : w) v = static_cast<float>(v + noise(rng));
    out.weights.Replace(name, vt::Tensor::FromVector(w, original.shape()));
  }
  return out;
}

std::map<std::string, double> UniformNoiseLevels(const LoadedModel& model, double level) {
  std::map<std::string, double> levels;
  for (const WeightSpec& spec : ModelWeightSpecs(model.config)) {
    if (IsMatrixKind(spec.kind)) levels[spec.name] = level;
  }
  return levels;
}

int64_t Argmax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

double TopTwoGap(const float* row, int64_t n) {
  double first = -std::numeric_limits<double>::infinity(), second = first;
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] > first) {
      second = first;
      first = row[i];
    } else if (row[i] > second) {
      second = row[i];
    }
  }
  return first - second;
}

}  // namespace vllm::testing
