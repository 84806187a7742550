// HF checkpoint folder -> canonical weights (docs/qwen35.md §4.6).
//
// Source names are `model.language_model.` + canonical (VLM checkpoints) or
// `model.` + canonical (text-only), with three exceptions handled here:
//   layers.N.linear_attn.A        <- A_log, turned into -exp(A_log) in f32
//   layers.N.linear_attn.conv1d   <- [conv_dim, 1, K], viewed as [conv_dim, K]
//   layers.N.mlp.experts.*        <- fused gate_up_proj [E, 2I, H] (gate rows first) and
//                                    down_proj [E, H, I], or per-expert
//                                    experts.{e}.{gate,up,down}_proj.weight, stacked
// lm_head.weight and the MTP module's mtp.* (LoadOptions::load_mtp, else skipped) have
// no prefix. model.visual.* is skipped.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "loader_util.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"

namespace vllm {
namespace {

constexpr const char* kVlmPrefix = "model.language_model.";
constexpr const char* kTextPrefix = "model.";

bool IsSkipped(const std::string& name, bool load_mtp) {
  return name.rfind("model.visual.", 0) == 0 || (!load_mtp && name.rfind("mtp.", 0) == 0);
}

bool IsMtpWeight(const WeightSpec& spec) { return spec.name.rfind("mtp.", 0) == 0; }

std::string DetectPrefix(const SafetensorsCheckpoint& ckpt) {
  for (const std::string& name : ckpt.names()) {
    if (name.rfind(kVlmPrefix, 0) == 0) return kVlmPrefix;
  }
  return kTextPrefix;
}

class HfWeightResolver {
 public:
  HfWeightResolver(const SafetensorsCheckpoint& ckpt, const ModelConfig& config, std::string folder)
      : ckpt_(ckpt), config_(config), folder_(std::move(folder)), prefix_(DetectPrefix(ckpt)) {}

  // Every source name the specs may read (used to reject unknown tensors).
  std::set<std::string> KnownSourceNames(const std::vector<WeightSpec>& specs) const;
  vt::Tensor Resolve(const WeightSpec& spec) const;

 private:
  std::string Source(const WeightSpec& spec) const {
    if ((spec.layer < 0 && spec.name == "lm_head.weight") || IsMtpWeight(spec)) return spec.name;
    if (spec.kind == WeightKind::kGdnA) return prefix_ + "layers." + std::to_string(spec.layer) + ".linear_attn.A_log";
    return prefix_ + spec.name;
  }
  std::string ExpertsPrefix(const WeightSpec& spec) const {  // spec.name is <layer prefix>mlp.experts.<proj>
    const std::string source = Source(spec);
    return source.substr(0, source.rfind('.') + 1);
  }
  // "gate_proj", "up_proj" or "down_proj"
  static std::string ExpertProj(const WeightSpec& spec) { return spec.name.substr(spec.name.rfind('.') + 1); }

  vt::Tensor Load(const std::string& source, const WeightSpec& spec) const;
  vt::Tensor ResolveA(const WeightSpec& spec) const;
  vt::Tensor ResolveConv(const WeightSpec& spec) const;
  vt::Tensor ResolveExperts(const WeightSpec& spec) const;
  vt::Tensor StackExperts(const WeightSpec& spec) const;

  const SafetensorsCheckpoint& ckpt_;
  const ModelConfig& config_;
  std::string folder_;
  std::string prefix_;
};

std::set<std::string> HfWeightResolver::KnownSourceNames(const std::vector<WeightSpec>& specs) const {
  std::set<std::string> known;
  for (const WeightSpec& spec : specs) {
    if (spec.kind != WeightKind::kExperts) {
      known.insert(Source(spec));
      continue;
    }
    const std::string proj = ExpertProj(spec);
    known.insert(ExpertsPrefix(spec) + (proj == "down_proj" ? "down_proj" : "gate_up_proj"));
    for (int64_t e = 0; e < config_.num_experts; ++e) {
      known.insert(ExpertsPrefix(spec) + std::to_string(e) + "." + proj + ".weight");
    }
  }
  return known;
}

vt::Tensor HfWeightResolver::Load(const std::string& source, const WeightSpec& spec) const {
  if (!ckpt_.Has(source)) {
    throw vt::Error(folder_ + ": missing weight '" + spec.name + "' (looked for tensor '" + source +
                    "' in the safetensors files)");
  }
  return ckpt_.Tensor(source);
}

vt::Tensor HfWeightResolver::ResolveA(const WeightSpec& spec) const {
  const std::string source = Source(spec);
  vt::Tensor a_log = Load(source, spec);
  detail::CheckWeightShape(ckpt_.FileOf(source), source, spec, a_log.shape());
  vt::Tensor a = detail::ToF32(a_log, true);
  float* p = a.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = -std::exp(p[i]);  // HF: -A_log.float().exp()
  return a;
}

vt::Tensor HfWeightResolver::ResolveConv(const WeightSpec& spec) const {
  const std::string source = Source(spec);
  vt::Tensor conv = Load(source, spec);
  const vt::Shape hf_shape = {spec.shape[0], 1, spec.shape[1]};
  if (conv.shape() == hf_shape) conv = conv.View(spec.shape);
  detail::CheckWeightShape(ckpt_.FileOf(source), source, spec, conv.shape(),
                           "(HF stores " + vt::ShapeToString(hf_shape) + ")");
  return conv;
}

vt::Tensor HfWeightResolver::ResolveExperts(const WeightSpec& spec) const {
  const std::string proj = ExpertProj(spec);
  const std::string fused = ExpertsPrefix(spec) + (proj == "down_proj" ? "down_proj" : "gate_up_proj");
  if (!ckpt_.Has(fused)) return StackExperts(spec);
  const std::string first_expert = ExpertsPrefix(spec) + "0." + proj + ".weight";
  if (ckpt_.Has(first_expert)) {
    throw vt::Error(folder_ + ": both '" + fused + "' and per-expert '" + first_expert + "' are present");
  }
  vt::Tensor t = ckpt_.Tensor(fused);
  if (proj == "down_proj") {
    detail::CheckWeightShape(ckpt_.FileOf(fused), fused, spec, t.shape());
    return t;
  }
  const int64_t E = spec.shape[0], I = spec.shape[1], H = spec.shape[2];
  if (t.shape() != vt::Shape{E, 2 * I, H}) {
    throw vt::Error(ckpt_.FileOf(fused) + ": tensor '" + fused + "' has shape " + vt::ShapeToString(t.shape()) +
                    ", expected [num_experts, 2 * moe_intermediate_size, hidden_size] = " +
                    vt::ShapeToString({E, 2 * I, H}) + " from the config");
  }
  return proj == "gate_proj" ? t.Slice(1, 0, I) : t.Slice(1, I, 2 * I);  // gate rows first
}

vt::Tensor HfWeightResolver::StackExperts(const WeightSpec& spec) const {
  const std::string proj = ExpertProj(spec);
  const vt::Shape one = {spec.shape[1], spec.shape[2]};
  vt::Tensor stacked;
  for (int64_t e = 0; e < spec.shape[0]; ++e) {
    const std::string source = ExpertsPrefix(spec) + std::to_string(e) + "." + proj + ".weight";
    if (!ckpt_.Has(source)) {
      throw vt::Error(folder_ + ": missing weight '" + spec.name + "' (looked for the fused tensor '" +
                      ExpertsPrefix(spec) + (proj == "down_proj" ? "down_proj" : "gate_up_proj") +
                      "' and for per-expert tensors such as '" + source + "')");
    }
    vt::Tensor t = ckpt_.Tensor(source);
    if (t.shape() != one) {
      throw vt::Error(ckpt_.FileOf(source) + ": tensor '" + source + "' has shape " + vt::ShapeToString(t.shape()) +
                      ", expected " + vt::ShapeToString(one) + " from the config");
    }
    if (e == 0) stacked = vt::Tensor::Empty(spec.shape, t.dtype(), vt::kCpu);
    if (t.dtype() != stacked.dtype()) {
      throw vt::Error(ckpt_.FileOf(source) + ": tensor '" + source + "' is " + vt::DTypeName(t.dtype()) +
                      ", but expert 0 is " + vt::DTypeName(stacked.dtype()));
    }
    std::memcpy(stacked.Select(0, e).data(), t.data(), static_cast<size_t>(t.nbytes()));
  }
  return stacked;
}

vt::Tensor HfWeightResolver::Resolve(const WeightSpec& spec) const {
  vt::Tensor t;
  switch (spec.kind) {
    case WeightKind::kGdnA: return ResolveA(spec);
    case WeightKind::kGdnConv: t = ResolveConv(spec); break;
    case WeightKind::kExperts: return ResolveExperts(spec);
    default: {
      const std::string source = Source(spec);
      t = Load(source, spec);
      detail::CheckWeightShape(ckpt_.FileOf(source), source, spec, t.shape());
    }
  }
  return IsExpandedToF32(spec.kind) ? detail::ToF32(t, false) : t;
}

void CheckNoUnknownTensors(const SafetensorsCheckpoint& ckpt, const std::set<std::string>& known, bool tied,
                           bool load_mtp) {
  for (const std::string& name : ckpt.names()) {
    if (known.count(name) || IsSkipped(name, load_mtp) || (tied && name == "lm_head.weight")) continue;
    throw vt::Error(ckpt.FileOf(name) + ": unexpected tensor '" + name +
                    "': not a weight of this model's config (and not model.visual.* or mtp.*)");
  }
}

}  // namespace

LoadedModel LoadHfFolder(const std::string& folder, const LoadOptions& options) {
  if (options.gdn_value_head_order == GdnValueHeadOrder::kTiled) {
    throw vt::Error(folder + ": HF checkpoints store GDN value heads grouped; the tiled order applies to GGUF files");
  }
  LoadedModel model;
  model.format = CheckpointFormat::kHfFolder;
  model.path = folder;
  model.config = LoadHfConfig(folder);
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::Open(folder);
  const std::vector<WeightSpec> specs = detail::WeightSpecsToLoad(model.config, options, folder);
  const HfWeightResolver resolver(ckpt, model.config, folder);
  CheckNoUnknownTensors(ckpt, resolver.KnownSourceNames(specs), model.config.tie_word_embeddings, options.load_mtp);
  for (const WeightSpec& spec : specs) model.weights.Add(spec.name, resolver.Resolve(spec));
  model.config.dtype = detail::MajorityWeightDtype(model.weights, specs);
  return model;
}

}  // namespace vllm
