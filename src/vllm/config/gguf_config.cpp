// ModelConfig from GGUF metadata, and back (docs/qwen35.md §5.2).
#include <cstdio>
#include <map>

#include "vllm/config/model_config.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vt/error.h"

namespace vllm {
namespace {

// Qwen3.5's mrope sections padded to 4; llama.cpp's qwen35 loader requires the key.
const std::vector<int64_t> kRopeSections = {11, 11, 10, 0};

void Warn(const WarningSink& warn, const std::string& message) {
  if (warn) warn(message);
  else std::fprintf(stderr, "vllm-cpp: warning: %s\n", message.c_str());
}

ModelFamily FamilyOf(const std::string& arch, const std::string& source) {
  if (arch == "qwen35") return ModelFamily::kQwen3_5;
  if (arch == "qwen35moe") return ModelFamily::kQwen3_5Moe;
  if (arch == "qwen3") return ModelFamily::kQwen3;
  throw vt::Error(source + ": general.architecture '" + arch + "' is not supported (supported: qwen35, qwen35moe, qwen3)");
}

// A head count may be stored per layer (an array); all layers must agree here.
int64_t HeadCount(const GgufMetadata& m, const std::string& key, int64_t layers) {
  const GgufValue& v = m.Get(key);
  if (!v.is_array()) return m.GetInt(key);
  const std::vector<int64_t> counts = m.GetIntArray(key);
  for (int64_t i = 0; i < layers && i < static_cast<int64_t>(counts.size()); ++i) {
    if (counts[i] != counts[0]) {
      throw vt::Error(m.source() + ": metadata key '" + key + "' gives layer " + std::to_string(i) + " " +
                      std::to_string(counts[i]) + " heads and layer 0 " + std::to_string(counts[0]) +
                      "; per-layer head counts are not supported");
    }
  }
  if (counts.empty()) throw vt::Error(m.source() + ": metadata key '" + key + "' is an empty array");
  return counts[0];
}

void ReadLayerTypes(const GgufMetadata& m, const std::string& a, ModelConfig& c) {
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), LayerType::kFullAttention);
  if (c.family == ModelFamily::kQwen3) return;
  if (m.Has(a + ".attention.recurrent_layers")) {
    const std::vector<int64_t> recurrent = m.GetIntArray(a + ".attention.recurrent_layers");
    if (static_cast<int64_t>(recurrent.size()) < c.num_hidden_layers) {
      throw vt::Error(m.source() + ": metadata key '" + a + ".attention.recurrent_layers' has " +
                      std::to_string(recurrent.size()) + " entries, expected at least " +
                      std::to_string(c.num_hidden_layers));
    }
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (recurrent[i]) c.layer_types[i] = LayerType::kLinearAttention;
    }
    return;
  }
  const int64_t interval = m.GetInt(a + ".full_attention_interval");
  if (interval <= 0) {
    throw vt::Error(m.source() + ": metadata key '" + a + ".full_attention_interval' is " + std::to_string(interval) +
                    ", expected > 0");
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if ((i + 1) % interval != 0) c.layer_types[i] = LayerType::kLinearAttention;
  }
}

void ReadLinearAttention(const GgufMetadata& m, const std::string& a, ModelConfig& c) {
  c.linear_conv_kernel_dim = m.GetInt(a + ".ssm.conv_kernel");
  c.linear_key_head_dim = m.GetInt(a + ".ssm.state_size");
  c.linear_num_key_heads = m.GetInt(a + ".ssm.group_count");
  c.linear_num_value_heads = m.GetInt(a + ".ssm.time_step_rank");
  const int64_t inner = m.GetInt(a + ".ssm.inner_size");
  if (c.linear_num_value_heads <= 0 || inner % c.linear_num_value_heads != 0) {
    throw vt::Error(m.source() + ": metadata key '" + a + ".ssm.inner_size' is " + std::to_string(inner) +
                    ", expected a multiple of ssm.time_step_rank (" + std::to_string(c.linear_num_value_heads) + ")");
  }
  c.linear_value_head_dim = inner / c.linear_num_value_heads;
  c.gdn_tiled_value_heads = true;
}

// The dtype holding the most elements among the weight matrices (2 dims or more).
vt::DType MajorityMatrixDtype(const GgufFile& file) {
  std::map<vt::DType, int64_t> elements;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.ne.size() >= 2 && t.Type().dtype) elements[*t.Type().dtype] += t.NumElements();
  }
  vt::DType best = vt::DType::kF32;
  int64_t most = -1;
  for (const auto& [dtype, n] : elements) {
    if (n > most) best = dtype, most = n;
  }
  return best;
}

int64_t VocabSize(const GgufFile& file, const std::string& a) {
  const GgufMetadata& m = file.metadata();
  if (auto v = m.FindInt(a + ".vocab_size")) return *v;
  if (const GgufTensorInfo* embd = file.FindTensor("token_embd.weight"); embd && embd->ne.size() == 2) {
    return embd->ne[1];
  }
  if (m.Has("tokenizer.ggml.tokens")) return static_cast<int64_t>(m.Get("tokenizer.ggml.tokens").ArraySize());
  throw vt::Error(file.path() + ": cannot tell the vocabulary size (no " + a +
                  ".vocab_size, token_embd.weight or tokenizer.ggml.tokens)");
}

void ReadAttention(const GgufMetadata& m, const std::string& a, ModelConfig& c, const WarningSink& warn) {
  c.num_attention_heads = HeadCount(m, a + ".attention.head_count", c.num_hidden_layers);
  c.num_key_value_heads =
      m.Has(a + ".attention.head_count_kv") ? HeadCount(m, a + ".attention.head_count_kv", c.num_hidden_layers)
                                            : c.num_attention_heads;
  c.head_dim = m.FindInt(a + ".attention.key_length")
                   .value_or(c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  if (auto v = m.FindInt(a + ".attention.value_length"); v && *v != c.head_dim) {
    throw vt::Error(m.source() + ": metadata key '" + a + ".attention.value_length' is " + std::to_string(*v) +
                    ", expected it to equal attention.key_length (" + std::to_string(c.head_dim) + ")");
  }
  c.rope_theta = static_cast<float>(m.FindFloat(a + ".rope.freq_base").value_or(10000.0));
  if (auto rot = m.FindInt(a + ".rope.dimension_count")) {
    c.rotary_dim = *rot;
  } else if (c.family == ModelFamily::kQwen3) {
    c.rotary_dim = c.head_dim;  // Qwen3 rotates whole heads; llama.cpp's default for a missing key
  } else {
    c.rotary_dim = 0;
    Warn(warn, m.source() + ": metadata key '" + a +
                   ".rope.dimension_count' is missing; rotary width 0: attention runs without rotary "
                   "embedding (Qwen3.5 checkpoints use 64 = head_dim x partial_rotary_factor)");
  }
  c.attn_output_gate = c.family != ModelFamily::kQwen3;
}

}  // namespace

const char* GgufArchitectureName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen3_5: return "qwen35";
    case ModelFamily::kQwen3_5Moe: return "qwen35moe";
    case ModelFamily::kQwen3: return "qwen3";
  }
  return "unknown";
}

ModelConfig ModelConfigFromGguf(const GgufFile& file, const WarningSink& warn) {
  const GgufMetadata& m = file.metadata();
  ModelConfig c;
  c.architecture = m.GetString("general.architecture");
  c.family = FamilyOf(c.architecture, file.path());
  const std::string& a = c.architecture;
  c.hidden_size = m.GetInt(a + ".embedding_length");
  const int64_t blocks = m.GetInt(a + ".block_count");
  const int64_t nextn = m.FindInt(a + ".nextn_predict_layers").value_or(0);
  c.num_hidden_layers = blocks - nextn;
  c.mtp_num_hidden_layers = nextn;
  if (nextn < 0 || c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxNumLayers) {
    throw vt::Error(file.path() + ": " + a + ".block_count " + std::to_string(blocks) + " minus " + a +
                    ".nextn_predict_layers " + std::to_string(nextn) + " leaves " +
                    std::to_string(c.num_hidden_layers) + " main layers, expected 1.." + std::to_string(kMaxNumLayers));
  }
  c.max_position_embeddings = m.GetInt(a + ".context_length");
  c.rms_norm_eps = static_cast<float>(m.GetFloat(a + ".attention.layer_norm_rms_epsilon"));
  c.vocab_size = VocabSize(file, a);
  c.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  c.zero_centered_norms = c.family != ModelFamily::kQwen3;
  c.dtype = MajorityMatrixDtype(file);
  ReadAttention(m, a, c, warn);
  ReadLayerTypes(m, a, c);
  if (c.has_linear_attention()) ReadLinearAttention(m, a, c);
  if (c.is_moe()) {
    c.num_experts = m.GetInt(a + ".expert_count");
    c.num_experts_per_tok = m.GetInt(a + ".expert_used_count");
    c.moe_intermediate_size = m.GetInt(a + ".expert_feed_forward_length");
    c.shared_expert_intermediate_size = m.GetInt(a + ".expert_shared_feed_forward_length");
    c.norm_topk_prob = true;  // llama.cpp hard-codes renormalisation for qwen35moe
  } else {
    c.intermediate_size = m.GetInt(a + ".feed_forward_length");
  }
  if (auto bos = m.FindInt("tokenizer.ggml.bos_token_id")) c.bos_token_id = *bos;
  if (auto eos = m.FindInt("tokenizer.ggml.eos_token_id")) c.eos_token_ids = {*eos};
  ValidateModelConfig(c, file.path());
  return c;
}

namespace {

// The n with "layer i is full attention iff (i + 1) % n == 0", if there is one.
int64_t FullAttentionInterval(const ModelConfig& c) {
  for (int64_t n = 1; n <= c.num_hidden_layers + 1; ++n) {
    bool matches = true;
    for (int64_t i = 0; i < c.num_hidden_layers && matches; ++i) {
      matches = (c.layer_types[i] == LayerType::kFullAttention) == ((i + 1) % n == 0);
    }
    if (matches) return n;
  }
  throw vt::Error("GGUF cannot describe these layer types (not every n-th layer full attention): a qwen35 "
                  "file stores only full_attention_interval");
}

}  // namespace

void WriteGgufModelConfig(const ModelConfig& c, GgufMetadata& m) {
  const std::string a = GgufArchitectureName(c.family);
  auto u32 = [&](const std::string& key, int64_t v) { m.Set(a + "." + key, GgufValue::U32(static_cast<uint32_t>(v))); };
  auto f32 = [&](const std::string& key, float v) { m.Set(a + "." + key, GgufValue::F32(v)); };
  m.Set("general.architecture", GgufValue::String(a));
  u32("context_length", c.max_position_embeddings);
  u32("embedding_length", c.hidden_size);
  u32("block_count", c.num_hidden_layers + c.mtp_num_hidden_layers);  // the MTP blocks follow the main stack
  if (c.mtp_num_hidden_layers > 0) u32("nextn_predict_layers", c.mtp_num_hidden_layers);
  u32("vocab_size", c.vocab_size);
  u32("attention.head_count", c.num_attention_heads);
  u32("attention.head_count_kv", c.num_key_value_heads);
  u32("attention.key_length", c.head_dim);
  u32("attention.value_length", c.head_dim);
  f32("attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  f32("rope.freq_base", c.rope_theta);
  u32("rope.dimension_count", c.rotary_dim);
  if (!c.is_moe()) u32("feed_forward_length", c.intermediate_size);
  if (c.bos_token_id) m.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(static_cast<uint32_t>(*c.bos_token_id)));
  if (!c.eos_token_ids.empty()) {
    m.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(static_cast<uint32_t>(c.eos_token_ids[0])));
  }
  if (c.family == ModelFamily::kQwen3) return;
  m.Set(a + ".rope.dimension_sections", GgufValue::IntArray(GgufType::kInt32, kRopeSections));
  u32("full_attention_interval", FullAttentionInterval(c));
  if (c.has_linear_attention()) {
    u32("ssm.conv_kernel", c.linear_conv_kernel_dim);
    u32("ssm.state_size", c.linear_key_head_dim);
    u32("ssm.group_count", c.linear_num_key_heads);
    u32("ssm.time_step_rank", c.linear_num_value_heads);
    u32("ssm.inner_size", c.linear_value_dim());
  }
  if (c.is_moe()) {
    u32("expert_count", c.num_experts);
    u32("expert_used_count", c.num_experts_per_tok);
    u32("expert_feed_forward_length", c.moe_intermediate_size);
    u32("expert_shared_feed_forward_length", c.shared_expert_intermediate_size);
  }
}

}  // namespace vllm
