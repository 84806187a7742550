// The MTP module's weights (weight_names.h MtpWeightSpecs): loaded from an HF folder
// and from a GGUF on request (LoadOptions::load_mtp), written by the converter as
// llama.cpp's block L (nextn tensors), and refused where a model has none. The demo
// model (models/demo) carries a trained one; qwen35_dense_untied a random one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "loader_test_util.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/model_loader/weight_names.h"
#include "vt/tensor.h"

namespace vllm {
namespace {

using testing::ThrowsWith;

std::string DemoHf() { return std::string(VLLM_DEMO_MODEL_DIR) + "/hf"; }

// Max |a - b| over two tensors of the same shape, both read as f32.
double MaxAbsDiff(const vt::Tensor& a, const vt::Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  vt::Tensor fa = vt::Tensor::Empty(a.shape(), vt::DType::kF32, vt::kCpu);
  vt::Tensor fb = vt::Tensor::Empty(b.shape(), vt::DType::kF32, vt::kCpu);
  fa.CopyFrom(a);
  fb.CopyFrom(b);
  double worst = 0;
  for (int64_t i = 0; i < fa.numel(); ++i) {
    worst = std::max(worst, std::fabs(double{fa.data_ptr<float>()[i]} - fb.data_ptr<float>()[i]));
  }
  return worst;
}

struct TempGguf {
  std::filesystem::path path;
  explicit TempGguf(const std::string& name) : path(std::filesystem::temp_directory_path() / name) {}
  ~TempGguf() { std::filesystem::remove(path); }
};

TEST(MtpWeightsTest, HfFolderLoadsTheMtpModuleOnlyWhenAsked) {
  const LoadedModel plain = LoadHfFolder(DemoHf());
  EXPECT_EQ(plain.config.mtp_num_hidden_layers, 1);
  EXPECT_FALSE(plain.weights.Has("mtp.fc.weight"));

  const LoadedModel with_mtp = LoadHfFolder(DemoHf(), {.load_mtp = true});
  const SafetensorsCheckpoint files = SafetensorsCheckpoint::Open(DemoHf());
  const std::vector<WeightSpec> specs = MtpWeightSpecs(with_mtp.config);
  EXPECT_EQ(specs.size(), 15u);  // fc, 3 norms, 2 layer norms, 6 attention, 3 MLP
  for (const WeightSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    ASSERT_TRUE(with_mtp.weights.Has(spec.name));
    EXPECT_EQ(with_mtp.weights.Get(spec.name).shape(), spec.shape);
    EXPECT_EQ(MaxAbsDiff(with_mtp.weights.Get(spec.name), files.Tensor(spec.name)), 0.0);  // the file's values
  }
  EXPECT_EQ(with_mtp.weights.Get("mtp.fc.weight").shape(), (vt::Shape{256, 512}));  // [H, 2H]
  EXPECT_EQ(with_mtp.weights.size(), plain.weights.size() + specs.size());
}

TEST(MtpWeightsTest, TheRandomReferenceModelsMtpTensorsLoadToo) {
  const LoadedModel m =
      LoadHfFolder(std::string(VT_TEST_DATA_DIR) + "/models/qwen35_dense_untied/hf", {.load_mtp = true});
  EXPECT_TRUE(m.weights.Has("mtp.layers.0.self_attn.q_proj.weight"));
}

TEST(MtpWeightsTest, AModelWithoutAnMtpModuleRefusesLoadMtp) {
  const std::string folder = std::string(VT_TEST_DATA_DIR) + "/models/qwen35_causallm/hf";
  EXPECT_TRUE(ThrowsWith([&] { LoadHfFolder(folder, {.load_mtp = true}); }, {folder, "mtp_num_hidden_layers"}));
}

TEST(MtpWeightsTest, OnlyAOneLayerModuleIsSupportedNamingTheKey) {
  ModelConfig c = LoadHfFolder(DemoHf()).config;
  c.mtp_num_hidden_layers = 2;
  EXPECT_TRUE(ThrowsWith([&] { MtpWeightSpecs(c); }, {"mtp_num_hidden_layers", "2"}));
}

TEST(MtpWeightsTest, ConvertWritesBlockLAsLlamaCppNamesItAndItLoadsBack) {
  TempGguf out("vllm_mtp_weights_test_bf16.gguf");
  ConvertHfToGguf(DemoHf(), out.path.string());  // auto: the checkpoint's bf16, no rounding
  const GgufFile file = GgufFile::Open(out.path.string());
  EXPECT_EQ(file.metadata().GetInt("qwen35.block_count"), 9);
  EXPECT_EQ(file.metadata().GetInt("qwen35.nextn_predict_layers"), 1);
  for (const char* name : {"blk.8.nextn.eh_proj.weight", "blk.8.nextn.enorm.weight", "blk.8.nextn.hnorm.weight",
                           "blk.8.nextn.shared_head_norm.weight", "blk.8.attn_q.weight", "blk.8.attn_norm.weight",
                           "blk.8.post_attention_norm.weight", "blk.8.ffn_down.weight"}) {
    EXPECT_NE(file.FindTensor(name), nullptr) << name;
  }
  EXPECT_EQ(file.FindTensor("blk.8.nextn.eh_proj.weight")->Shape(), (vt::Shape{256, 512}));

  const LoadedModel plain = LoadGgufFile(out.path.string());  // the MTP block skipped
  EXPECT_EQ(plain.config.num_hidden_layers, 8);
  EXPECT_FALSE(plain.weights.Has("mtp.fc.weight"));
  const LoadedModel gguf = LoadGgufFile(out.path.string(), {.load_mtp = true});
  const LoadedModel hf = LoadHfFolder(DemoHf(), {.load_mtp = true});
  for (const WeightSpec& spec : MtpWeightSpecs(hf.config)) {
    SCOPED_TRACE(spec.name);
    // bf16 matrices copied as stored; the norms go w + 1 in the file and back in f32.
    EXPECT_LE(MaxAbsDiff(gguf.weights.Get(spec.name), hf.weights.Get(spec.name)), 1e-6);
  }
}

TEST(MtpWeightsTest, WithoutMtpTheGgufHasNoBlockLAndLoadMtpIsRefused) {
  TempGguf out("vllm_mtp_weights_test_no_mtp.gguf");
  ConvertHfToGguf(DemoHf(), out.path.string(), {.copy_mtp = false});
  const GgufFile file = GgufFile::Open(out.path.string());
  EXPECT_EQ(file.metadata().GetInt("qwen35.block_count"), 8);
  EXPECT_FALSE(file.metadata().FindInt("qwen35.nextn_predict_layers").has_value());
  EXPECT_EQ(file.FindTensor("blk.8.nextn.eh_proj.weight"), nullptr);
  EXPECT_TRUE(ThrowsWith([&] { LoadGgufFile(out.path.string(), {.load_mtp = true}); }, {"nextn_predict_layers"}));
}

TEST(MtpWeightsTest, AnMoeModelsMtpLayerHasTheMoeBlockUnderGgufExpertNames) {
  ModelConfig c = LoadModelConfig(std::string(VT_TEST_DATA_DIR) + "/models/qwen35_moe/hf");
  c.mtp_num_hidden_layers = 1;
  const std::vector<WeightSpec> specs = MtpWeightSpecs(c);
  const auto it = std::find_if(specs.begin(), specs.end(),
                               [](const WeightSpec& s) { return s.name == "mtp.layers.0.mlp.experts.gate_proj"; });
  ASSERT_NE(it, specs.end());
  EXPECT_EQ(GgufWeightName(*it, c.family), "blk." + std::to_string(c.num_hidden_layers) + ".ffn_gate_exps.weight");
}

}  // namespace
}  // namespace vllm
