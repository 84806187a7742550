// ModelConfig helpers: names, consistency checks, the printable listing.
#include "vllm/config/model_config.h"

#include <sstream>

#include "vt/error.h"

namespace vllm {

const char* ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen3_5: return "qwen3.5";
    case ModelFamily::kQwen3_5Moe: return "qwen3.5-moe";
    case ModelFamily::kQwen3: return "qwen3";
  }
  return "unknown";
}

const char* LayerTypeName(LayerType type) {
  return type == LayerType::kFullAttention ? "full_attention" : "linear_attention";
}

bool ModelConfig::has_linear_attention() const { return num_layers_of(LayerType::kLinearAttention) > 0; }

int64_t ModelConfig::num_layers_of(LayerType type) const {
  int64_t n = 0;
  for (LayerType t : layer_types) n += t == type;
  return n;
}

namespace {

void Require(bool ok, const std::string& source, const std::string& what) {
  if (!ok) throw vt::Error(source + ": invalid model config: " + what);
}

std::string Field(const char* name, int64_t value) { return std::string(name) + " = " + std::to_string(value); }

void ValidateAttention(const ModelConfig& c, const std::string& source) {
  Require(c.num_attention_heads > 0, source, Field("num_attention_heads", c.num_attention_heads) + ", expected > 0");
  Require(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, source,
          Field("num_key_value_heads", c.num_key_value_heads) + ", expected a divisor of num_attention_heads (" +
              std::to_string(c.num_attention_heads) + ")");
  Require(c.head_dim > 0, source, Field("head_dim", c.head_dim) + ", expected > 0");
  Require(c.rotary_dim >= 0 && c.rotary_dim <= c.head_dim && c.rotary_dim % 2 == 0, source,
          Field("rotary_dim", c.rotary_dim) + ", expected an even number in [0, head_dim = " +
              std::to_string(c.head_dim) + "]");
}

void ValidateLinearAttention(const ModelConfig& c, const std::string& source) {
  Require(c.family != ModelFamily::kQwen3, source, "Qwen3 has no linear-attention layers");
  Require(c.linear_num_key_heads > 0 && c.linear_key_head_dim > 0 && c.linear_value_head_dim > 0 &&
              c.linear_conv_kernel_dim > 0,
          source, "linear-attention layers need positive linear_num_key_heads, linear_key_head_dim, "
                  "linear_value_head_dim and linear_conv_kernel_dim");
  Require(c.linear_num_value_heads > 0 && c.linear_num_value_heads % c.linear_num_key_heads == 0, source,
          Field("linear_num_value_heads", c.linear_num_value_heads) + ", expected a multiple of linear_num_key_heads (" +
              std::to_string(c.linear_num_key_heads) + ")");
}

void ValidateFeedForward(const ModelConfig& c, const std::string& source) {
  if (!c.is_moe()) {
    Require(c.intermediate_size > 0, source, Field("intermediate_size", c.intermediate_size) + ", expected > 0");
    return;
  }
  Require(c.num_experts > 0 && c.moe_intermediate_size > 0, source,
          "MoE models need num_experts > 0 and moe_intermediate_size > 0, got " + Field("num_experts", c.num_experts) +
              ", " + Field("moe_intermediate_size", c.moe_intermediate_size));
  Require(c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.num_experts, source,
          Field("num_experts_per_tok", c.num_experts_per_tok) + ", expected 1.." + std::to_string(c.num_experts));
  Require(c.shared_expert_intermediate_size > 0, source,
          Field("shared_expert_intermediate_size", c.shared_expert_intermediate_size) + ", expected > 0");
}

// Far beyond any real model; a larger value is a corrupt or hostile file, refused
// before anything is sized by it.
constexpr int64_t kMaxDim = int64_t{1} << 31;

void ValidateSizes(const ModelConfig& c, const std::string& source) {
  const std::pair<const char*, int64_t> dims[] = {
      {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size}, {"intermediate_size", c.intermediate_size},
      {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim}, {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads}, {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim}, {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"shared_expert_intermediate_size", c.shared_expert_intermediate_size}};
  for (const auto& [name, value] : dims) {
    Require(value >= 0 && value < kMaxDim, source, Field(name, value) + ", expected 0 <= value < 2^31");
  }
  Require(c.num_hidden_layers <= kMaxNumLayers, source,
          Field("num_hidden_layers", c.num_hidden_layers) + ", expected at most " + std::to_string(kMaxNumLayers));
  Require(c.num_experts >= 0 && c.num_experts <= kMaxNumExperts, source,
          Field("num_experts", c.num_experts) + ", expected 0.." + std::to_string(kMaxNumExperts));
}

}  // namespace

void ValidateModelConfig(const ModelConfig& c, const std::string& source) {
  ValidateSizes(c, source);
  Require(c.vocab_size > 0, source, Field("vocab_size", c.vocab_size) + ", expected > 0");
  Require(c.hidden_size > 0, source, Field("hidden_size", c.hidden_size) + ", expected > 0");
  Require(c.num_hidden_layers > 0, source, Field("num_hidden_layers", c.num_hidden_layers) + ", expected > 0");
  Require(static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers, source,
          std::to_string(c.layer_types.size()) + " layer types for " + Field("num_hidden_layers", c.num_hidden_layers));
  Require(c.rms_norm_eps > 0, source, "rms_norm_eps must be > 0");
  Require(c.mtp_num_hidden_layers >= 0, source, Field("mtp_num_hidden_layers", c.mtp_num_hidden_layers) + ", expected >= 0");
  if (c.num_layers_of(LayerType::kFullAttention) > 0) ValidateAttention(c, source);
  if (c.has_linear_attention()) ValidateLinearAttention(c, source);
  ValidateFeedForward(c, source);
}

std::string DescribeModelConfig(const ModelConfig& c) {
  std::ostringstream out;
  auto line = [&](const char* name, const auto& value) { out << "  " << name << ": " << value << "\n"; };
  line("architecture", c.architecture);
  line("family", ModelFamilyName(c.family));
  line("dtype", vt::DTypeName(c.dtype));
  line("vocab_size", c.vocab_size);
  line("hidden_size", c.hidden_size);
  line("num_hidden_layers", c.num_hidden_layers);
  if (c.mtp_num_hidden_layers > 0) line("mtp_num_hidden_layers", c.mtp_num_hidden_layers);
  std::string types;
  for (LayerType t : c.layer_types) types += t == LayerType::kFullAttention ? 'F' : 'L';
  line("layer_types (F full, L linear)", types);
  line("intermediate_size", c.intermediate_size);
  line("max_position_embeddings", c.max_position_embeddings);
  line("rms_norm_eps", c.rms_norm_eps);
  line("tie_word_embeddings", c.tie_word_embeddings ? "true" : "false");
  line("zero_centered_norms", c.zero_centered_norms ? "true" : "false");
  line("num_attention_heads", c.num_attention_heads);
  line("num_key_value_heads", c.num_key_value_heads);
  line("head_dim", c.head_dim);
  line("rotary_dim", c.rotary_dim);
  line("rope_theta", c.rope_theta);
  line("attn_output_gate", c.attn_output_gate ? "true" : "false");
  if (c.has_linear_attention()) {
    line("linear_num_key_heads", c.linear_num_key_heads);
    line("linear_num_value_heads", c.linear_num_value_heads);
    line("linear_key_head_dim", c.linear_key_head_dim);
    line("linear_value_head_dim", c.linear_value_head_dim);
    line("linear_conv_kernel_dim", c.linear_conv_kernel_dim);
    line("gdn_tiled_value_heads", c.gdn_tiled_value_heads ? "true" : "false");
  }
  if (c.is_moe()) {
    line("num_experts", c.num_experts);
    line("num_experts_per_tok", c.num_experts_per_tok);
    line("moe_intermediate_size", c.moe_intermediate_size);
    line("shared_expert_intermediate_size", c.shared_expert_intermediate_size);
    line("norm_topk_prob", c.norm_topk_prob ? "true" : "false");
  }
  line("bos_token_id", c.bos_token_id ? std::to_string(*c.bos_token_id) : std::string("none"));
  std::string eos;
  for (int64_t id : c.eos_token_ids) eos += (eos.empty() ? "" : ", ") + std::to_string(id);
  line("eos_token_ids", eos.empty() ? std::string("none") : eos);
  return out.str();
}

}  // namespace vllm
