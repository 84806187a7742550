// GGUF file -> canonical weights, undoing the converter's transforms (docs/qwen35.md §5.4)
// except the GDN value-head order, which is kept (config.gdn_tiled_value_heads).
//
//   norms of qwen35/qwen35moe (all but ssm_norm): stored w + 1 -> w, in f32
//   ssm_a: already -exp(A_log), kept;  ssm_dt.bias -> dt_bias
//   ssm_conv1d ne={K, C} is [C, K] row-major as stored
//   ffn_gate_inp_shexp {H} or {H, 1} -> [1, H]
//   ffn_gate_up_exps (fused, gate first) -> views, when the split tensors are absent
//   output.weight absent -> tied (config.tie_word_embeddings, no lm_head.weight)
// Tensors of blk.L .. blk.(block_count - 1) (the MTP blocks, L = block_count -
// nextn_predict_layers) are skipped unless LoadOptions::load_mtp reads them (blk.L.* and
// blk.L.nextn.*); any other tensor the table does not name is an error.
#include <cstdlib>
#include <map>

#include "loader_util.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"

namespace vllm {
namespace {

// blk.N.* with num_layers <= N < block_count: an MTP block (nextn_predict_layers of them
// follow the main layers). A block at or past block_count is not in the metadata at all.
bool IsMtpBlock(const std::string& name, int64_t num_layers, int64_t block_count) {
  if (name.rfind("blk.", 0) != 0) return false;
  char* end = nullptr;
  const long long layer = std::strtoll(name.c_str() + 4, &end, 10);
  return end != name.c_str() + 4 && *end == '.' && layer >= num_layers && layer < block_count;
}

std::string FusedGateUpName(const WeightSpec& spec) { return "blk." + std::to_string(spec.layer) + ".ffn_gate_up_exps.weight"; }

class GgufWeightResolver {
 public:
  GgufWeightResolver(const GgufFile& file, const ModelConfig& config) : file_(file), config_(config) {}

  vt::Tensor Resolve(const WeightSpec& spec) const;
  void CheckNoUnknownTensors(const std::vector<WeightSpec>& specs, bool load_mtp) const;

 private:
  vt::Tensor ResolveFusedGateUp(const WeightSpec& spec) const;

  const GgufFile& file_;
  const ModelConfig& config_;
};

vt::Tensor GgufWeightResolver::ResolveFusedGateUp(const WeightSpec& spec) const {
  const std::string fused = FusedGateUpName(spec);
  vt::Tensor t = file_.Tensor(fused);
  const int64_t E = spec.shape[0], I = spec.shape[1], H = spec.shape[2];
  if (t.shape() != vt::Shape{E, 2 * I, H}) {
    throw vt::Error(file_.path() + ": tensor '" + fused + "' has shape " + vt::ShapeToString(t.shape()) +
                    ", expected [num_experts, 2 * expert_feed_forward_length, embedding_length] = " +
                    vt::ShapeToString({E, 2 * I, H}));
  }
  return spec.name.ends_with("gate_proj") ? t.Slice(1, 0, I) : t.Slice(1, I, 2 * I);
}

vt::Tensor GgufWeightResolver::Resolve(const WeightSpec& spec) const {
  const std::string source = GgufWeightName(spec, config_.family);
  const GgufTensorInfo* info = file_.FindTensor(source);
  if (!info && spec.kind == WeightKind::kExperts && !spec.name.ends_with("down_proj") &&
      file_.FindTensor(FusedGateUpName(spec))) {
    return ResolveFusedGateUp(spec);
  }
  if (!info) {
    throw vt::Error(file_.path() + ": missing weight '" + spec.name + "' (looked for tensor '" + source + "')");
  }
  vt::Tensor t = file_.Tensor(*info);
  if (spec.kind == WeightKind::kSharedExpertGate && t.numel() == config_.hidden_size && t.ndim() <= 2) {
    t = t.View(spec.shape);  // stored squeezed as {H} (or {H, 1})
  }
  detail::CheckWeightShape(file_.path(), source, spec, t.shape(), "from the metadata");
  if (!IsExpandedToF32(spec.kind)) return t;
  const bool baked_one = spec.kind == WeightKind::kNorm && config_.zero_centered_norms;
  vt::Tensor f = detail::ToF32(t, baked_one);
  if (baked_one) {
    float* p = f.data_ptr<float>();
    for (int64_t i = 0; i < f.numel(); ++i) p[i] -= 1.0f;
  }
  return f;
}

void GgufWeightResolver::CheckNoUnknownTensors(const std::vector<WeightSpec>& specs, bool load_mtp) const {
  std::map<std::string, bool> known;
  for (const WeightSpec& spec : specs) {
    known[GgufWeightName(spec, config_.family)] = true;
    if (spec.kind == WeightKind::kExperts) known[FusedGateUpName(spec)] = true;
  }
  const int64_t block_count = file_.metadata().GetInt(config_.architecture + ".block_count");
  for (const GgufTensorInfo& t : file_.tensors()) {
    if (known.count(t.name) || (!load_mtp && IsMtpBlock(t.name, config_.num_hidden_layers, block_count))) continue;
    throw vt::Error(file_.path() + ": unexpected tensor '" + t.name + "': not a weight of a " +
                    config_.architecture + " model with this metadata");
  }
}

void ApplyValueHeadOrder(ModelConfig& config, GdnValueHeadOrder order) {
  if (!config.has_linear_attention()) return;
  config.gdn_tiled_value_heads = order != GdnValueHeadOrder::kGrouped;
}

}  // namespace

LoadedModel LoadGgufFile(const std::string& path, const LoadOptions& options) {
  LoadedModel model;
  model.format = CheckpointFormat::kGguf;
  model.path = path;
  const GgufFile file = GgufFile::Open(path, options.weight_residency);
  model.config = ModelConfigFromGguf(file, [&](const std::string& m) { detail::EmitWarning(model, options.on_warning, m); });
  ApplyValueHeadOrder(model.config, options.gdn_value_head_order);
  const std::vector<WeightSpec> specs = detail::WeightSpecsToLoad(model.config, options, path);
  const GgufWeightResolver resolver(file, model.config);
  resolver.CheckNoUnknownTensors(specs, options.load_mtp);
  for (const WeightSpec& spec : specs) model.weights.Add(spec.name, resolver.Resolve(spec));
  model.config.dtype = detail::MajorityWeightDtype(model.weights, specs);
  model.gguf_metadata = std::make_shared<const GgufMetadata>(file.metadata());
  return model;
}

}  // namespace vllm
