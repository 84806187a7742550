// Loading HF checkpoint folders: canonical names and shapes for every family and
// layout (VLM / text-only, fused / per-expert experts, sharded), the transforms
// (A = -exp(A_log), conv1d squeeze, expert views), skipped visual/MTP tensors, the
// folders transformers 5.17 saved (tests/data/models), and errors naming the file,
// the canonical weight and the source tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loader_test_util.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

namespace fs = std::filesystem;
using testing::ThrowsWith;

testing::DenseDims HybridDims() {
  testing::DenseDims d;
  d.layer_types = {testing::kLinear, testing::kFull, testing::kLinear, testing::kFull};
  return d;
}

void ExpectCanonicalWeights(const LoadedModel& m) {
  const std::vector<WeightSpec> specs = ModelWeightSpecs(m.config);
  EXPECT_EQ(m.weights.size(), specs.size());
  for (const WeightSpec& spec : specs) {
    ASSERT_TRUE(m.weights.Has(spec.name)) << spec.name;
    EXPECT_EQ(m.weights.Get(spec.name).shape(), spec.shape) << spec.name;
    if (IsExpandedToF32(spec.kind)) {
      EXPECT_EQ(m.weights.Get(spec.name).dtype(), vt::DType::kF32) << spec.name;
    }
  }
}

TEST(HfLoaderTest, LoadsEveryFamilyAndLayout) {
  struct Case {
    const char* name;
    ModelConfig config;
    testing::HfFolderOptions options;
  };
  const Case cases[] = {
      {"dense vlm bf16", testing::DenseConfig(HybridDims()), {.dtype = vt::DType::kBF16}},
      {"dense causal-lm f32 tied", testing::DenseConfig(HybridDims(), true), {.dtype = vt::DType::kF32, .vlm_layout = false}},
      {"moe fused f16", testing::MoeConfig(testing::MoeDims{}), {.dtype = vt::DType::kF16}},
      {"moe per-expert sharded", testing::MoeConfig(testing::MoeDims{}), {.fused_experts = false, .num_shards = 3}},
      {"qwen3 tied", testing::Qwen3Config(testing::Qwen3Dims{}, true), {.dtype = vt::DType::kF32}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    testing::TempDir dir;
    testing::WriteHfFolder(dir.path(), c.config, c.options);
    const LoadedModel m = LoadModel(dir.path());
    EXPECT_EQ(m.format, CheckpointFormat::kHfFolder);
    EXPECT_EQ(m.config.dtype, c.options.dtype);
    EXPECT_EQ(m.weights.Has("lm_head.weight"), !c.config.tie_word_embeddings);
    EXPECT_EQ(m.gguf_metadata, nullptr);
    ExpectCanonicalWeights(m);
    ModelConfig expected = c.config;
    expected.dtype = c.options.dtype;
    expected.architecture = m.config.architecture;  // *ForCausalLM in the text-only layout
    EXPECT_TRUE(m.config == expected) << DescribeModelConfig(m.config) << "vs\n" << DescribeModelConfig(expected);
  }
}

TEST(HfLoaderTest, TransformsAndViews) {
  testing::TempDir dir;
  const ModelConfig config = testing::MoeConfig(testing::MoeDims{});
  testing::WriteHfFolder(dir.path(), config, {.dtype = vt::DType::kBF16, .fused_experts = true});
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::Open(dir.path());
  const LoadedModel m = LoadHfFolder(dir.path());
  const std::string p = "model.language_model.layers.0.";
  // A = -exp(A_log) in f32.
  const std::vector<float> a_log = ckpt.Tensor(p + "linear_attn.A_log").ToFloatVector();
  const std::vector<float> a = m.weights.Get("layers.0.linear_attn.A").ToFloatVector();
  ASSERT_EQ(a.size(), a_log.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], -std::exp(a_log[i]));
  // conv1d [C, 1, K] -> [C, K], values unchanged (expanded to f32).
  EXPECT_EQ(m.weights.Get("layers.0.linear_attn.conv1d.weight").ToFloatVector(),
            ckpt.Tensor(p + "linear_attn.conv1d.weight").ToFloatVector());
  // Fused gate_up [E, 2I, H]: gate = rows [0, I) of each expert, up = rows [I, 2I); views, not copies.
  const vt::Tensor fused = ckpt.Tensor(p + "mlp.experts.gate_up_proj");
  const vt::Tensor gate = m.weights.Get("layers.0.mlp.experts.gate_proj");
  const vt::Tensor up = m.weights.Get("layers.0.mlp.experts.up_proj");
  const int64_t I = config.moe_intermediate_size;
  EXPECT_EQ(gate.ToFloatVector(), fused.Slice(1, 0, I).ToFloatVector());
  EXPECT_EQ(up.ToFloatVector(), fused.Slice(1, I, 2 * I).ToFloatVector());
  EXPECT_EQ(gate.stride(0), 2 * I * config.hidden_size);
  EXPECT_EQ(gate.dtype(), vt::DType::kBF16);
  // Matrices are used as stored: same dtype, same bytes.
  const vt::Tensor out_proj = m.weights.Get("layers.0.linear_attn.out_proj.weight");
  EXPECT_EQ(out_proj.dtype(), vt::DType::kBF16);
  EXPECT_EQ(out_proj.ToFloatVector(), ckpt.Tensor(p + "linear_attn.out_proj.weight").ToFloatVector());
}

TEST(HfLoaderTest, FusedAndPerExpertLayoutsLoadTheSameWeights) {
  testing::TempDir fused, split;
  const ModelConfig config = testing::MoeConfig(testing::MoeDims{});
  testing::WriteHfFolder(fused.path(), config, {.seed = 5, .fused_experts = true});
  testing::WriteHfFolder(split.path(), config, {.seed = 5, .fused_experts = false});
  const LoadedModel a = LoadHfFolder(fused.path()), b = LoadHfFolder(split.path());
  for (const auto& [name, t] : a.weights.all()) EXPECT_EQ(t.ToFloatVector(), b.weights.Get(name).ToFloatVector()) << name;
}

TEST(HfLoaderTest, VisualAndMtpTensorsAreSkippedOthersAreErrors) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(HybridDims());
  auto weights = testing::RandomHfWeights(config, {});
  auto write = [&](const std::vector<std::pair<std::string, vt::Tensor>>& tensors) {
    testing::WriteHfFolder(dir.path(), config, {.with_tokenizer = false});
    SafetensorsWriter w;
    for (const auto& [name, t] : tensors) w.AddTensor(name, t);
    w.Write(dir.File("model.safetensors"));
  };
  write(weights);
  EXPECT_NO_THROW(LoadHfFolder(dir.path()));  // includes model.visual.* and mtp.* tensors

  auto extra = weights;
  extra.emplace_back("model.language_model.layers.0.self_attn.rotary.inv_freq", vt::Tensor::Zeros({4}, vt::DType::kF32));
  write(extra);
  EXPECT_TRUE(ThrowsWith([&] { LoadHfFolder(dir.path()); },
                         {"model.safetensors", "unexpected tensor 'model.language_model.layers.0.self_attn.rotary.inv_freq'"}));

  auto missing = weights;
  std::erase_if(missing, [](const auto& w) { return w.first == "model.language_model.layers.2.linear_attn.A_log"; });
  write(missing);
  EXPECT_TRUE(ThrowsWith([&] { LoadHfFolder(dir.path()); },
                         {dir.path(), "missing weight 'layers.2.linear_attn.A'", "'model.language_model.layers.2.linear_attn.A_log'"}));

  auto reshaped = weights;
  for (auto& [name, t] : reshaped) {
    if (name == "model.language_model.layers.1.self_attn.k_proj.weight") t = vt::Tensor::Zeros({16, 64}, t.dtype());
  }
  write(reshaped);
  EXPECT_TRUE(ThrowsWith([&] { LoadHfFolder(dir.path()); },
                         {"model.safetensors", "'model.language_model.layers.1.self_attn.k_proj.weight'",
                          "canonical 'layers.1.self_attn.k_proj.weight'", "shape [16, 64]", "expected [32, 64]"}));

  write(weights);
  EXPECT_TRUE(ThrowsWith([&] { LoadHfFolder(dir.path(), {.gdn_value_head_order = GdnValueHeadOrder::kTiled}); },
                         {"grouped", "GGUF"}));
}

TEST(HfLoaderTest, MissingExpertsNameBothLayouts) {
  testing::TempDir dir;
  const ModelConfig config = testing::MoeConfig(testing::MoeDims{});
  testing::WriteHfFolder(dir.path(), config, {.with_tokenizer = false});
  auto weights = testing::RandomHfWeights(config, {});
  std::erase_if(weights, [](const auto& w) { return w.first.find("layers.1.mlp.experts.gate_up_proj") != std::string::npos; });
  SafetensorsWriter w;
  for (const auto& [name, t] : weights) w.AddTensor(name, t);
  w.Write(dir.File("model.safetensors"));
  EXPECT_TRUE(ThrowsWith([&] { LoadHfFolder(dir.path()); },
                         {"missing weight 'layers.1.mlp.experts.gate_proj'", "experts.gate_up_proj", "experts.0.gate_proj.weight"}));
}

TEST(HfLoaderTest, BadPaths) {
  EXPECT_TRUE(ThrowsWith([] { LoadModel("/nonexistent/model"); }, {"/nonexistent/model", "no such file"}));
  testing::TempDir dir;
  std::ofstream(dir.File("x.bin")) << "not a model";
  EXPECT_TRUE(ThrowsWith([&] { LoadModel(dir.File("x.bin")); }, {"x.bin", "not a GGUF file", "HF checkpoint folder"}));
  EXPECT_TRUE(ThrowsWith([&] { LoadModel(dir.path()); }, {"no config.json"}));
}

// The folders transformers 5.17 wrote (tools/oracle/make_models.py): the loader
// reads what HF itself saves, and the rotary width matches what HF built.
TEST(HfLoaderTest, LoadsFoldersSavedByTransformers) {
  const fs::path root = fs::path(VT_TEST_DATA_DIR) / "models";
  if (!fs::exists(root)) GTEST_SKIP() << "no " << root;
  int loaded = 0;
  for (const auto& model_dir : fs::directory_iterator(root)) {
    if (!fs::exists(model_dir.path() / "reference.json")) continue;
    const nlohmann::json reference = nlohmann::json::parse(std::ifstream(model_dir.path() / "reference.json"));
    for (const auto& hf : fs::directory_iterator(model_dir.path())) {
      if (!hf.is_directory() || !fs::exists(hf.path() / "config.json")) continue;
      SCOPED_TRACE(hf.path().string());
      const LoadedModel m = LoadHfFolder(hf.path().string());
      ExpectCanonicalWeights(m);
      EXPECT_EQ(m.config.architecture, reference["arch"].get<std::string>());
      EXPECT_EQ(m.config.tie_word_embeddings, reference["tied_embeddings"].get<bool>());
      EXPECT_EQ(m.config.rotary_dim, reference["rotary"]["expected_rotary_dim"].get<int64_t>());
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 6);
}

}  // namespace
}  // namespace vllm
