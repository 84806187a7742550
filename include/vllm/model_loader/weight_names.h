// The canonical weights of a model: names, shapes and kinds derived from a
// ModelConfig. Both loaders produce exactly this set, the converter writes it, and
// test fixtures fill it with random values; nothing else lists weight names.
//
// Canonical names are HF's without the `model.language_model.` / `model.` prefix:
//   embed_tokens.weight [V, H]            norm.weight [H]      lm_head.weight [V, H] (untied only)
//   layers.N.input_layernorm.weight [H]   layers.N.post_attention_layernorm.weight [H]
//   full attention:  layers.N.self_attn.{q_proj [q_proj_rows, H], k_proj / v_proj [Nkv*D, H],
//                    o_proj [H, Nq*D], q_norm / k_norm [D]}.weight
//   linear attention: layers.N.linear_attn.{in_proj_qkv [conv_dim, H], in_proj_z [Hv*Dv, H],
//                    in_proj_b / in_proj_a [Hv, H], out_proj [H, Hv*Dv], norm [Dv],
//                    conv1d [conv_dim, K]}.weight, layers.N.linear_attn.A [Hv] (= -exp(A_log)),
//                    layers.N.linear_attn.dt_bias [Hv]
//   dense MLP:       layers.N.mlp.{gate_proj, up_proj [I, H], down_proj [H, I]}.weight
//   MoE:             layers.N.mlp.gate.weight [E, H], layers.N.mlp.experts.{gate_proj, up_proj}
//                    [E, Ie, H], layers.N.mlp.experts.down_proj [E, H, Ie],
//                    layers.N.mlp.shared_expert.{gate_proj, up_proj [Is, H], down_proj [H, Is]}.weight,
//                    layers.N.mlp.shared_expert_gate.weight [1, H]
//   MTP (MtpWeightSpecs, docs/qwen35.md §8; names as the checkpoint's, layer = L):
//                    mtp.fc.weight [H, 2H], mtp.{pre_fc_norm_embedding, pre_fc_norm_hidden,
//                    norm}.weight [H], mtp.layers.0.* a full-attention layer with the model's FFN
#pragma once

#include <string>
#include <vector>

#include "vllm/config/model_config.h"
#include "vt/tensor.h"

namespace vllm {

enum class WeightKind {
  kMatrix,            // [out, in] projection: any dtype vt::MatMul takes, GGUF blocks included
  kEmbedding,         // embed_tokens [V, H]: vt::GatherRows takes GGUF blocks too
  kNorm,              // RMSNorm weight in HF's convention (x_hat * (1 + w) when zero_centered_norms)
  kGdnNorm,           // linear_attn.norm.weight: the plain weight of the gated norm, every family
  kGdnA,              // linear_attn.A = -exp(A_log)
  kGdnDtBias,         // linear_attn.dt_bias
  kGdnConv,           // linear_attn.conv1d.weight [conv_dim, K]
  kRouter,            // mlp.gate.weight [E, H]
  kSharedExpertGate,  // mlp.shared_expert_gate.weight [1, H]
  kExperts,           // mlp.experts.{gate_proj, up_proj, down_proj} [E, out, in]
};

struct WeightSpec {
  std::string name;  // canonical
  vt::Shape shape;
  WeightKind kind;
  int64_t layer = -1;  // -1 for the global weights
};

// Every weight the model of `config` has, in a fixed order (globals first, then
// layer by layer). lm_head.weight is listed only when the embeddings are untied.
std::vector<WeightSpec> ModelWeightSpecs(const ModelConfig& config);

// The MTP module's weights (config.mtp_num_hidden_layers must be 1, the layout of every
// Qwen3.5 release; throws naming the key otherwise). Their `layer` is
// num_hidden_layers, the GGUF block the converter writes them to.
std::vector<WeightSpec> MtpWeightSpecs(const ModelConfig& config);

// Kinds the loaders expand to f32 at load: norms, A, dt_bias, conv1d and the two
// MoE routing matrices (small; GGUF stores them in F32 anyway, so both sources give
// the same tensors). Every other weight stays in its stored dtype.
bool IsExpandedToF32(WeightKind kind);

// The GGUF tensor name of a canonical weight (docs/qwen35.md §5.3), e.g.
// layers.3.linear_attn.A -> blk.3.ssm_a; post_attention_layernorm is
// blk.N.post_attention_norm in qwen35/qwen35moe and blk.N.ffn_norm in qwen3; the MTP
// weights are blk.L.* (mtp.layers.0.*) and blk.L.nextn.{eh_proj, enorm, hnorm,
// shared_head_norm}.weight.
std::string GgufWeightName(const WeightSpec& spec, ModelFamily family);

}  // namespace vllm
