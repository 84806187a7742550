// ModelConfig from config.json: nested and flat layouts, rope fields in either
// place, layer types from the list or the interval, tie at either level, eos/bos
// from generation_config.json, and errors naming the file and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vllm/config/model_config.h"
#include "vllm/testing/model_fixtures.h"
#include "../model_loader/loader_test_util.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::ThrowsWith;

// A Qwen3.5 dense text config as transformers 5 writes it (sizes shrunk).
json Qwen35Text() {
  return json::parse(R"({
    "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 4, "intermediate_size": 96,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "attn_output_gate": true,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "full_attention_interval": 4,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "tie_word_embeddings": false,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [2, 1, 1], "mrope_interleaved": true},
    "eos_token_id": 7, "bos_token_id": null, "dtype": "bfloat16"})");
}

json Nested(json text) {
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"model_type", "qwen3_5"},
          {"tie_word_embeddings", false}, {"text_config", std::move(text)}, {"vision_config", {{"depth", 1}}}};
}

ModelConfig Parse(const json& config, const json* generation = nullptr) {
  return ModelConfigFromHfJson(config, generation, "m/config.json");
}

TEST(HfConfigTest, NestedQwen35Dense) {
  const ModelConfig c = Parse(Nested(Qwen35Text()));
  EXPECT_EQ(c.architecture, "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(c.family, ModelFamily::kQwen3_5);
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_EQ(c.rope_theta, 1e7f);
  EXPECT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_TRUE(c.zero_centered_norms);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kLinearAttention,
                                                   LayerType::kLinearAttention, LayerType::kFullAttention}));
  EXPECT_EQ(c.linear_num_key_heads, 2);
  EXPECT_EQ(c.linear_num_value_heads, 4);
  EXPECT_EQ(c.linear_conv_dim(), 2 * 2 * 16 + 4 * 16);
  EXPECT_FALSE(c.gdn_tiled_value_heads);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.dtype, vt::DType::kBF16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{7}));
  EXPECT_FALSE(c.bos_token_id.has_value());
}

TEST(HfConfigTest, FlatCausalLmWithTopLevelRopeFields) {
  json text = Qwen35Text();
  text.erase("rope_parameters");
  text["rope_theta"] = 5e5;
  text["partial_rotary_factor"] = 0.5;
  text["architectures"] = {"Qwen3_5ForCausalLM"};
  const ModelConfig c = Parse(text);
  EXPECT_EQ(c.architecture, "Qwen3_5ForCausalLM");
  EXPECT_EQ(c.rope_theta, 5e5f);
  EXPECT_EQ(c.rotary_dim, 16);
}

TEST(HfConfigTest, RopeParametersWinOverTopLevelAndFactorDefaultsPerFamily) {
  json text = Qwen35Text();
  text["partial_rotary_factor"] = 0.25;  // transformers 5 keeps this too; rope_parameters wins
  text["rope_parameters"]["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(Parse(Nested(text)).rotary_dim, 16);
  text["rope_parameters"].erase("partial_rotary_factor");
  text.erase("partial_rotary_factor");
  EXPECT_EQ(Parse(Nested(text)).rotary_dim, 8);  // HF's Qwen3.5 default factor 0.25
  text["rope_parameters"]["partial_rotary_factor"] = 0.0;
  EXPECT_EQ(Parse(Nested(text)).rotary_dim, 0);  // no rotation, never the full head
  text["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"m/config.json", "rope type 'yarn'"}));
}

TEST(HfConfigTest, LayerTypesFromListOrInterval) {
  json text = Qwen35Text();
  text["layer_types"] = {"full_attention", "linear_attention", "full_attention", "linear_attention"};
  const ModelConfig listed = Parse(Nested(text));
  EXPECT_EQ(listed.layer_types[0], LayerType::kFullAttention);
  EXPECT_EQ(listed.layer_types[1], LayerType::kLinearAttention);
  text.erase("layer_types");
  text["full_attention_interval"] = 2;
  const ModelConfig interval = Parse(Nested(text));
  EXPECT_EQ(interval.layer_types, (std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kFullAttention,
                                                          LayerType::kLinearAttention, LayerType::kFullAttention}));
  text.erase("full_attention_interval");
  EXPECT_EQ(Parse(Nested(text)).num_layers_of(LayerType::kFullAttention), 1);  // HF's default interval 4
  text["layer_types"] = {"full_attention", "linear_attention"};
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"layer_types has 2 entries", "num_hidden_layers = 4"}));
  text["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"text_config.layer_types", "sliding_attention"}));
}

TEST(HfConfigTest, TieWordEmbeddingsAtEitherLevel) {
  json text = Qwen35Text();
  text.erase("tie_word_embeddings");
  json top = Nested(text);
  top["tie_word_embeddings"] = true;
  EXPECT_TRUE(Parse(top).tie_word_embeddings);
  top.erase("tie_word_embeddings");
  top["text_config"]["tie_word_embeddings"] = true;
  EXPECT_TRUE(Parse(top).tie_word_embeddings);
  top["text_config"].erase("tie_word_embeddings");
  EXPECT_FALSE(Parse(top).tie_word_embeddings);
}

TEST(HfConfigTest, MoeAndQwen3) {
  json moe = Qwen35Text();
  moe.erase("intermediate_size");
  moe["num_experts"] = 8;
  moe["num_experts_per_tok"] = 2;
  moe["moe_intermediate_size"] = 32;
  moe["shared_expert_intermediate_size"] = 64;
  json top = Nested(moe);
  top["architectures"] = {"Qwen3_5MoeForConditionalGeneration"};
  const ModelConfig c = Parse(top);
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.shared_expert_intermediate_size, 64);
  EXPECT_TRUE(c.norm_topk_prob);  // absent from Qwen3.5 configs: always renormalised
  EXPECT_EQ(c.intermediate_size, 0);

  const json qwen3 = json::parse(R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 352, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 128, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "tie_word_embeddings": true,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "rope_scaling": null,
    "layer_types": ["full_attention", "full_attention", "full_attention"], "dtype": "float32"})");
  const ModelConfig q = Parse(qwen3);
  EXPECT_EQ(q.family, ModelFamily::kQwen3);
  EXPECT_EQ(q.rotary_dim, 128);  // Qwen3 rotates the whole head
  EXPECT_FALSE(q.attn_output_gate);
  EXPECT_FALSE(q.zero_centered_norms);
  EXPECT_FALSE(q.has_linear_attention());
  EXPECT_TRUE(q.tie_word_embeddings);
  EXPECT_EQ(q.rope_theta, 1e6f);
}

TEST(HfConfigTest, TokenIdsPreferGenerationConfig) {
  const json generation = {{"eos_token_id", {248046, 248044}}, {"bos_token_id", 248044}};
  const ModelConfig c = Parse(Nested(Qwen35Text()), &generation);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{248046, 248044}));
  EXPECT_EQ(c.bos_token_id, 248044);
}

TEST(HfConfigTest, ErrorsNameTheFileAndKey) {
  json text = Qwen35Text();
  text.erase("hidden_size");
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"m/config.json", "missing key 'text_config.hidden_size'"}));
  text = Qwen35Text();
  text["num_attention_heads"] = "four";
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"'text_config.num_attention_heads'", "\"four\"", "expected an integer"}));
  text = Qwen35Text();
  text["num_key_value_heads"] = 3;
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"num_key_value_heads = 3", "divisor of num_attention_heads (4)"}));
  text = Qwen35Text();
  text["linear_num_value_heads"] = 3;
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"linear_num_value_heads = 3", "multiple of linear_num_key_heads (2)"}));
  text = Qwen35Text();
  text.erase("linear_conv_kernel_dim");
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"missing key 'text_config.linear_conv_kernel_dim'"}));
  text = Qwen35Text();
  text["num_hidden_layers"] = int64_t{1} << 40;
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"num_hidden_layers = 1099511627776", "expected 0..65536"}));
  text = Qwen35Text();
  text["mtp_num_hidden_layers"] = -1;
  EXPECT_TRUE(ThrowsWith([&] { Parse(Nested(text)); }, {"mtp_num_hidden_layers = -1", "expected >= 0"}));
  text["mtp_num_hidden_layers"] = 1;
  EXPECT_EQ(Parse(Nested(text)).mtp_num_hidden_layers, 1);
  EXPECT_EQ(Parse(Nested(Qwen35Text())).mtp_num_hidden_layers, 0);  // absent: no MTP module
  json llama = Nested(Qwen35Text());
  llama["architectures"] = {"LlamaForCausalLM"};
  EXPECT_TRUE(ThrowsWith([&] { Parse(llama); }, {"architecture 'LlamaForCausalLM' is not supported", "Qwen3ForCausalLM"}));
  EXPECT_TRUE(ThrowsWith([&] { Parse(json::array()); }, {"m/config.json", "expected a JSON object"}));
}

TEST(HfConfigTest, LoadHfConfigReadsTheFolder) {
  testing::TempDir dir;
  EXPECT_TRUE(ThrowsWith([&] { LoadHfConfig(dir.path()); }, {dir.path(), "no config.json"}));
  std::ofstream(dir.File("config.json")) << Nested(Qwen35Text()).dump();
  std::ofstream(dir.File("generation_config.json")) << R"({"eos_token_id": [1, 2]})";
  EXPECT_EQ(LoadHfConfig(dir.path()).eos_token_ids, (std::vector<int64_t>{1, 2}));
  std::ofstream(dir.File("config.json")) << "{not json";
  EXPECT_TRUE(ThrowsWith([&] { LoadHfConfig(dir.path()); }, {"config.json", "not valid JSON"}));
}

}  // namespace
}  // namespace vllm
