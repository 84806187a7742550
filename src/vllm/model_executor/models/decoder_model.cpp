#include "vllm/model_executor/models/decoder_model.h"

#include <cstring>
#include <string>

#include "vllm/distributed/communicator.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"
#include "vt/ops.h"

namespace vllm {
void CheckWeightsMatchSpecs(const std::vector<WeightSpec>& specs, const ModelConfig& config, const WeightStore& weights,
                            const std::string& missing_hint) {
  for (const WeightSpec& spec : specs) {
    if (!weights.Has(spec.name)) {
      throw vt::Error("the " + config.architecture + " config needs weight '" + spec.name + "' " +
                      vt::ShapeToString(spec.shape) + ", which the weights lack" + missing_hint);
    }
    const vt::Tensor& w = weights.Get(spec.name);
    if (w.shape() != spec.shape) {
      throw vt::Error("weight '" + spec.name + "' is " + w.Describe() + " but the " + config.architecture +
                      " config (hidden_size " + std::to_string(config.hidden_size) + ", vocab_size " +
                      std::to_string(config.vocab_size) + ") needs " + vt::ShapeToString(spec.shape));
    }
  }
}


DecoderModel::DecoderModel(const ModelConfig& config, const WeightStore& weights, const ModelOptions& options)
    : config_(config), options_(options), norm_offset_(config.zero_centered_norms ? 1.0f : 0.0f) {
  if (!vt::IsFloat(options.activation_dtype)) {
    throw vt::Error(std::string("activations must be float32, bfloat16 or float16, got ") +
                    vt::DTypeName(options.activation_dtype));
  }
  CheckWeightsMatchSpecs(ModelWeightSpecs(config), config, weights);
  final_norm_ = Weight(weights, "norm.weight");
  const vt::Tensor& lm_head = weights.Get(config.tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight");
  if (options.tensor_parallel != nullptr && options.tensor_parallel->world_size() > 1) {
    // Vocabulary-parallel embedding and LM head: this rank's rows of each (views).
    const VocabShard rows =
        VocabShardOf(config.vocab_size, options.tensor_parallel->rank(), options.tensor_parallel->world_size());
    auto mine = [&](const vt::Tensor& table) {  // [rows, H]
      const vt::Tensor view = table.Slice(0, rows.begin, rows.end);
      return options.device == view.device() ? view : view.To(options.device);
    };
    embed_tokens_ = mine(weights.Get("embed_tokens.weight"));
    lm_head_ = mine(lm_head);
  } else {
    embed_tokens_ = Weight(weights, "embed_tokens.weight");
    lm_head_ = config.tie_word_embeddings ? embed_tokens_ : Weight(weights, "lm_head.weight");
  }
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    try {
      layers_.push_back(BuildLayer(i, weights));
    } catch (const vt::Error& e) {
      throw vt::Error("layer " + std::to_string(i) + " (" + LayerTypeName(config.layer_types.at(i)) + "): " + e.what());
    }
  }
}

vt::Tensor DecoderModel::Weight(const WeightStore& weights, const std::string& name) const {
  const vt::Tensor& w = weights.Get(name);
  return options_.device == w.device() ? w : w.To(options_.device);
}

dense_attn::AttnBlock DecoderModel::BuildAttention(const WeightStore& weights, const std::string& p) const {
  // Projections that read one input are handed over where the loader put them: the
  // MergedProjection builds them on the device (merged off the CPU, see
  // merged_projection.h) instead of a copy per part here.
  auto P = [&](const std::string& name) { return weights.Get(p + name); };
  auto W = [&](const std::string& name) { return Weight(weights, p + name); };
  const dense_attn::AttnDims dims{.hidden_size = config_.hidden_size,
                                  .num_heads = config_.num_attention_heads,
                                  .num_kv_heads = config_.num_key_value_heads,
                                  .head_dim = config_.head_dim,
                                  .rotary_dim = config_.rotary_dim,
                                  .rope_theta = config_.rope_theta,
                                  .rms_norm_eps = config_.rms_norm_eps,
                                  .output_gate = config_.attn_output_gate,
                                  .qk_norm_weight_offset = norm_offset_};
  return dense_attn::AttnBlock(dims,
                               dense_attn::AttnWeights{P("self_attn.q_proj.weight"), P("self_attn.k_proj.weight"),
                                                       P("self_attn.v_proj.weight"), W("self_attn.o_proj.weight"),
                                                       W("self_attn.q_norm.weight"), W("self_attn.k_norm.weight")},
                               ProjectionPlacement{.device = options_.device});
}

void DecoderModel::BuildFeedForward(const WeightStore& weights, const std::string& p, std::optional<GatedMlp>& mlp,
                                    std::optional<SparseMoe>& moe) const {
  auto P = [&](const std::string& name) { return weights.Get(p + name); };
  auto W = [&](const std::string& name) { return Weight(weights, p + name); };
  const ProjectionPlacement placement{.device = options_.device};
  if (config_.is_moe()) {
    MoeWeights w{W("mlp.gate.weight"), W("mlp.experts.gate_proj"), W("mlp.experts.up_proj"),
                 W("mlp.experts.down_proj"), std::nullopt, vt::Tensor()};
    if (config_.shared_expert_intermediate_size > 0) {
      w.shared_expert = MlpWeights{P("mlp.shared_expert.gate_proj.weight"), P("mlp.shared_expert.up_proj.weight"),
                                   W("mlp.shared_expert.down_proj.weight")};
      w.shared_expert_gate = W("mlp.shared_expert_gate.weight");
    }
    moe.emplace(std::move(w), config_.num_experts_per_tok, config_.norm_topk_prob, placement, config_.expert_begin);
  } else {
    mlp.emplace(MlpWeights{P("mlp.gate_proj.weight"), P("mlp.up_proj.weight"), W("mlp.down_proj.weight")}, placement);
  }
}

DecoderModel::DecoderLayer DecoderModel::BuildLayer(int64_t i, const WeightStore& weights) const {
  const std::string p = "layers." + std::to_string(i) + ".";
  auto W = [&](const std::string& name) { return Weight(weights, p + name); };
  auto P = [&](const std::string& name) { return weights.Get(p + name); };
  DecoderLayer layer;
  layer.input_layernorm = W("input_layernorm.weight");
  layer.post_attention_layernorm = W("post_attention_layernorm.weight");
  if (config_.layer_types.at(i) == LayerType::kFullAttention) {
    layer.attn.emplace(BuildAttention(weights, p));
  } else {
    gdn::GdnDims dims{.hidden_size = config_.hidden_size,
                      .num_key_heads = config_.linear_num_key_heads,
                      .num_value_heads = config_.linear_num_value_heads,
                      .key_head_dim = config_.linear_key_head_dim,
                      .value_head_dim = config_.linear_value_head_dim,
                      .conv_kernel = config_.linear_conv_kernel_dim,
                      .rms_norm_eps = config_.rms_norm_eps,
                      .tiled_value_heads = config_.gdn_tiled_value_heads};
    layer.gdn.emplace(dims,
                      gdn::GdnWeights{P("linear_attn.in_proj_qkv.weight"), P("linear_attn.in_proj_z.weight"),
                                      P("linear_attn.in_proj_b.weight"), P("linear_attn.in_proj_a.weight"),
                                      W("linear_attn.conv1d.weight"), W("linear_attn.A"), W("linear_attn.dt_bias"),
                                      W("linear_attn.norm.weight"), W("linear_attn.out_proj.weight")},
                      ProjectionPlacement{.device = options_.device});
  }
  BuildFeedForward(weights, p, layer.mlp, layer.moe);
  return layer;
}

std::vector<LayerCacheSpec> DecoderModel::cache_spec() const {
  std::vector<LayerCacheSpec> spec;
  for (LayerType type : config_.layer_types) {
    LayerCacheSpec s;
    if (type == LayerType::kFullAttention) {
      s.kind = LayerCacheSpec::Kind::kFullAttention;
      s.num_kv_heads = config_.num_key_value_heads;
      s.head_dim = config_.head_dim;
    } else {
      s.kind = LayerCacheSpec::Kind::kGatedDeltaNet;
      s.conv_dim = config_.linear_conv_dim();
      s.conv_kernel = config_.linear_conv_kernel_dim;
      s.num_value_heads = config_.linear_num_value_heads;
      s.key_head_dim = config_.linear_key_head_dim;
      s.value_head_dim = config_.linear_value_head_dim;
    }
    spec.push_back(s);
  }
  return spec;
}

vt::Tensor DecoderModel::Forward(const ForwardBatch& batch, const ModelCaches& caches) const {
  return LmHead(ForwardHidden(batch, caches), batch.logits_indices);
}

vt::Tensor DecoderModel::ForwardHidden(const ForwardBatch& batch, const ModelCaches& caches,
                                       std::vector<vt::Tensor>* gdn_projected) const {
  if (gdn_projected != nullptr) gdn_projected->assign(layers_.size(), vt::Tensor());
  const int64_t T = batch.input_ids.size(0), H = config_.hidden_size;
  const vt::DType dt = options_.activation_dtype;
  const vt::Device dev = options_.device;
  const float eps = config_.rms_norm_eps;

  vt::Tensor hidden = vt::Tensor::Empty({T, H}, dt, dev);  // the residual stream
  Embed(batch.input_ids, hidden);
  vt::Tensor normed = vt::Tensor::Empty({T, H}, dt, dev);
  vt::Tensor branch = vt::Tensor::Empty({T, H}, dt, dev);
  if (!layers_.empty()) {
    vt::RmsNorm({.x = hidden, .weight = layers_[0].input_layernorm, .out = normed, .eps = eps,
                 .weight_offset = norm_offset_});
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& layer = layers_[i];
    if (layer.attn) layer.attn->Forward(normed, batch.attn, caches.kv.at(i), branch);
    else layer.gdn->Forward(normed, batch.attn, caches.gdn.at(i), branch, gdn_projected ? &(*gdn_projected)[i] : nullptr);
    ReduceOverRanks(branch);
    vt::AddRmsNorm({.x = branch, .residual = hidden, .weight = layer.post_attention_layernorm, .out = normed,
                    .eps = eps, .weight_offset = norm_offset_});
    if (layer.mlp) layer.mlp->Forward(normed, branch);
    else layer.moe->Forward(normed, branch);
    ReduceOverRanks(branch);
    const vt::Tensor& next_norm = i + 1 < layers_.size() ? layers_[i + 1].input_layernorm : final_norm_;
    vt::AddRmsNorm({.x = branch, .residual = hidden, .weight = next_norm, .out = normed, .eps = eps,
                    .weight_offset = norm_offset_});
  }
  if (layers_.empty()) {
    vt::RmsNorm({.x = hidden, .weight = final_norm_, .out = normed, .eps = eps, .weight_offset = norm_offset_});
  }
  return normed;
}

void DecoderModel::Embed(const vt::Tensor& ids, const vt::Tensor& out) const {
  Communicator* group = options_.tensor_parallel;
  if (group == nullptr || group->world_size() == 1) {
    vt::GatherRows({.table = embed_tokens_, .ids = ids, .out = out});
    return;
  }
  // This rank's rows [begin, end) of the table give its tokens' rows; the others are
  // zero here, and the sum over the ranks is every row. (Tensor parallelism runs on
  // the CPU, so the ids are read in place.)
  const VocabShard rows = VocabShardOf(config_.vocab_size, group->rank(), group->world_size());
  const std::vector<int64_t> all = ids.ToIntVector();
  const auto T = static_cast<int64_t>(all.size());
  vt::Tensor local = vt::Tensor::Empty({T}, vt::DType::kI32, vt::kCpu);
  for (int64_t t = 0; t < T; ++t) {
    const bool owned = all[t] >= rows.begin && all[t] < rows.end;
    local.data_ptr<int32_t>()[t] = owned ? static_cast<int32_t>(all[t] - rows.begin) : 0;
  }
  if (rows.end > rows.begin) vt::GatherRows({.table = embed_tokens_, .ids = local, .out = out});
  const int64_t row_bytes = vt::BytesFor(out.dtype(), out.size(1));
  for (int64_t t = 0; t < T; ++t) {
    if (rows.end == rows.begin || all[t] < rows.begin || all[t] >= rows.end) {
      std::memset(static_cast<char*>(out.data()) + t * row_bytes, 0, static_cast<size_t>(row_bytes));  // +0.0
    }
  }
  AllReduceSum(*group, out);
}

void DecoderModel::ReduceOverRanks(const vt::Tensor& partial) const {
  if (options_.tensor_parallel != nullptr) AllReduceSum(*options_.tensor_parallel, partial);
}

void DecoderModel::ReplayGdnStates(const std::vector<vt::Tensor>& gdn_projected, const vt::Tensor& rows,
                                   const AttnMetadata& meta, const ModelCaches& caches) const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i].gdn) continue;
    const vt::Tensor& projected = gdn_projected.at(i);  // [T, W]
    vt::Tensor replayed = vt::Tensor::Empty({rows.size(0), projected.size(1)}, projected.dtype(), options_.device);
    vt::GatherRows({.table = projected, .ids = rows, .out = replayed});
    layers_[i].gdn->ReplayState(replayed, meta, caches.gdn.at(i));
  }
}

vt::Tensor DecoderModel::LmHead(const vt::Tensor& hidden, const vt::Tensor& logits_indices) const {
  // The logits are f32 whatever the activation dtype, so they are not rounded to 8
  // (bf16) mantissa bits, which at |logit| ~ 8 would be steps of 0.03 in every
  // logprob. The rows stay in the activation dtype: MatMul stores its f32 sums
  // unrounded (f32 out from 16-bit x), and at batch sizes a GPU runs on tensor cores
  // (cuBLAS bf16 with f32 output), where f32 x would put the largest GEMM of a step
  // on f32 FMA units (~24% of a 256-sequence 9B step, bench/gpu_notes.md).
  const int64_t N = logits_indices.size(0);
  vt::Tensor last = vt::Tensor::Empty({N, config_.hidden_size}, hidden.dtype(), options_.device);  // [N, H]
  vt::GatherRows({.table = hidden, .ids = logits_indices, .out = last});
  Communicator* group = options_.tensor_parallel;
  if (group == nullptr || group->world_size() == 1) {
    vt::Tensor logits = vt::Tensor::Empty({N, config_.vocab_size}, vt::DType::kF32, options_.device);  // [N, V]
    vt::MatMul({.x = last, .w = lm_head_, .out = logits});
    return logits;
  }
  // This rank's vocabulary rows into [N, padded] (the last rank's tail stays zero),
  // then every rank's side by side: [N, world * padded], of which the first V count.
  const VocabShard rows = VocabShardOf(config_.vocab_size, group->rank(), group->world_size());
  vt::Tensor mine = vt::Tensor::Zeros({N, rows.padded}, vt::DType::kF32, options_.device);
  if (rows.end > rows.begin) vt::MatMul({.x = last, .w = lm_head_, .out = mine.Slice(1, 0, rows.end - rows.begin)});
  vt::Tensor gathered = vt::Tensor::Empty({N, group->world_size() * rows.padded}, vt::DType::kF32, options_.device);
  AllGatherColumns(*group, mine, gathered);
  return gathered.size(1) == config_.vocab_size ? gathered : gathered.Slice(1, 0, config_.vocab_size).Contiguous();
}

}  // namespace vllm
