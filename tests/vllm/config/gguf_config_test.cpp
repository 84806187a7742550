// ModelConfig from GGUF metadata (qwen35, qwen35moe, qwen3) and back: the keys of
// docs/qwen35.md §5.2, the MTP block excluded from the layer count, a missing
// rope.dimension_count giving rotary width 0 with a warning (never head_dim) for
// Qwen3.5, and errors naming the file and key.
#include <gtest/gtest.h>

#include "../model_loader/loader_test_util.h"
#include "vllm/config/model_config.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/gguf_writer.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using testing::ThrowsWith;

// Writes `config`'s metadata (no tensors: the file reads as tied) after `edit`.
GgufFile WriteAndOpen(const testing::TempDir& dir, const ModelConfig& config,
                      const std::function<void(GgufMetadata&)>& edit = {}) {
  GgufWriter writer;
  WriteGgufModelConfig(config, writer.metadata());
  if (edit) edit(writer.metadata());
  writer.Write(dir.File("c.gguf"));
  return GgufFile::Open(dir.File("c.gguf"));
}

// The fields both sources share (architecture, gdn_tiled_value_heads and dtype differ by design).
void ExpectSameModel(ModelConfig a, ModelConfig b) {
  a.architecture = b.architecture = "";
  a.gdn_tiled_value_heads = b.gdn_tiled_value_heads = false;
  a.dtype = b.dtype = vt::DType::kF32;
  EXPECT_EQ(DescribeModelConfig(a), DescribeModelConfig(b));
  EXPECT_TRUE(a == b);
}

TEST(GgufConfigTest, RoundTripsEachFamily) {
  testing::TempDir dir;
  testing::DenseDims dense;
  dense.layer_types = {testing::kLinear, testing::kLinear, testing::kFull, testing::kLinear, testing::kLinear, testing::kFull};
  for (const ModelConfig& config : {testing::DenseConfig(dense, true), testing::MoeConfig(testing::MoeDims{}, true),
                                    testing::Qwen3Config(testing::Qwen3Dims{}, true)}) {
    SCOPED_TRACE(config.architecture);
    const ModelConfig back = ModelConfigFromGguf(WriteAndOpen(dir, config));
    EXPECT_EQ(back.architecture, GgufArchitectureName(config.family));
    EXPECT_EQ(back.gdn_tiled_value_heads, config.has_linear_attention());
    ExpectSameModel(back, config);
  }
}

TEST(GgufConfigTest, MissingRopeDimensionCountIsZeroWithAWarning) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{}, true);
  std::vector<std::string> warnings;
  const ModelConfig c = ModelConfigFromGguf(
      WriteAndOpen(dir, config, [](GgufMetadata& m) { m.Remove("qwen35.rope.dimension_count"); }),
      [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(c.rotary_dim, 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("qwen35.rope.dimension_count"), std::string::npos) << warnings[0];

  // Qwen3 rotates whole heads; llama.cpp's qwen3 files (e.g. the official Qwen3-0.6B
  // GGUF) omit the key, and llama.cpp then rotates head_dim.
  warnings.clear();
  const ModelConfig q = ModelConfigFromGguf(
      WriteAndOpen(dir, testing::Qwen3Config(testing::Qwen3Dims{}, true),
                   [](GgufMetadata& m) { m.Remove("qwen3.rope.dimension_count"); }),
      [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(q.rotary_dim, q.head_dim);
  EXPECT_TRUE(warnings.empty());
}

TEST(GgufConfigTest, MtpLayersAreNotMainLayers) {
  testing::TempDir dir;
  testing::DenseDims dims;
  dims.layer_types = {testing::kLinear, testing::kLinear, testing::kLinear, testing::kFull};
  const ModelConfig c = ModelConfigFromGguf(WriteAndOpen(dir, testing::DenseConfig(dims, true), [](GgufMetadata& m) {
    m.Set("qwen35.block_count", GgufValue::U32(5));
    m.Set("qwen35.nextn_predict_layers", GgufValue::U32(1));
  }));
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.layer_types.back(), LayerType::kFullAttention);
}

TEST(GgufConfigTest, RecurrentLayersArrayOverridesTheInterval) {
  testing::TempDir dir;
  testing::DenseDims dims;
  dims.layer_types = {testing::kLinear, testing::kFull, testing::kLinear, testing::kFull};
  const ModelConfig c = ModelConfigFromGguf(WriteAndOpen(dir, testing::DenseConfig(dims, true), [](GgufMetadata& m) {
    m.Set("qwen35.attention.recurrent_layers", GgufValue::IntArray(GgufType::kBool, {0, 1, 1, 0}));
  }));
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::kFullAttention, LayerType::kLinearAttention,
                                                   LayerType::kLinearAttention, LayerType::kFullAttention}));
}

TEST(GgufConfigTest, ErrorsNameTheFileAndKey) {
  testing::TempDir dir;
  const ModelConfig dense = testing::DenseConfig(testing::DenseDims{}, true);
  auto parse_without = [&](const std::string& key) {
    ModelConfigFromGguf(WriteAndOpen(dir, dense, [&](GgufMetadata& m) { m.Remove(key); }));
  };
  for (const char* key : {"qwen35.embedding_length", "qwen35.block_count", "qwen35.attention.head_count",
                          "qwen35.attention.layer_norm_rms_epsilon", "qwen35.feed_forward_length",
                          "qwen35.context_length", "qwen35.full_attention_interval", "general.architecture"}) {
    EXPECT_TRUE(ThrowsWith([&] { parse_without(key); }, {"c.gguf", "missing metadata key '" + std::string(key) + "'"}));
  }
  EXPECT_TRUE(ThrowsWith([&] { ModelConfigFromGguf(WriteAndOpen(dir, dense, [](GgufMetadata& m) {
                             m.Set("general.architecture", GgufValue::String("llama"));
                           })); },
                         {"c.gguf", "'llama' is not supported", "qwen35moe"}));
  EXPECT_TRUE(ThrowsWith([&] { ModelConfigFromGguf(WriteAndOpen(dir, dense, [](GgufMetadata& m) {
                             m.Set("qwen35.embedding_length", GgufValue::String("64"));
                           })); },
                         {"'qwen35.embedding_length'", "is a string", "expected an integer"}));
  EXPECT_TRUE(ThrowsWith([&] { ModelConfigFromGguf(WriteAndOpen(dir, dense, [](GgufMetadata& m) {
                             m.Set("qwen35.attention.value_length", GgufValue::U32(16));
                           })); },
                         {"value_length' is 16", "key_length (32)"}));
  // Found by the GGUF fuzzer: a huge block_count sized the layer list (an 8 GiB allocation).
  EXPECT_TRUE(ThrowsWith([&] { ModelConfigFromGguf(WriteAndOpen(dir, dense, [](GgufMetadata& m) {
                             m.Set("qwen35.block_count", GgufValue::U32(4294967295u));
                           })); },
                         {"c.gguf", "4294967295 main layers", "expected 1..65536"}));
  EXPECT_TRUE(ThrowsWith([&] { ModelConfigFromGguf(WriteAndOpen(dir, dense, [](GgufMetadata& m) {
                             m.Set("qwen35.embedding_length", GgufValue::Uint64(uint64_t{1} << 40));
                           })); },
                         {"c.gguf", "hidden_size = 1099511627776", "2^31"}));
  EXPECT_TRUE(ThrowsWith([&] { ModelConfigFromGguf(WriteAndOpen(dir, dense, [](GgufMetadata& m) {
                             m.Set("qwen35.attention.head_count_kv", GgufValue::U32(3));
                           })); },
                         {"c.gguf", "num_key_value_heads = 3"}));
}

TEST(GgufConfigTest, WriterRefusesLayerPatternsGgufCannotStore) {
  testing::DenseDims dims;
  dims.layer_types = {testing::kFull, testing::kLinear, testing::kLinear, testing::kFull};
  GgufMetadata m;
  EXPECT_TRUE(ThrowsWith([&] { WriteGgufModelConfig(testing::DenseConfig(dims), m); }, {"full_attention_interval"}));
}

}  // namespace
}  // namespace vllm
