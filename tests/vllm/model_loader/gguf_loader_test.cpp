// Loading GGUF files: issue 3's dense F16 fixture (no rope.dimension_count: rotary
// width 0 and a warning), the inverse converter transforms, the value-head order
// flag and its override, the MTP block skipped, and errors naming the file, the
// canonical weight and the GGUF tensor.
#include <gtest/gtest.h>

#include "loader_test_util.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/weight_names.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using testing::ThrowsWith;

TEST(GgufLoaderTest, IssueDenseF16FixtureLoadsWithoutRotary) {
  const std::string path = testing::BuildDenseF16Gguf(testing::DenseDims{}, false, true);
  std::vector<std::string> sink;
  const LoadedModel m = LoadModel(path, {.on_warning = [&](const std::string& w) { sink.push_back(w); }});
  const ModelConfig& c = m.config;
  EXPECT_EQ(m.format, CheckpointFormat::kGguf);
  EXPECT_EQ(c.architecture, "qwen35");
  EXPECT_EQ(c.family, ModelFamily::kQwen3_5);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.vocab_size, 32);
  EXPECT_EQ(c.num_attention_heads, 2);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::kFullAttention, LayerType::kFullAttention}));
  EXPECT_EQ(c.rotary_dim, 0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, vt::DType::kF16);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_EQ(sink, m.warnings);
  EXPECT_NE(m.warnings[0].find("rope.dimension_count"), std::string::npos);
  EXPECT_EQ(m.weights.Get("layers.0.self_attn.q_proj.weight").dtype(), vt::DType::kF16);
  EXPECT_EQ(m.weights.Get("layers.0.self_attn.q_proj.weight").shape(), (vt::Shape{2 * 2 * 32, 64}));
  EXPECT_EQ(m.weights.Get("layers.1.input_layernorm.weight").dtype(), vt::DType::kF32);
  ASSERT_NE(m.gguf_metadata, nullptr);
  EXPECT_EQ(m.gguf_metadata->GetString("tokenizer.ggml.pre"), "qwen35");
  EXPECT_EQ(m.weights.size(), ModelWeightSpecs(c).size());
}

TEST(GgufLoaderTest, NormsGetTheBakedOneRemoved) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{});
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kBF16});
  testing::WriteGgufFromHf(dir.File("hf"), dir.File("m.gguf"), GgufOutType::kBF16);
  const GgufFile file = GgufFile::Open(dir.File("m.gguf"));
  const LoadedModel m = LoadGgufFile(dir.File("m.gguf"));
  const std::vector<float> stored = file.Tensor("blk.0.attn_q_norm.weight").ToFloatVector();
  const std::vector<float> loaded = m.weights.Get("layers.0.self_attn.q_norm.weight").ToFloatVector();
  for (size_t i = 0; i < stored.size(); ++i) EXPECT_EQ(loaded[i], stored[i] - 1.0f);
}

TEST(GgufLoaderTest, ValueHeadOrderFlagAndOverride) {
  testing::DenseDims dims;
  dims.layer_types = {testing::kLinear, testing::kFull};
  const std::string path = testing::BuildDenseGguf(dims, GgufOutType::kF32);
  EXPECT_TRUE(LoadGgufFile(path).config.gdn_tiled_value_heads);
  EXPECT_FALSE(LoadGgufFile(path, {.gdn_value_head_order = GdnValueHeadOrder::kGrouped}).config.gdn_tiled_value_heads);
  EXPECT_FALSE(LoadModelConfig(path, {.gdn_value_head_order = GdnValueHeadOrder::kGrouped}).gdn_tiled_value_heads);
  EXPECT_EQ(ParseGdnValueHeadOrder("grouped"), GdnValueHeadOrder::kGrouped);
  EXPECT_TRUE(ThrowsWith([] { ParseGdnValueHeadOrder("random"); }, {"'random'", "auto, tiled or grouped"}));
  EXPECT_FALSE(LoadGgufFile(testing::BuildDenseF16Gguf(testing::DenseDims{}, false, false)).config.gdn_tiled_value_heads);
}

// Rewrites a converted file: `edit` changes the plan (tensors, metadata).
std::string Edited(const testing::TempDir& dir, const ModelConfig& config, const std::function<void(GgufWriter&)>& edit) {
  if (!std::filesystem::exists(dir.File("hf"))) testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kF32});
  return testing::WriteGgufFromHf(dir.File("hf"), dir.File("edited.gguf"), GgufOutType::kF32, edit);
}

TEST(GgufLoaderTest, MtpBlockIsSkipped) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{});
  const std::string path = Edited(dir, config, [](GgufWriter& w) {
    w.metadata().Set("qwen35.block_count", GgufValue::U32(3));
    w.metadata().Set("qwen35.nextn_predict_layers", GgufValue::U32(1));
    w.AddTensor("blk.2.nextn.eh_proj.weight", vt::Tensor::Zeros({64, 128}, vt::DType::kF32));
    w.AddTensor("blk.2.attn_norm.weight", vt::Tensor::Zeros({64}, vt::DType::kF32));
  });
  const LoadedModel m = LoadGgufFile(path);
  EXPECT_EQ(m.config.num_hidden_layers, 2);
  EXPECT_FALSE(m.weights.Has("layers.2.input_layernorm.weight"));
}

// Only the MTP blocks (main layers .. block_count - 1) are skipped: a tensor of a block
// the metadata does not have is an error, not silently dropped.
TEST(GgufLoaderTest, TensorOfABlockBeyondBlockCountIsRefused) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{});
  std::string path = Edited(dir, config, [](GgufWriter& w) {
    w.AddTensor("blk.2.attn_norm.weight", vt::Tensor::Zeros({64}, vt::DType::kF32));
  });
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(path); }, {"edited.gguf", "unexpected tensor 'blk.2.attn_norm.weight'"}));
  path = Edited(dir, config, [](GgufWriter& w) {
    w.metadata().Set("qwen35.block_count", GgufValue::U32(3));
    w.metadata().Set("qwen35.nextn_predict_layers", GgufValue::U32(1));
    w.AddTensor("blk.3.attn_norm.weight", vt::Tensor::Zeros({64}, vt::DType::kF32));
  });
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(path); }, {"edited.gguf", "unexpected tensor 'blk.3.attn_norm.weight'"}));
}

TEST(GgufLoaderTest, MissingUnknownAndMisShapedTensors) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{});
  std::string path = Edited(dir, config, [](GgufWriter& w) { w.RemoveTensor("blk.1.attn_k.weight"); });
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(path); },
                         {"edited.gguf", "missing weight 'layers.1.self_attn.k_proj.weight'", "'blk.1.attn_k.weight'"}));
  path = Edited(dir, config, [](GgufWriter& w) { w.AddTensor("rope_freqs.weight", vt::Tensor::Zeros({4}, vt::DType::kF32)); });
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(path); }, {"edited.gguf", "unexpected tensor 'rope_freqs.weight'"}));
  path = Edited(dir, config, [](GgufWriter& w) {
    w.RemoveTensor("blk.0.attn_v.weight");
    w.AddTensor("blk.0.attn_v.weight", vt::Tensor::Zeros({64, 64}, vt::DType::kF32));
  });
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(path); },
                         {"edited.gguf", "'blk.0.attn_v.weight'", "canonical 'layers.0.self_attn.v_proj.weight'",
                          "shape [64, 64]", "expected [32, 64] from the metadata"}));
  path = Edited(dir, config, [](GgufWriter& w) { w.metadata().Set("qwen35.embedding_length", GgufValue::U32(48)); });
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(path); }, {"edited.gguf", "token_embd.weight", "expected [32, 48]"}));
}

TEST(GgufLoaderTest, SharedExpertGateStoredSqueezed) {
  const std::string path = testing::BuildMoeGguf(testing::MoeDims{}, GgufOutType::kF32);
  const GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.FindTensor("blk.0.ffn_gate_inp_shexp.weight")->ne, (std::vector<int64_t>{64}));
  EXPECT_EQ(file.FindTensor("blk.0.ffn_gate_exps.weight")->ne, (std::vector<int64_t>{64, 32, 4}));
  EXPECT_EQ(file.FindTensor("blk.0.ffn_down_exps.weight")->ne, (std::vector<int64_t>{32, 64, 4}));
  EXPECT_EQ(file.FindTensor("blk.0.ssm_conv1d.weight")->ne, (std::vector<int64_t>{4, 2 * 2 * 16 + 4 * 16}));
  const LoadedModel m = LoadGgufFile(path);
  EXPECT_EQ(m.weights.Get("layers.0.mlp.shared_expert_gate.weight").shape(), (vt::Shape{1, 64}));
}

TEST(GgufLoaderTest, FusedGateUpExpertsAreViews) {
  testing::TempDir dir;
  const ModelConfig config = testing::MoeConfig(testing::MoeDims{});
  testing::WriteHfFolder(dir.File("hf"), config, {.dtype = vt::DType::kF32});
  const std::string split = testing::WriteGgufFromHf(dir.File("hf"), dir.File("split.gguf"), GgufOutType::kF32);
  const LoadedModel reference = LoadGgufFile(split);
  const std::string fused = testing::WriteGgufFromHf(dir.File("hf"), dir.File("fused.gguf"), GgufOutType::kF32, [&](GgufWriter& w) {
    for (int layer = 0; layer < 2; ++layer) {
      const std::string p = "layers." + std::to_string(layer) + ".mlp.experts.";
      const vt::Tensor gate = reference.weights.Get(p + "gate_proj"), up = reference.weights.Get(p + "up_proj");
      vt::Tensor both = vt::Tensor::Empty({4, 64, 64}, vt::DType::kF32);
      both.Slice(1, 0, 32).CopyFrom(gate);
      both.Slice(1, 32, 64).CopyFrom(up);
      const std::string blk = "blk." + std::to_string(layer) + ".";
      w.RemoveTensor(blk + "ffn_gate_exps.weight");
      w.RemoveTensor(blk + "ffn_up_exps.weight");
      w.AddTensor(blk + "ffn_gate_up_exps.weight", both);
    }
  });
  const LoadedModel m = LoadGgufFile(fused);
  for (const char* name : {"layers.1.mlp.experts.gate_proj", "layers.1.mlp.experts.up_proj"}) {
    EXPECT_EQ(m.weights.Get(name).ToFloatVector(), reference.weights.Get(name).ToFloatVector()) << name;
    EXPECT_FALSE(m.weights.Get(name).is_contiguous());
  }
}

}  // namespace
}  // namespace vllm
