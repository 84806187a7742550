#include "vllm/model_executor/models/mtp_head.h"

#include <string>

#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"
#include "vt/ops.h"

namespace vllm {

MtpHead::MtpHead(const ModelConfig& config, const WeightStore& weights, const ModelOptions& options,
                 const DecoderModel& trunk)
    : config_(config), options_(options), norm_offset_(config.zero_centered_norms ? 1.0f : 0.0f), trunk_(trunk) {
  // MtpWeightSpecs throws unless a one-layer module.
  CheckWeightsMatchSpecs(MtpWeightSpecs(config), config, weights, " (load the model with LoadOptions::load_mtp)");
  const std::string p = "mtp.layers.0.";
  fc_ = trunk.Weight(weights, "mtp.fc.weight");
  embedding_norm_ = trunk.Weight(weights, "mtp.pre_fc_norm_embedding.weight");
  hidden_norm_ = trunk.Weight(weights, "mtp.pre_fc_norm_hidden.weight");
  final_norm_ = trunk.Weight(weights, "mtp.norm.weight");
  input_layernorm_ = trunk.Weight(weights, p + "input_layernorm.weight");
  post_attention_layernorm_ = trunk.Weight(weights, p + "post_attention_layernorm.weight");
  attn_.emplace(trunk.BuildAttention(weights, p));
  trunk.BuildFeedForward(weights, p, mlp_, moe_);
}

LayerCacheSpec MtpHead::cache_spec() const {
  return {.kind = LayerCacheSpec::Kind::kFullAttention, .num_kv_heads = config_.num_key_value_heads,
          .head_dim = config_.head_dim};
}

vt::Tensor MtpHead::Forward(const vt::Tensor& hidden, const vt::Tensor& next_ids, const AttnMetadata& meta,
                            const LayerKvCache& kv, const vt::Tensor& logits_indices, vt::Tensor* out_hidden) const {
  const int64_t T = hidden.size(0), H = config_.hidden_size;
  const vt::DType dt = options_.activation_dtype;
  const vt::Device dev = options_.device;
  const float eps = config_.rms_norm_eps;
  if (hidden.shape() != vt::Shape{T, H} || next_ids.shape() != vt::Shape{T}) {
    throw vt::Error("MtpHead: hidden must be [T, " + std::to_string(H) + "] and next_ids [T], got " +
                    hidden.Describe() + " and " + next_ids.Describe());
  }
  // [e | hh]: the two normed halves written into one [T, 2H] row each.
  vt::Tensor embedded = vt::Tensor::Empty({T, H}, dt, dev);
  vt::GatherRows({.table = trunk_.embed_tokens(), .ids = next_ids, .out = embedded});
  vt::Tensor both = vt::Tensor::Empty({T, 2 * H}, dt, dev);
  vt::RmsNorm({.x = embedded, .weight = embedding_norm_, .out = both.Slice(1, 0, H), .eps = eps,
               .weight_offset = norm_offset_});
  vt::RmsNorm({.x = hidden, .weight = hidden_norm_, .out = both.Slice(1, H, 2 * H), .eps = eps,
               .weight_offset = norm_offset_});
  vt::Tensor x = vt::Tensor::Empty({T, H}, dt, dev);  // the layer's residual stream
  vt::MatMul({.x = both, .w = fc_, .out = x});

  vt::Tensor normed = vt::Tensor::Empty({T, H}, dt, dev);
  vt::Tensor branch = vt::Tensor::Empty({T, H}, dt, dev);
  vt::RmsNorm({.x = x, .weight = input_layernorm_, .out = normed, .eps = eps, .weight_offset = norm_offset_});
  attn_->Forward(normed, meta, kv, branch);
  vt::AddRmsNorm({.x = branch, .residual = x, .weight = post_attention_layernorm_, .out = normed, .eps = eps,
                  .weight_offset = norm_offset_});
  if (mlp_) mlp_->Forward(normed, branch);
  else moe_->Forward(normed, branch);
  vt::AddRmsNorm({.x = branch, .residual = x, .weight = final_norm_, .out = normed, .eps = eps,
                  .weight_offset = norm_offset_});
  if (out_hidden != nullptr) *out_hidden = normed;
  return trunk_.LmHead(normed, logits_indices);
}

}  // namespace vllm
