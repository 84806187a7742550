// Small model fixtures for tests: HF checkpoint folders (config.json, safetensors,
// tokenizer) and GGUF files, written with the project's own writers from seeded
// random weights. Any test that needs a model on disk builds one here:
//
//   std::string gguf = vllm::testing::BuildDenseF16Gguf(vllm::testing::DenseDims{}, false, true);
//   vllm::testing::TempDir dir;
//   vllm::ModelConfig config = vllm::testing::MoeConfig(vllm::testing::MoeDims{});
//   vllm::testing::WriteHfFolder(dir.path(), config, {.dtype = vt::DType::kF32, .seed = 7});
//
// Every weight is random (norms, A_log and dt_bias included) so that a mistake in
// any term shows up in a comparison. GGUF files are converted from an HF folder by
// vllm::PlanHfToGguf, exactly as `vllm-cpp convert` does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vllm/config/model_config.h"
#include "vllm/model_loader/gguf_writer.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vt/tensor.h"

namespace vllm::testing {

// A new folder under the system temp dir, deleted with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline constexpr LayerType kFull = LayerType::kFullAttention;
inline constexpr LayerType kLinear = LayerType::kLinearAttention;

// Qwen3.5 dense. The defaults are issue 3's fixture: hidden 64, vocab 32, 2 query
// heads, 1 KV head, head width 32, two full-attention layers.
struct DenseDims {
  int64_t vocab_size = 32;
  int64_t hidden_size = 64;
  int64_t num_attention_heads = 2;
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 32;
  int64_t rotary_dim = 8;  // head_dim x partial_rotary_factor
  int64_t intermediate_size = 96;
  std::vector<LayerType> layer_types = {kFull, kFull};
  // GDN layers (used when layer_types has kLinear). The grouped and tiled value-head
  // orders differ only when Hk > 1 and Hv > Hk, as here.
  int64_t linear_num_key_heads = 2;
  int64_t linear_num_value_heads = 4;
  int64_t linear_key_head_dim = 16;
  int64_t linear_value_head_dim = 16;
  int64_t linear_conv_kernel_dim = 4;
  float rope_theta = 1e7f;
  int64_t max_position_embeddings = 256;
};

// Qwen3.5 MoE (every layer MoE).
struct MoeDims {
  DenseDims base = {.intermediate_size = 0, .layer_types = {kLinear, kFull}};
  int64_t num_experts = 4;
  int64_t num_experts_per_tok = 2;
  int64_t moe_intermediate_size = 32;
  int64_t shared_expert_intermediate_size = 48;
};

// Qwen3 dense (attention only, plain norms, whole-head rotary).
struct Qwen3Dims {
  int64_t vocab_size = 32;
  int64_t hidden_size = 64;
  int64_t num_attention_heads = 2;
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 32;
  int64_t intermediate_size = 96;
  int64_t num_hidden_layers = 2;
  float rope_theta = 1e6f;
  int64_t max_position_embeddings = 256;
};

// Dims whose every matrix row is whole 256-value K-quant blocks (hidden 256,
// Nq*D = Hv*Dv = I = 256; Hk 2, Hv 4, Dv 64, so an out_proj row block holds four
// value heads), three GDN layers and one attention layer.
DenseDims KQuantDenseDims();

ModelConfig DenseConfig(const DenseDims& dims, bool tie_word_embeddings = false);
ModelConfig MoeConfig(const MoeDims& dims, bool tie_word_embeddings = false);
ModelConfig Qwen3Config(const Qwen3Dims& dims, bool tie_word_embeddings = false);

struct HfFolderOptions {
  vt::DType dtype = vt::DType::kBF16;  // f32, f16 or bf16
  uint32_t seed = 1;
  // Qwen3.5: *ForConditionalGeneration layout (nested text_config,
  // model.language_model.* names, a model.visual.* tensor); false: *ForCausalLM.
  bool vlm_layout = true;
  // An mtp.* tensor, which loaders skip; a config with mtp_num_hidden_layers 1 gets
  // the whole module instead (random, MtpWeightSpecs), and config.json says so.
  bool with_mtp = true;
  bool fused_experts = true;    // MoE: experts.gate_up_proj [E, 2I, H]; false: per-expert tensors
  int num_shards = 1;           // > 1: model-0000k-of-0000n.safetensors + index
  bool with_tokenizer = true;   // a tiny BPE tokenizer.json + tokenizer_config.json
};

// config.json as transformers writes it for `config`.
nlohmann::json HfConfigJson(const ModelConfig& config, const HfFolderOptions& options);
// The safetensors contents: HF names and shapes, random values rounded to options.dtype.
std::vector<std::pair<std::string, vt::Tensor>> RandomHfWeights(const ModelConfig& config,
                                                                const HfFolderOptions& options);
// Writes the whole folder (created if needed); returns `folder`.
std::string WriteHfFolder(const std::string& folder, const ModelConfig& config, const HfFolderOptions& options = {});

// Converts `hf_folder` with the project's converter; `edit` may change the plan
// (e.g. drop a metadata key) before it is written. Returns `gguf_path`.
std::string WriteGgufFromHf(const std::string& hf_folder, const std::string& gguf_path, GgufOutType outtype,
                            const std::function<void(GgufWriter&)>& edit = {});

// Files in a per-process temp folder removed at exit; each call writes a new file.
// Issue 3's dense fixture: an F16 qwen35 GGUF of `dims`, optionally without
// qwen35.rope.dimension_count.
std::string BuildDenseF16Gguf(const DenseDims& dims, bool tie_word_embeddings, bool omit_rope_dimension_count);
std::string BuildDenseGguf(const DenseDims& dims, GgufOutType outtype, uint32_t seed = 1);
std::string BuildMoeGguf(const MoeDims& dims, GgufOutType outtype, uint32_t seed = 1);
std::string BuildQwen3Gguf(const Qwen3Dims& dims, GgufOutType outtype, uint32_t seed = 1);
// The per-process folder those files go to (for HF folders a test wants to keep).
std::string FixtureFolder();

}  // namespace vllm::testing
