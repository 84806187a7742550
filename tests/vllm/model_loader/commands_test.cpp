// `vllm-cpp info` and `vllm-cpp convert`: what they print and write.
#include <gtest/gtest.h>

#include "loader_test_util.h"
#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using testing::ThrowsWith;

std::string RunCaptured(int (*command)(const CommandArgs&), const CommandArgs& args, int* rc = nullptr) {
  ::testing::internal::CaptureStdout();
  int code = -1;
  try {
    code = command(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  if (rc) *rc = code;
  return ::testing::internal::GetCapturedStdout();
}

void ExpectContains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) EXPECT_NE(text.find(p), std::string::npos) << "missing \"" << p << "\" in:\n" << text;
}

TEST(InfoCommandTest, DescribesAGgufFile) {
  const std::string path = testing::BuildDenseF16Gguf(testing::DenseDims{}, false, true);
  const GgufFile file = GgufFile::Open(path);
  uint64_t bytes = 0;
  int f16 = 0, f32 = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    bytes += t.nbytes;
    f16 += t.ggml_type == 1;
    f32 += t.ggml_type == 0;
  }
  int rc = -1;
  const std::string out = RunCaptured(RunInfoCommand, {path, "--metadata"}, &rc);
  EXPECT_EQ(rc, 0);
  ExpectContains(out, {"format: GGUF v3", "architecture: qwen35", "hidden_size: 64", "vocab_size: 32",
                       "num_attention_heads: 2", "num_key_value_heads: 1", "head_dim: 32", "rotary_dim: 0",
                       "tensors: " + std::to_string(file.tensors().size()) + " stored, " + std::to_string(bytes) + " bytes",
                       "dtypes: F16 " + std::to_string(f16) + ", F32 " + std::to_string(f32),
                       "weights: " + std::to_string(file.tensors().size()) + " loaded",
                       "warning: ", "rope.dimension_count", "qwen35.block_count = u32 2"});
}

TEST(InfoCommandTest, DescribesAnHfFolder) {
  testing::TempDir dir;
  testing::WriteHfFolder(dir.path(), testing::MoeConfig(testing::MoeDims{}), {.dtype = vt::DType::kBF16, .num_shards = 2});
  const std::string out = RunCaptured(RunInfoCommand, {dir.path()});
  ExpectContains(out, {"format: HF checkpoint folder, 2 safetensors file(s)", "architecture: Qwen3_5MoeForConditionalGeneration",
                       "family: qwen3.5-moe", "num_experts: 4", "dtypes: BF16 ", "bytes ("});
}

TEST(InfoCommandTest, ErrorsPropagate) {
  EXPECT_TRUE(ThrowsWith([] { RunCaptured(RunInfoCommand, {"/no/such/model.gguf"}); }, {"/no/such/model.gguf"}));
  EXPECT_THROW(RunCaptured(RunInfoCommand, {}), CliError);
  EXPECT_NE(RunCaptured(RunInfoCommand, {"--help"}).find("usage: vllm-cpp info PATH"), std::string::npos);
}

TEST(ConvertCommandTest, WritesALoadableGguf) {
  testing::TempDir dir;
  testing::WriteHfFolder(dir.File("hf"), testing::DenseConfig(testing::KQuantDenseDims()), {.dtype = vt::DType::kBF16});
  const std::string out = RunCaptured(RunConvertCommand, {dir.File("hf"), dir.File("m.gguf"), "--outtype", "q8_0"});
  ExpectContains(out, {"wrote " + dir.File("m.gguf"), "tensors"});
  const LoadedModel m = LoadModel(dir.File("m.gguf"));
  EXPECT_EQ(m.config.dtype, vt::DType::kQ8_0);
  EXPECT_EQ(m.gguf_metadata->GetString("general.name"), "hf");
  EXPECT_EQ(m.gguf_metadata->GetInt("general.file_type"), 7);
  EXPECT_EQ(m.gguf_metadata->Get("tokenizer.ggml.tokens").ArraySize(), 64u);

  RunCaptured(RunConvertCommand, {dir.File("hf"), dir.File("auto.gguf"), "--no-tokenizer"});
  const LoadedModel a = LoadModel(dir.File("auto.gguf"));
  EXPECT_EQ(a.config.dtype, vt::DType::kBF16);  // auto keeps the checkpoint's float type
  EXPECT_FALSE(a.gguf_metadata->Has("tokenizer.ggml.tokens"));

  EXPECT_TRUE(ThrowsWith([&] { RunCaptured(RunConvertCommand, {dir.File("hf"), dir.File("x.gguf"), "--outtype", "q3_k"}); },
                         {"unknown output type 'q3_k'"}));
  EXPECT_NE(RunCaptured(RunConvertCommand, {"--help"}).find("--outtype"), std::string::npos);
}

TEST(ConvertCommandTest, TheMtpModuleGoesAlongUnlessNoMtp) {
  testing::TempDir dir;
  const std::string demo = std::string(VLLM_DEMO_MODEL_DIR) + "/hf";
  RunCaptured(RunConvertCommand, {demo, dir.File("with.gguf")});
  RunCaptured(RunConvertCommand, {demo, dir.File("without.gguf"), "--no-mtp"});
  EXPECT_NE(GgufFile::Open(dir.File("with.gguf")).FindTensor("blk.8.nextn.eh_proj.weight"), nullptr);
  EXPECT_EQ(GgufFile::Open(dir.File("without.gguf")).FindTensor("blk.8.nextn.eh_proj.weight"), nullptr);
}

TEST(ConvertCommandTest, TokenizerKeys) {
  testing::TempDir dir;
  const ModelConfig config = testing::DenseConfig(testing::DenseDims{});
  testing::WriteHfFolder(dir.File("hf"), config);
  RunCaptured(RunConvertCommand, {dir.File("hf"), dir.File("m.gguf")});
  const GgufFile file = GgufFile::Open(dir.File("m.gguf"));
  const GgufMetadata& m = file.metadata();
  EXPECT_EQ(m.GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(m.GetString("tokenizer.ggml.pre"), "qwen35");
  const std::vector<std::string>& tokens = m.Get("tokenizer.ggml.tokens").AsStringArray();
  ASSERT_EQ(tokens.size(), 32u);
  EXPECT_EQ(tokens[0], "ab");
  EXPECT_EQ(tokens[28], "<|endoftext|>");
  EXPECT_EQ(tokens[31], "[PAD31]");
  const std::vector<int64_t> types = m.GetIntArray("tokenizer.ggml.token_type");
  EXPECT_EQ(types[0], 1);   // normal
  EXPECT_EQ(types[29], 3);  // control
  EXPECT_EQ(types[31], 5);  // unused
  EXPECT_EQ(m.Get("tokenizer.ggml.merges").AsStringArray(), (std::vector<std::string>{"a b", "ab c"}));
  EXPECT_EQ(m.GetInt("tokenizer.ggml.eos_token_id"), 29);
  EXPECT_EQ(m.GetInt("tokenizer.ggml.padding_token_id"), 28);
  EXPECT_FALSE(m.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_NE(m.GetString("tokenizer.chat_template").find("<|im_start|>"), std::string::npos);
}

}  // namespace
}  // namespace vllm
