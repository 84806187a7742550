// ModelConfig: everything the Qwen3.5 (dense, MoE) and Qwen3 forward passes need,
// one struct whether it came from an HF config.json or from GGUF metadata.
//
// Sources (docs/qwen35.md §1, §5.2):
//   HF:   ModelConfigFromHfJson(config.json [, generation_config.json]); nested
//         `text_config` (*ForConditionalGeneration) or flat (*ForCausalLM);
//         rope_parameters or top-level rope fields; layer_types or
//         full_attention_interval; tie_word_embeddings at either level.
//   GGUF: ModelConfigFromGguf(file) for the architectures qwen35, qwen35moe, qwen3.
// Fields only one source has: `architecture` (the HF class name or the GGUF arch),
// `gdn_tiled_value_heads` (true for GGUF, see below), and the token ids: a GGUF
// carries one eos id (tokenizer.ggml.eos_token_id, which converters take from
// tokenizer_config.json's eos_token), HF may list several (generation_config.json).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vt/dtype.h"

namespace vllm {

class GgufFile;
class GgufMetadata;

enum class ModelFamily {
  kQwen3_5,     // Qwen3.5 / 3.6 dense: GDN + gated attention, zero-centred norms
  kQwen3_5Moe,  // the same with a routed MoE + shared expert in every layer
  kQwen3,       // Qwen3 dense: attention only, plain norms, full rotary
};
const char* ModelFamilyName(ModelFamily family);  // "qwen3.5", "qwen3.5-moe", "qwen3"

enum class LayerType { kFullAttention, kLinearAttention };
const char* LayerTypeName(LayerType type);  // "full_attention" / "linear_attention" (HF's words)

// Limits far beyond any real model: parsers refuse larger counts as corrupt before
// sizing anything by them.
inline constexpr int64_t kMaxNumLayers = 1 << 16;
inline constexpr int64_t kMaxNumExperts = 1 << 16;

// Receives warnings (e.g. a GGUF without rope.dimension_count). Empty: print to stderr.
using WarningSink = std::function<void(const std::string&)>;

struct ModelConfig {
  std::string architecture;  // "Qwen3_5ForConditionalGeneration", ..., or "qwen35", "qwen35moe", "qwen3"
  ModelFamily family = ModelFamily::kQwen3_5;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;  // the main stack; MTP layers are not counted
  // MTP (multi-token prediction) layers the checkpoint declares: HF
  // mtp_num_hidden_layers, GGUF nextn_predict_layers (docs/qwen35.md §8). Loaded only
  // with LoadOptions::load_mtp.
  int64_t mtp_num_hidden_layers = 0;
  int64_t intermediate_size = 0;  // dense MLP width (0 for MoE models)
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;  // lm_head is embed_tokens
  vt::DType dtype = vt::DType::kBF16;  // the dtype most weight-matrix elements are stored in

  // Full attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  // Leading dims of each head rotated (NeoX); 0 = no rotation (never replaced by head_dim).
  int64_t rotary_dim = 0;
  float rope_theta = 10000.0f;
  bool attn_output_gate = false;  // q_proj emits [q_h | gate_h] per head (Qwen3.5)
  // Norms compute x_hat * (1 + w) (Qwen3.5, in HF's convention, also after GGUF
  // loading) rather than x_hat * w (Qwen3; and the GDN gated norm in every family).
  bool zero_centered_norms = false;

  std::vector<LayerType> layer_types;  // one per main layer

  // Gated DeltaNet (linear attention) layers.
  int64_t linear_num_key_heads = 0;    // Hk
  int64_t linear_num_value_heads = 0;  // Hv
  int64_t linear_key_head_dim = 0;     // Dk
  int64_t linear_value_head_dim = 0;   // Dv
  int64_t linear_conv_kernel_dim = 0;  // K
  // Value heads stored in GGUF's tiled order (value head j reads key head j % Hk)
  // instead of HF's grouped order (j / (Hv/Hk)); pass to vt::GdnArgs::tiled_value_heads.
  bool gdn_tiled_value_heads = false;

  // Mixture of experts (Qwen3.5 MoE).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;  // renormalise the top-k router weights
  // Expert parallelism (a rank's shard, distributed/tensor_parallel.h): the rank holds
  // the experts [expert_begin, expert_begin + local_experts) of num_experts; 0: all.
  int64_t local_experts = 0;
  int64_t expert_begin = 0;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;

  bool is_moe() const { return family == ModelFamily::kQwen3_5Moe; }
  int64_t num_local_experts() const { return local_experts > 0 ? local_experts : num_experts; }
  bool has_linear_attention() const;
  int64_t num_layers_of(LayerType type) const;
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
  int64_t q_proj_rows() const { return num_attention_heads * head_dim * (attn_output_gate ? 2 : 1); }

  bool operator==(const ModelConfig& other) const = default;
};

// Checks the fields against each other (heads divide, rotary_dim even and <= head_dim,
// one layer type per layer, ...); throws vt::Error naming `source` and the field.
void ValidateModelConfig(const ModelConfig& config, const std::string& source);

// From the parsed config.json (and generation_config.json, may be null, for the eos/bos
// ids). `source` names the file in errors. `dtype` is torch_dtype/dtype if present
// (the loaders replace it by what the weights are stored in).
ModelConfig ModelConfigFromHfJson(const nlohmann::json& config, const nlohmann::json* generation_config,
                                  const std::string& source);
// Reads FOLDER/config.json and FOLDER/generation_config.json (if present).
ModelConfig LoadHfConfig(const std::string& folder);

// From a GGUF's metadata and tensor list: vocab_size from `<arch>.vocab_size`, else
// the token_embd rows; tie_word_embeddings when output.weight is absent;
// num_hidden_layers = block_count - nextn_predict_layers; rotary_dim from
// `<arch>.rope.dimension_count`, 0 with a warning when a qwen35/qwen35moe file lacks
// it (Qwen3 rotates whole heads, so a qwen3 file without it gets head_dim, as in
// llama.cpp). gdn_tiled_value_heads is true for files with GDN layers.
ModelConfig ModelConfigFromGguf(const GgufFile& file, const WarningSink& warn = {});

// "qwen35", "qwen35moe" or "qwen3".
const char* GgufArchitectureName(ModelFamily family);
// Writes general.architecture and the `<arch>.*` keys of `config` (docs/qwen35.md §5.2),
// the inverse of ModelConfigFromGguf; bos/eos ids go to tokenizer.ggml.*_token_id.
// Throws if the layer types are not "every n-th layer is full attention".
void WriteGgufModelConfig(const ModelConfig& config, GgufMetadata& metadata);

// The same fields as a readable multi-line listing ("  hidden_size: 64\n...").
std::string DescribeModelConfig(const ModelConfig& config);

}  // namespace vllm
