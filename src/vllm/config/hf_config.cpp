// ModelConfig from a Hugging Face config.json (docs/qwen35.md §1).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vllm/config/model_config.h"
#include "vt/error.h"

namespace vllm {
namespace {

using nlohmann::json;

struct Architecture {
  const char* name;
  ModelFamily family;
};
constexpr Architecture kArchitectures[] = {
    {"Qwen3_5ForConditionalGeneration", ModelFamily::kQwen3_5},
    {"Qwen3_5ForCausalLM", ModelFamily::kQwen3_5},
    {"Qwen3_5MoeForConditionalGeneration", ModelFamily::kQwen3_5Moe},
    {"Qwen3_5MoeForCausalLM", ModelFamily::kQwen3_5Moe},
    {"Qwen3ForCausalLM", ModelFamily::kQwen3},
};

// Looks a key up in text_config first, then at the top level (a flat config is both).
class Fields {
 public:
  Fields(const json& top, const std::string& source) : top_(top), source_(source) {
    text_ = top.contains("text_config") && top["text_config"].is_object() ? &top["text_config"] : &top;
    prefix_ = text_ == &top ? "" : "text_config.";
  }

  const json* Find(const std::string& key) const {
    if (text_->contains(key) && !(*text_)[key].is_null()) return &(*text_)[key];
    if (top_.contains(key) && !top_[key].is_null()) return &top_[key];
    return nullptr;
  }

  int64_t Int(const std::string& key) const {
    const json* v = Find(key);
    if (!v) throw vt::Error(source_ + ": missing key '" + prefix_ + key + "'");
    return AsInt(key, *v);
  }
  int64_t Int(const std::string& key, int64_t fallback) const { return Find(key) ? Int(key) : fallback; }

  double Number(const std::string& key, double fallback) const {
    const json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_number()) Wrong(key, *v, "a number");
    return v->get<double>();
  }
  bool Bool(const std::string& key, bool fallback) const {
    const json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) Wrong(key, *v, "true or false");
    return v->get<bool>();
  }

  int64_t AsInt(const std::string& key, const json& v) const {
    if (!v.is_number_integer()) Wrong(key, v, "an integer");
    return v.get<int64_t>();
  }
  [[noreturn]] void Wrong(const std::string& key, const json& v, const std::string& expected) const {
    throw vt::Error(source_ + ": key '" + prefix_ + key + "' is " + v.dump().substr(0, 80) + ", expected " + expected);
  }

  const json& text() const { return *text_; }
  const std::string& source() const { return source_; }

 private:
  const json& top_;
  const json* text_;
  std::string prefix_;
  std::string source_;
};

Architecture FindArchitecture(const json& config, const std::string& source) {
  if (!config.contains("architectures") || !config["architectures"].is_array() || config["architectures"].empty() ||
      !config["architectures"][0].is_string()) {
    throw vt::Error(source + ": missing key 'architectures' (a list with the model class name)");
  }
  const std::string name = config["architectures"][0].get<std::string>();
  std::string supported;
  for (const Architecture& a : kArchitectures) {
    if (name == a.name) return a;
    supported += (supported.empty() ? "" : ", ") + std::string(a.name);
  }
  throw vt::Error(source + ": architecture '" + name + "' is not supported (supported: " + supported + ")");
}

// rope_parameters (newer transformers) or rope_scaling (older); both may be absent.
const json* RopeParameters(const Fields& f) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (const json* p = f.Find(key); p && p->is_object()) return p;
  }
  return nullptr;
}

void ReadRope(const Fields& f, ModelConfig& c) {
  const json* rope = RopeParameters(f);
  auto number = [&](const char* key, double fallback) {
    if (rope && rope->contains(key) && (*rope)[key].is_number()) return (*rope)[key].get<double>();
    return f.Number(key, fallback);
  };
  if (rope) {
    std::string type = "default";
    for (const char* key : {"type", "rope_type"}) {
      if (rope->contains(key) && (*rope)[key].is_string()) type = (*rope)[key].get<std::string>();
    }
    if (type != "default" && type != "mrope") {
      throw vt::Error(f.source() + ": rope type '" + type + "' is not supported (only plain RoPE: 'default')");
    }
  }
  c.rope_theta = static_cast<float>(number("rope_theta", 10000.0));
  // HF falls back to 0.25 for Qwen3.5; Qwen3 rotates the whole head.
  const double factor = number("partial_rotary_factor", c.family == ModelFamily::kQwen3 ? 1.0 : 0.25);
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);  // Python's int(): truncation
}

void ReadLayerTypes(const Fields& f, ModelConfig& c) {
  c.layer_types.clear();
  if (c.num_hidden_layers < 0 || c.num_hidden_layers > kMaxNumLayers) {
    throw vt::Error(f.source() + ": num_hidden_layers = " + std::to_string(c.num_hidden_layers) + ", expected 0.." +
                    std::to_string(kMaxNumLayers));
  }
  if (const json* types = f.Find("layer_types")) {
    if (!types->is_array()) f.Wrong("layer_types", *types, "a list of layer type names");
    for (const json& t : *types) {
      if (t == "full_attention") c.layer_types.push_back(LayerType::kFullAttention);
      else if (t == "linear_attention" && c.family != ModelFamily::kQwen3) c.layer_types.push_back(LayerType::kLinearAttention);
      else f.Wrong("layer_types", t, c.family == ModelFamily::kQwen3 ? "\"full_attention\"" : "\"full_attention\" or \"linear_attention\"");
    }
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
      throw vt::Error(f.source() + ": layer_types has " + std::to_string(c.layer_types.size()) +
                      " entries, expected num_hidden_layers = " + std::to_string(c.num_hidden_layers));
    }
    return;
  }
  if (c.family == ModelFamily::kQwen3) {
    c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), LayerType::kFullAttention);
    return;
  }
  const int64_t interval = f.Int("full_attention_interval", 4);
  if (interval <= 0) f.Wrong("full_attention_interval", interval, "a positive integer");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  }
}

std::vector<int64_t> TokenIds(const Fields& f, const json* generation, const char* key) {
  const json* v = nullptr;
  if (generation && generation->is_object() && generation->contains(key) && !(*generation)[key].is_null()) {
    v = &(*generation)[key];
  } else {
    v = f.Find(key);
  }
  if (!v) return {};
  if (v->is_array()) {
    std::vector<int64_t> ids;
    for (const json& id : *v) ids.push_back(f.AsInt(key, id));
    return ids;
  }
  return {f.AsInt(key, *v)};
}

void ReadDtype(const Fields& f, ModelConfig& c) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (const json* v = f.Find(key); v && v->is_string()) {
      try {
        c.dtype = vt::ParseDType(v->get<std::string>());
      } catch (const std::exception&) {
        f.Wrong(key, *v, "\"float32\", \"float16\" or \"bfloat16\"");
      }
      return;
    }
  }
}

}  // namespace

ModelConfig ModelConfigFromHfJson(const json& config, const json* generation, const std::string& source) {
  if (!config.is_object()) throw vt::Error(source + ": expected a JSON object");
  const Architecture arch = FindArchitecture(config, source);
  const Fields f(config, source);
  ModelConfig c;
  c.architecture = arch.name;
  c.family = arch.family;
  const bool qwen3_5 = c.family != ModelFamily::kQwen3;
  c.vocab_size = f.Int("vocab_size");
  c.hidden_size = f.Int("hidden_size");
  c.num_hidden_layers = f.Int("num_hidden_layers");
  c.mtp_num_hidden_layers = qwen3_5 ? f.Int("mtp_num_hidden_layers", 0) : 0;
  c.max_position_embeddings = f.Int("max_position_embeddings");
  c.rms_norm_eps = static_cast<float>(f.Number("rms_norm_eps", 1e-6));
  c.tie_word_embeddings = f.Bool("tie_word_embeddings", false);
  c.num_attention_heads = f.Int("num_attention_heads");
  c.num_key_value_heads = f.Int("num_key_value_heads", c.num_attention_heads);
  c.head_dim = f.Int("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  c.attn_output_gate = qwen3_5 && f.Bool("attn_output_gate", true);
  c.zero_centered_norms = qwen3_5;
  ReadRope(f, c);
  ReadLayerTypes(f, c);
  ReadDtype(f, c);
  if (c.has_linear_attention()) {
    c.linear_num_key_heads = f.Int("linear_num_key_heads");
    c.linear_num_value_heads = f.Int("linear_num_value_heads");
    c.linear_key_head_dim = f.Int("linear_key_head_dim");
    c.linear_value_head_dim = f.Int("linear_value_head_dim");
    c.linear_conv_kernel_dim = f.Int("linear_conv_kernel_dim");
  }
  if (c.is_moe()) {
    c.num_experts = f.Int("num_experts");
    c.num_experts_per_tok = f.Int("num_experts_per_tok");
    c.moe_intermediate_size = f.Int("moe_intermediate_size");
    c.shared_expert_intermediate_size = f.Int("shared_expert_intermediate_size");
    c.norm_topk_prob = f.Bool("norm_topk_prob", true);
  } else {
    c.intermediate_size = f.Int("intermediate_size");
  }
  if (std::vector<int64_t> bos = TokenIds(f, generation, "bos_token_id"); !bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = TokenIds(f, generation, "eos_token_id");
  ValidateModelConfig(c, source);
  return c;
}

ModelConfig LoadHfConfig(const std::string& folder) {
  namespace fs = std::filesystem;
  auto read = [](const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw vt::Error(path.string() + ": cannot open");
    try {
      return json::parse(in);
    } catch (const json::exception& e) {
      throw vt::Error(path.string() + ": not valid JSON: " + e.what());
    }
  };
  const fs::path config_path = fs::path(folder) / "config.json";
  if (!fs::exists(config_path)) throw vt::Error(folder + ": no config.json in this folder");
  const json config = read(config_path);
  const fs::path generation_path = fs::path(folder) / "generation_config.json";
  if (!fs::exists(generation_path)) return ModelConfigFromHfJson(config, nullptr, config_path.string());
  const json generation = read(generation_path);
  return ModelConfigFromHfJson(config, &generation, config_path.string());
}

}  // namespace vllm
