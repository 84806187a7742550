// The canonical weight table and its GGUF names (see weight_names.h).
#include "vllm/model_loader/weight_names.h"

#include <map>

#include "vt/error.h"

namespace vllm {
namespace {

void AddAttention(const ModelConfig& c, const std::string& p, int64_t layer, std::vector<WeightSpec>& out) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  out.push_back({p + "self_attn.q_proj.weight", {c.q_proj_rows(), H}, WeightKind::kMatrix, layer});
  out.push_back({p + "self_attn.k_proj.weight", {c.num_key_value_heads * D, H}, WeightKind::kMatrix, layer});
  out.push_back({p + "self_attn.v_proj.weight", {c.num_key_value_heads * D, H}, WeightKind::kMatrix, layer});
  out.push_back({p + "self_attn.o_proj.weight", {H, c.num_attention_heads * D}, WeightKind::kMatrix, layer});
  out.push_back({p + "self_attn.q_norm.weight", {D}, WeightKind::kNorm, layer});
  out.push_back({p + "self_attn.k_norm.weight", {D}, WeightKind::kNorm, layer});
}

void AddLinearAttention(const ModelConfig& c, const std::string& p, int64_t layer, std::vector<WeightSpec>& out) {
  const int64_t H = c.hidden_size, Hv = c.linear_num_value_heads;
  const std::string a = p + "linear_attn.";
  out.push_back({a + "in_proj_qkv.weight", {c.linear_conv_dim(), H}, WeightKind::kMatrix, layer});
  out.push_back({a + "in_proj_z.weight", {c.linear_value_dim(), H}, WeightKind::kMatrix, layer});
  out.push_back({a + "in_proj_b.weight", {Hv, H}, WeightKind::kMatrix, layer});
  out.push_back({a + "in_proj_a.weight", {Hv, H}, WeightKind::kMatrix, layer});
  out.push_back({a + "conv1d.weight", {c.linear_conv_dim(), c.linear_conv_kernel_dim}, WeightKind::kGdnConv, layer});
  out.push_back({a + "A", {Hv}, WeightKind::kGdnA, layer});
  out.push_back({a + "dt_bias", {Hv}, WeightKind::kGdnDtBias, layer});
  out.push_back({a + "norm.weight", {c.linear_value_head_dim}, WeightKind::kGdnNorm, layer});
  out.push_back({a + "out_proj.weight", {H, c.linear_value_dim()}, WeightKind::kMatrix, layer});
}

void AddFeedForward(const ModelConfig& c, const std::string& p, int64_t layer, std::vector<WeightSpec>& out) {
  const int64_t H = c.hidden_size;
  if (!c.is_moe()) {
    const int64_t I = c.intermediate_size;
    out.push_back({p + "mlp.gate_proj.weight", {I, H}, WeightKind::kMatrix, layer});
    out.push_back({p + "mlp.up_proj.weight", {I, H}, WeightKind::kMatrix, layer});
    out.push_back({p + "mlp.down_proj.weight", {H, I}, WeightKind::kMatrix, layer});
    return;
  }
  const int64_t E = c.num_experts, Ie = c.moe_intermediate_size, Is = c.shared_expert_intermediate_size;
  const int64_t El = c.num_local_experts();  // the router scores all E; a rank may hold El of them
  out.push_back({p + "mlp.gate.weight", {E, H}, WeightKind::kRouter, layer});
  out.push_back({p + "mlp.experts.gate_proj", {El, Ie, H}, WeightKind::kExperts, layer});
  out.push_back({p + "mlp.experts.up_proj", {El, Ie, H}, WeightKind::kExperts, layer});
  out.push_back({p + "mlp.experts.down_proj", {El, H, Ie}, WeightKind::kExperts, layer});
  out.push_back({p + "mlp.shared_expert.gate_proj.weight", {Is, H}, WeightKind::kMatrix, layer});
  out.push_back({p + "mlp.shared_expert.up_proj.weight", {Is, H}, WeightKind::kMatrix, layer});
  out.push_back({p + "mlp.shared_expert.down_proj.weight", {H, Is}, WeightKind::kMatrix, layer});
  out.push_back({p + "mlp.shared_expert_gate.weight", {1, H}, WeightKind::kSharedExpertGate, layer});
}

// Canonical suffix within a layer -> GGUF suffix within blk.N.
const std::map<std::string, std::string>& LayerGgufNames() {
  static const std::map<std::string, std::string> names = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
      {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
      {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
      {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
      {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
      {"linear_attn.A", "ssm_a"},
      {"linear_attn.dt_bias", "ssm_dt.bias"},
      {"linear_attn.norm.weight", "ssm_norm.weight"},
      {"linear_attn.out_proj.weight", "ssm_out.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.experts.gate_proj", "ffn_gate_exps.weight"},
      {"mlp.experts.up_proj", "ffn_up_exps.weight"},
      {"mlp.experts.down_proj", "ffn_down_exps.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
  };
  return names;
}

// The MTP module's own weights -> GGUF suffix within blk.L (llama.cpp's nextn names).
const std::map<std::string, std::string>& MtpGgufNames() {
  static const std::map<std::string, std::string> names = {
      {"mtp.fc.weight", "nextn.eh_proj.weight"},
      {"mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
      {"mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
      {"mtp.norm.weight", "nextn.shared_head_norm.weight"},
  };
  return names;
}

constexpr const char* kMtpLayerPrefix = "mtp.layers.0.";

}  // namespace

std::vector<WeightSpec> MtpWeightSpecs(const ModelConfig& c) {
  if (c.mtp_num_hidden_layers != 1) {
    throw vt::Error("MTP weights: mtp_num_hidden_layers (GGUF nextn_predict_layers) is " +
                    std::to_string(c.mtp_num_hidden_layers) + "; only a one-layer MTP module (every Qwen3.5 release) "
                    "is supported");
  }
  const int64_t H = c.hidden_size, L = c.num_hidden_layers;
  std::vector<WeightSpec> out;
  out.push_back({"mtp.fc.weight", {H, 2 * H}, WeightKind::kMatrix, L});  // input: [embedding | hidden]
  out.push_back({"mtp.pre_fc_norm_embedding.weight", {H}, WeightKind::kNorm, L});
  out.push_back({"mtp.pre_fc_norm_hidden.weight", {H}, WeightKind::kNorm, L});
  out.push_back({"mtp.norm.weight", {H}, WeightKind::kNorm, L});
  const std::string p = kMtpLayerPrefix;
  out.push_back({p + "input_layernorm.weight", {H}, WeightKind::kNorm, L});
  out.push_back({p + "post_attention_layernorm.weight", {H}, WeightKind::kNorm, L});
  AddAttention(c, p, L, out);
  AddFeedForward(c, p, L, out);
  return out;
}

std::vector<WeightSpec> ModelWeightSpecs(const ModelConfig& c) {
  std::vector<WeightSpec> out;
  out.push_back({"embed_tokens.weight", {c.vocab_size, c.hidden_size}, WeightKind::kEmbedding});
  out.push_back({"norm.weight", {c.hidden_size}, WeightKind::kNorm});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}, WeightKind::kMatrix});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {c.hidden_size}, WeightKind::kNorm, i});
    out.push_back({p + "post_attention_layernorm.weight", {c.hidden_size}, WeightKind::kNorm, i});
    if (c.layer_types.at(static_cast<size_t>(i)) == LayerType::kFullAttention) AddAttention(c, p, i, out);
    else AddLinearAttention(c, p, i, out);
    AddFeedForward(c, p, i, out);
  }
  return out;
}

bool IsExpandedToF32(WeightKind kind) {
  switch (kind) {
    case WeightKind::kNorm:
    case WeightKind::kGdnNorm:
    case WeightKind::kGdnA:
    case WeightKind::kGdnDtBias:
    case WeightKind::kGdnConv:
    case WeightKind::kRouter:
    case WeightKind::kSharedExpertGate: return true;
    default: return false;
  }
}

std::string GgufWeightName(const WeightSpec& spec, ModelFamily family) {
  if (spec.layer < 0) {
    if (spec.name == "embed_tokens.weight") return "token_embd.weight";
    if (spec.name == "norm.weight") return "output_norm.weight";
    if (spec.name == "lm_head.weight") return "output.weight";
    throw vt::Error("GgufWeightName: unknown global weight '" + spec.name + "'");
  }
  const std::string blk = "blk." + std::to_string(spec.layer) + ".";
  if (auto mtp = MtpGgufNames().find(spec.name); mtp != MtpGgufNames().end()) return blk + mtp->second;
  const std::string prefix =
      spec.name.starts_with(kMtpLayerPrefix) ? kMtpLayerPrefix : "layers." + std::to_string(spec.layer) + ".";
  const std::string suffix = spec.name.substr(prefix.size());
  if (suffix == "post_attention_layernorm.weight") {
    return blk + (family == ModelFamily::kQwen3 ? "ffn_norm.weight" : "post_attention_norm.weight");
  }
  auto it = LayerGgufNames().find(suffix);
  if (it == LayerGgufNames().end()) throw vt::Error("GgufWeightName: unknown layer weight '" + spec.name + "'");
  return blk + it->second;
}

}  // namespace vllm
