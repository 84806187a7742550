#include "vllm/testing/model_fixtures.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "vllm/model_loader/safetensors.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"

namespace vllm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Special tokens of the tiny tokenizer (ids 28 and 29 when vocab_size >= 32).
constexpr const char* kEndOfText = "<|endoftext|>";
constexpr const char* kImEnd = "<|im_end|>";

int64_t EndOfTextId(const ModelConfig& c) { return c.vocab_size - 4; }
int64_t ImEndId(const ModelConfig& c) { return c.vocab_size - 3; }

void WriteJson(const std::string& path, const json& value) {
  std::ofstream out(path);
  out << value.dump(2);
  if (!out) throw vt::Error("cannot write " + path);
}

ModelConfig CommonQwen35(const DenseDims& d, const char* arch, ModelFamily family, bool tie) {
  ModelConfig c;
  c.architecture = arch;
  c.family = family;
  c.vocab_size = d.vocab_size;
  c.hidden_size = d.hidden_size;
  c.num_hidden_layers = static_cast<int64_t>(d.layer_types.size());
  c.intermediate_size = d.intermediate_size;
  c.max_position_embeddings = d.max_position_embeddings;
  c.tie_word_embeddings = tie;
  c.num_attention_heads = d.num_attention_heads;
  c.num_key_value_heads = d.num_key_value_heads;
  c.head_dim = d.head_dim;
  c.rotary_dim = d.rotary_dim;
  c.rope_theta = d.rope_theta;
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
  c.layer_types = d.layer_types;
  if (c.has_linear_attention()) {
    c.linear_num_key_heads = d.linear_num_key_heads;
    c.linear_num_value_heads = d.linear_num_value_heads;
    c.linear_key_head_dim = d.linear_key_head_dim;
    c.linear_value_head_dim = d.linear_value_head_dim;
    c.linear_conv_kernel_dim = d.linear_conv_kernel_dim;
  }
  c.eos_token_ids = {ImEndId(c)};
  c.bos_token_id = EndOfTextId(c);
  return c;
}

// Uniform values for one weight, scaled like a trained model's (rows of unit-ish norm).
std::vector<float> RandomValues(const WeightSpec& spec, bool zero_centered, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(vt::NumElements(spec.shape)));
  const float fan_in = static_cast<float>(spec.shape.back());
  for (float& x : v) {
    const float r = u(rng);
    switch (spec.kind) {
      case WeightKind::kEmbedding: x = r; break;
      case WeightKind::kNorm: x = zero_centered ? 0.5f * r : 1.0f + 0.5f * r; break;
      case WeightKind::kGdnNorm: x = 1.0f + 0.5f * r; break;
      case WeightKind::kGdnA: x = 1.4f * (r + 1.0f); break;  // A_log in [0, 2.8): A in (-16, -1]
      case WeightKind::kGdnDtBias: x = r; break;
      default: x = r / std::sqrt(fan_in); break;
    }
  }
  return v;
}

vt::Tensor AsDtype(const std::vector<float>& values, const vt::Shape& shape, vt::DType dtype) {
  vt::Tensor f = vt::Tensor::FromVector(values, shape);
  if (dtype == vt::DType::kF32) return f;
  vt::Tensor out = vt::Tensor::Empty(shape, dtype);
  out.CopyFrom(f);
  return out;
}

std::string HfName(const ModelConfig& c, const HfFolderOptions& o, const std::string& canonical) {
  if (canonical == "lm_head.weight") return canonical;
  const bool vlm = o.vlm_layout && c.family != ModelFamily::kQwen3;
  return (vlm ? "model.language_model." : "model.") + canonical;
}

// MoE experts: gate and up of a layer are generated together so that the fused
// gate_up_proj and per-expert layouts hold the same values for the same seed.
void AddExperts(const ModelConfig& c, const HfFolderOptions& o, const WeightSpec& spec, std::mt19937& rng,
                std::vector<std::pair<std::string, vt::Tensor>>& out) {
  // "layers.N.mlp.experts." of the trunk (HF-prefixed), "mtp.layers.0.mlp.experts." of the MTP module.
  const std::string canonical_prefix = spec.name.substr(0, spec.name.rfind('.') + 1);
  const std::string prefix =
      canonical_prefix.rfind("mtp.", 0) == 0 ? canonical_prefix : HfName(c, o, canonical_prefix);
  const std::string proj = spec.name.substr(spec.name.rfind('.') + 1);
  if (proj == "up_proj") return;  // written with gate_proj
  const int64_t E = spec.shape[0], rows = spec.shape[1], cols = spec.shape[2];
  const int64_t per = rows * cols;
  std::vector<float> values = RandomValues({spec.name, {proj == "gate_proj" ? 2 * E : E, rows, cols}, spec.kind}, false, rng);
  if (o.fused_experts) {
    if (proj == "down_proj") {
      out.emplace_back(prefix + "down_proj", AsDtype(values, spec.shape, o.dtype));
      return;
    }
    std::vector<float> fused(values.size());  // [E, 2I, H]: expert e = gate_e rows then up_e rows
    for (int64_t e = 0; e < E; ++e) {
      std::copy_n(values.begin() + e * per, per, fused.begin() + 2 * e * per);
      std::copy_n(values.begin() + (E + e) * per, per, fused.begin() + (2 * e + 1) * per);
    }
    out.emplace_back(prefix + "gate_up_proj", AsDtype(fused, {E, 2 * rows, cols}, o.dtype));
    return;
  }
  for (int64_t e = 0; e < E; ++e) {
    auto slice = [&](int64_t block) {
      return std::vector<float>(values.begin() + block * per, values.begin() + (block + 1) * per);
    };
    const std::string ep = prefix + std::to_string(e) + ".";
    if (proj == "down_proj") {
      out.emplace_back(ep + "down_proj.weight", AsDtype(slice(e), {rows, cols}, o.dtype));
    } else {
      out.emplace_back(ep + "gate_proj.weight", AsDtype(slice(e), {rows, cols}, o.dtype));
      out.emplace_back(ep + "up_proj.weight", AsDtype(slice(E + e), {rows, cols}, o.dtype));
    }
  }
}

json TinyTokenizerJson(const ModelConfig& c) {
  json vocab = json::object();
  const std::string letters = "abcdefghijklmnopqrstuvwxyz";
  const int64_t regular = c.vocab_size - 4;  // then <|endoftext|>, <|im_end|>, two unused ids
  for (int64_t i = 0; i < regular; ++i) {
    std::string token = i == 0 ? "ab" : i == 1 ? "abc" : std::string(1, letters[(i - 2) % 26]);
    for (int64_t k = 0; i >= 2 && k < (i - 2) / 26; ++k) token = "\xC4\xA0" + token;  // "Ġ" (byte-level space)
    vocab[token] = i;
  }
  json added = json::array();
  added.push_back({{"id", EndOfTextId(c)}, {"content", kEndOfText}, {"special", true}});
  added.push_back({{"id", ImEndId(c)}, {"content", kImEnd}, {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "ab c"})}}}};
}

void WriteTokenizer(const std::string& folder, const ModelConfig& c) {
  if (c.vocab_size < 8) throw vt::Error("the tiny tokenizer needs vocab_size >= 8");
  WriteJson(folder + "/tokenizer.json", TinyTokenizerJson(c));
  WriteJson(folder + "/tokenizer_config.json",
            {{"add_bos_token", false},
             {"bos_token", nullptr},
             {"eos_token", kImEnd},
             {"pad_token", kEndOfText},
             {"chat_template", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}});
}

void WriteSafetensors(const std::string& folder, const std::vector<std::pair<std::string, vt::Tensor>>& weights,
                      int num_shards) {
  if (num_shards <= 1) {
    SafetensorsWriter writer;
    writer.SetMetadata("format", "pt");
    for (const auto& [name, t] : weights) writer.AddTensor(name, t);
    writer.Write(folder + "/model.safetensors");
    return;
  }
  json weight_map = json::object();
  const size_t per_shard = (weights.size() + num_shards - 1) / num_shards;
  for (int s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, num_shards);
    SafetensorsWriter writer;
    for (size_t i = s * per_shard; i < std::min(weights.size(), (s + 1) * per_shard); ++i) {
      writer.AddTensor(weights[i].first, weights[i].second);
      weight_map[weights[i].first] = name;
    }
    writer.Write(folder + "/" + name);
  }
  WriteJson(folder + "/model.safetensors.index.json", {{"metadata", json::object()}, {"weight_map", weight_map}});
}

std::string NextFixturePath(const std::string& stem) {
  static int counter = 0;
  return FixtureFolder() + "/" + stem + "_" + std::to_string(counter++);
}

}  // namespace

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "vllm_test_XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw vt::Error("cannot create a temp folder from " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string FixtureFolder() {
  static TempDir dir;
  return dir.path();
}

DenseDims KQuantDenseDims() {
  DenseDims d;
  d.vocab_size = 64;
  d.hidden_size = 256;
  d.num_attention_heads = 2;
  d.num_key_value_heads = 1;
  d.head_dim = 128;
  d.rotary_dim = 32;
  d.intermediate_size = 256;
  d.layer_types = {kLinear, kLinear, kLinear, kFull};
  d.linear_num_key_heads = 2;
  d.linear_num_value_heads = 4;
  d.linear_key_head_dim = 64;
  d.linear_value_head_dim = 64;
  return d;
}

ModelConfig DenseConfig(const DenseDims& d, bool tie) {
  ModelConfig c = CommonQwen35(d, "Qwen3_5ForConditionalGeneration", ModelFamily::kQwen3_5, tie);
  ValidateModelConfig(c, "DenseConfig");
  return c;
}

ModelConfig MoeConfig(const MoeDims& d, bool tie) {
  ModelConfig c = CommonQwen35(d.base, "Qwen3_5MoeForConditionalGeneration", ModelFamily::kQwen3_5Moe, tie);
  c.intermediate_size = 0;
  c.num_experts = d.num_experts;
  c.num_experts_per_tok = d.num_experts_per_tok;
  c.moe_intermediate_size = d.moe_intermediate_size;
  c.shared_expert_intermediate_size = d.shared_expert_intermediate_size;
  c.norm_topk_prob = true;
  ValidateModelConfig(c, "MoeConfig");
  return c;
}

ModelConfig Qwen3Config(const Qwen3Dims& d, bool tie) {
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM";
  c.family = ModelFamily::kQwen3;
  c.vocab_size = d.vocab_size;
  c.hidden_size = d.hidden_size;
  c.num_hidden_layers = d.num_hidden_layers;
  c.intermediate_size = d.intermediate_size;
  c.max_position_embeddings = d.max_position_embeddings;
  c.tie_word_embeddings = tie;
  c.num_attention_heads = d.num_attention_heads;
  c.num_key_value_heads = d.num_key_value_heads;
  c.head_dim = d.head_dim;
  c.rotary_dim = d.head_dim;
  c.rope_theta = d.rope_theta;
  c.layer_types.assign(static_cast<size_t>(d.num_hidden_layers), kFull);
  c.eos_token_ids = {ImEndId(c)};
  c.bos_token_id = EndOfTextId(c);
  ValidateModelConfig(c, "Qwen3Config");
  return c;
}

json HfConfigJson(const ModelConfig& c, const HfFolderOptions& o) {
  json text = {{"vocab_size", c.vocab_size},
               {"hidden_size", c.hidden_size},
               {"num_hidden_layers", c.num_hidden_layers},
               {"num_attention_heads", c.num_attention_heads},
               {"num_key_value_heads", c.num_key_value_heads},
               {"head_dim", c.head_dim},
               {"max_position_embeddings", c.max_position_embeddings},
               {"rms_norm_eps", c.rms_norm_eps},
               {"tie_word_embeddings", c.tie_word_embeddings},
               {"hidden_act", "silu"},
               {"bos_token_id", *c.bos_token_id},
               {"eos_token_id", c.eos_token_ids[0]},
               {"dtype", o.dtype == vt::DType::kF32 ? "float32" : o.dtype == vt::DType::kF16 ? "float16" : "bfloat16"}};
  if (c.mtp_num_hidden_layers > 0) text["mtp_num_hidden_layers"] = c.mtp_num_hidden_layers;
  json layer_types = json::array();
  for (LayerType t : c.layer_types) layer_types.push_back(LayerTypeName(t));
  text["layer_types"] = layer_types;
  if (c.family == ModelFamily::kQwen3) {
    text["architectures"] = {c.architecture};
    text["model_type"] = "qwen3";
    text["intermediate_size"] = c.intermediate_size;
    text["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
    return text;
  }
  const double factor = static_cast<double>(c.rotary_dim) / static_cast<double>(c.head_dim);
  if (static_cast<int64_t>(static_cast<double>(c.head_dim) * factor) != c.rotary_dim) {
    throw vt::Error("HfConfigJson: rotary_dim " + std::to_string(c.rotary_dim) + " is not head_dim x a factor");
  }
  text["attn_output_gate"] = true;
  text["rope_parameters"] = {{"rope_type", "default"},           {"rope_theta", c.rope_theta},
                             {"partial_rotary_factor", factor},   {"mrope_section", {11, 11, 10}},
                             {"mrope_interleaved", true}};
  text["linear_num_key_heads"] = c.linear_num_key_heads;
  text["linear_num_value_heads"] = c.linear_num_value_heads;
  text["linear_key_head_dim"] = c.linear_key_head_dim;
  text["linear_value_head_dim"] = c.linear_value_head_dim;
  text["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
  if (c.is_moe()) {
    text["num_experts"] = c.num_experts;
    text["num_experts_per_tok"] = c.num_experts_per_tok;
    text["moe_intermediate_size"] = c.moe_intermediate_size;
    text["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  } else {
    text["intermediate_size"] = c.intermediate_size;
  }
  const bool moe = c.is_moe();
  if (!o.vlm_layout) {
    text["architectures"] = {moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"};
    text["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
    return text;
  }
  text["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
  return {{"architectures", {c.architecture}},
          {"model_type", moe ? "qwen3_5_moe" : "qwen3_5"},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"text_config", text},
          {"vision_config", {{"depth", 1}, {"hidden_size", 16}, {"out_hidden_size", c.hidden_size}}}};
}

std::vector<std::pair<std::string, vt::Tensor>> RandomHfWeights(const ModelConfig& c, const HfFolderOptions& o) {
  std::mt19937 rng(o.seed);
  std::vector<std::pair<std::string, vt::Tensor>> out;
  for (const WeightSpec& spec : ModelWeightSpecs(c)) {
    if (spec.kind == WeightKind::kExperts) {
      AddExperts(c, o, spec, rng, out);
      continue;
    }
    std::string name = HfName(c, o, spec.name);
    vt::Shape shape = spec.shape;
    if (spec.kind == WeightKind::kGdnA) name = name.substr(0, name.size() - 1) + "A_log";
    if (spec.kind == WeightKind::kGdnConv) shape = {shape[0], 1, shape[1]};
    out.emplace_back(name, AsDtype(RandomValues(spec, c.zero_centered_norms, rng), shape, o.dtype));
  }
  const bool vlm = o.vlm_layout && c.family != ModelFamily::kQwen3;
  if (vlm) out.emplace_back("model.visual.blocks.0.norm1.weight", AsDtype(std::vector<float>(16, 1.0f), {16}, o.dtype));
  if (c.mtp_num_hidden_layers > 0) {
    for (const WeightSpec& spec : MtpWeightSpecs(c)) {  // HF names the module mtp.* as the specs do
      if (spec.kind == WeightKind::kExperts) {
        AddExperts(c, o, spec, rng, out);
        continue;
      }
      out.emplace_back(spec.name, AsDtype(RandomValues(spec, c.zero_centered_norms, rng), spec.shape, o.dtype));
    }
  } else if (o.with_mtp) {
    out.emplace_back("mtp.norm.weight", AsDtype(std::vector<float>(c.hidden_size, 0.5f), {c.hidden_size}, o.dtype));
  }
  return out;
}

std::string WriteHfFolder(const std::string& folder, const ModelConfig& c, const HfFolderOptions& o) {
  fs::create_directories(folder);
  WriteJson(folder + "/config.json", HfConfigJson(c, o));
  WriteJson(folder + "/generation_config.json",
            {{"bos_token_id", *c.bos_token_id}, {"eos_token_id", c.eos_token_ids}, {"do_sample", true}});
  WriteSafetensors(folder, RandomHfWeights(c, o), o.num_shards);
  if (o.with_tokenizer) WriteTokenizer(folder, c);
  return folder;
}

std::string WriteGgufFromHf(const std::string& hf_folder, const std::string& gguf_path, GgufOutType outtype,
                            const std::function<void(GgufWriter&)>& edit) {
  GgufWriter writer = PlanHfToGguf(hf_folder, {.outtype = outtype});
  if (edit) edit(writer);
  writer.Write(gguf_path);
  return gguf_path;
}

std::string BuildDenseF16Gguf(const DenseDims& dims, bool tie_word_embeddings, bool omit_rope_dimension_count) {
  const std::string stem = NextFixturePath("dense_f16");
  WriteHfFolder(stem + "_hf", DenseConfig(dims, tie_word_embeddings), {.dtype = vt::DType::kF32});
  return WriteGgufFromHf(stem + "_hf", stem + ".gguf", GgufOutType::kF16, [&](GgufWriter& w) {
    if (omit_rope_dimension_count) w.metadata().Remove("qwen35.rope.dimension_count");
  });
}

std::string BuildDenseGguf(const DenseDims& dims, GgufOutType outtype, uint32_t seed) {
  const std::string stem = NextFixturePath("dense");
  WriteHfFolder(stem + "_hf", DenseConfig(dims), {.dtype = vt::DType::kF32, .seed = seed});
  return WriteGgufFromHf(stem + "_hf", stem + ".gguf", outtype);
}

std::string BuildMoeGguf(const MoeDims& dims, GgufOutType outtype, uint32_t seed) {
  const std::string stem = NextFixturePath("moe");
  WriteHfFolder(stem + "_hf", MoeConfig(dims), {.dtype = vt::DType::kF32, .seed = seed});
  return WriteGgufFromHf(stem + "_hf", stem + ".gguf", outtype);
}

std::string BuildQwen3Gguf(const Qwen3Dims& dims, GgufOutType outtype, uint32_t seed) {
  const std::string stem = NextFixturePath("qwen3");
  WriteHfFolder(stem + "_hf", Qwen3Config(dims), {.dtype = vt::DType::kF32, .seed = seed});
  return WriteGgufFromHf(stem + "_hf", stem + ".gguf", outtype);
}

}  // namespace vllm::testing
