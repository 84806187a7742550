// ModelRegistry: the seams a forward pass must go through (reach counters), the
// kernels a prefill and a decode step choose, and the errors for models it cannot
// build.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "vllm/model_executor/models/model_registry.h"
#include "vllm/model_loader/loader_test_util.h"
#include "vllm/testing/engine_harness.h"
#include "vllm/testing/model_fixtures.h"
#include "vllm/testing/model_reference.h"
#include "vt/error.h"
#include "vt/reach.h"
#include "vt/registry.h"

namespace vllm {
namespace {

namespace fs = std::filesystem;

uint64_t Dispatches(vt::OpId op) { return vt::Registry::Get().DispatchCount(op, vt::DeviceType::kCPU); }

using testing::ThrowsWith;

class ModelSeamsTest : public ::testing::TestWithParam<std::string> {};

// One prefill step (5 prompt tokens) and two decode steps: every full-attention
// layer goes through dense_attn::AttnBlock and every GDN layer through
// gdn::GdnBlock once per step, and the model is entered only through
// ModelRegistry::Forward. The prefill step takes the varlen GDN kernels, the
// decode steps the single-token ones.
TEST_P(ModelSeamsTest, EveryLayerGoesThroughItsBlockOncePerStep) {
  const testing::ReferenceModel ref = testing::LoadReference(GetParam());
  const LoadedModel loaded = LoadModel(ref.hf_folder);
  const uint64_t num_attn = loaded.config.num_layers_of(LayerType::kFullAttention);
  const uint64_t num_gdn = loaded.config.num_layers_of(LayerType::kLinearAttention);
  ASSERT_EQ(num_attn + num_gdn, static_cast<uint64_t>(loaded.config.num_hidden_layers));
  const std::unique_ptr<Model> model = testing::CreateModel(loaded, {});
  vt::reach::Reset();
  vt::Registry::Get().ResetDispatchCounts();
  const auto run = testing::GenerateGreedy(*model, {ref.prompts[1].prompt_ids}, 3, {});
  ASSERT_EQ(run.stats.num_steps, 3);
  EXPECT_EQ(vt::reach::Count("ModelRegistry::Forward"), 3u);
  EXPECT_EQ(vt::reach::Count("dense_attn::AttnBlock"), 3 * num_attn);
  EXPECT_EQ(vt::reach::Count("gdn::GdnBlock"), 3 * num_gdn);
  EXPECT_EQ(Dispatches(vt::OpId::kPagedAttention), 3 * num_attn);
  EXPECT_EQ(Dispatches(vt::OpId::kCausalConv1d), num_gdn);
  EXPECT_EQ(Dispatches(vt::OpId::kGdnChunkedPrefill), num_gdn);
  EXPECT_EQ(Dispatches(vt::OpId::kCausalConv1dUpdate), 2 * num_gdn);
  EXPECT_EQ(Dispatches(vt::OpId::kGdnRecurrent), 2 * num_gdn);
  EXPECT_EQ(Dispatches(vt::OpId::kMoeExperts), loaded.config.is_moe() ? 3u * loaded.config.num_hidden_layers : 0u);
  EXPECT_EQ(Dispatches(vt::OpId::kAttnGateSplit), loaded.config.attn_output_gate ? 3 * num_attn : 0u);
  EXPECT_EQ(Dispatches(vt::OpId::kRopeNeox), loaded.config.rotary_dim > 0 ? 3 * 2 * num_attn : 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelSeamsTest,
                         ::testing::Values("qwen35_dense_untied", "qwen35_tied_realshapes", "qwen35_norope",
                                           "qwen35_moe", "qwen3", "qwen35_causallm"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(ModelRegistryTest, KnowsTheHfAndGgufArchitectures) {
  for (const char* name : {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
                           "Qwen3_5ForCausalLM", "Qwen3ForCausalLM", "qwen35", "qwen35moe", "qwen3"}) {
    EXPECT_TRUE(ModelRegistry::IsSupported(name)) << name;
  }
  EXPECT_FALSE(ModelRegistry::IsSupported("LlamaForCausalLM"));
  EXPECT_FALSE(ModelRegistry::IsSupported("qwen3next"));
}

TEST(ModelRegistryTest, UnsupportedArchitectureIsNamed) {
  LoadedModel loaded = LoadModel(testing::LoadReference("qwen3").hf_folder);
  loaded.config.architecture = "LlamaForCausalLM";
  EXPECT_TRUE(ThrowsWith([&] { ModelRegistry::Create(loaded, {}); },
                         {loaded.path, "unsupported model architecture 'LlamaForCausalLM'", "Qwen3ForCausalLM",
                          "qwen35moe"}));
  loaded.config.architecture = "qwen35";  // a Qwen3.5 name on a Qwen3 config
  EXPECT_TRUE(ThrowsWith([&] { ModelRegistry::Create(loaded, {}); }, {"'qwen35'", "qwen3.5", "qwen3 model"}));
}

// An HF folder whose config.json names an architecture nobody implements fails at
// load, before any weight is read.
TEST(ModelRegistryTest, UnsupportedArchitectureInConfigJsonFailsAtLoad) {
  testing::TempDir dir;
  fs::copy(testing::LoadReference("qwen3").hf_folder, dir.path(), fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.File("config.json")));
  config["architectures"] = {"LlamaForCausalLM"};
  std::ofstream(dir.File("config.json")) << config.dump();
  EXPECT_TRUE(ThrowsWith([&] { LoadModel(dir.path()); }, {"LlamaForCausalLM", "not supported"}));
}

// Weights that do not fit the config: the error names the weight, its shape and
// the shape the config needs.
TEST(ModelRegistryTest, ConfigWeightsMismatchNamesTheWeight) {
  const LoadedModel original = LoadModel(testing::LoadReference("qwen35_dense_untied").hf_folder);
  LoadedModel more_heads = original;
  more_heads.config.num_attention_heads *= 2;
  EXPECT_TRUE(ThrowsWith([&] { ModelRegistry::Create(more_heads, {}); },
                         {original.path, "layers.3.self_attn.q_proj.weight", "[256, 64]", "needs [512, 64]"}));

  LoadedModel wider_vocab = original;
  wider_vocab.config.vocab_size += 1;
  EXPECT_TRUE(ThrowsWith([&] { ModelRegistry::Create(wider_vocab, {}); }, {"embed_tokens.weight", "[321, 64]"}));

  LoadedModel missing = original;
  missing.weights = WeightStore();
  for (const auto& [name, tensor] : original.weights.all()) {
    if (name != "layers.5.linear_attn.dt_bias") missing.weights.Add(name, tensor);
  }
  EXPECT_TRUE(ThrowsWith([&] { ModelRegistry::Create(missing, {}); }, {"layers.5.linear_attn.dt_bias", "lack"}));

  EXPECT_TRUE(ThrowsWith([&] { ModelRegistry::Create(original, {.activation_dtype = vt::DType::kQ8_0}); },
                         {"activations", "q8_0"}));
}

// The same mismatch on disk (config.json edited after the weights were written) is
// caught by the loader, naming the file's tensor.
TEST(ModelRegistryTest, ConfigJsonWeightsMismatchFailsAtLoad) {
  testing::TempDir dir;
  fs::copy(testing::LoadReference("qwen3").hf_folder, dir.path(), fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.File("config.json")));
  config["intermediate_size"] = 96;
  std::ofstream(dir.File("config.json")) << config.dump();
  EXPECT_TRUE(ThrowsWith([&] { LoadModel(dir.path()); }, {"mlp.gate_proj.weight", "[96, 64]"}));
}

}  // namespace
}  // namespace vllm
