// The MTP head (models/mtp_head.h) against HF: the demo model's head was trained in
// PyTorch (tools/demo_model/mtp_head.py), and its references hold the head's f32
// logits over each prompt (mtp_logits.<i>, row j predicting token j + 2). The trunk's
// hidden states come from vllm-cpp's own forward, the head runs on them with its own
// paged KV cache; rows are held to the trunk's HF tolerance (1e-4 of the row's max).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/model_executor/models/mtp_head.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/testing/model_reference.h"
#include "vllm/worker/cache_engine.h"

namespace vllm {
namespace {

constexpr int32_t kBlock = 1, kBlockSize = 128, kSlot = 1;  // one sequence in block 1, state slot 1
constexpr double kRelTol = 1e-4;

// A prefill of positions 0 .. n-1 of one sequence.
AttnMetadata OneSequence(int32_t n) {
  std::vector<int32_t> positions(static_cast<size_t>(n)), slots(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), 0);
  for (int32_t p = 0; p < n; ++p) slots[static_cast<size_t>(p)] = kBlock * kBlockSize + p;
  return AttnMetadata{.positions = vt::Tensor::FromVector(positions, {n}),
                      .slot_mapping = vt::Tensor::FromVector(slots, {n}),
                      .block_tables = vt::Tensor::FromVector(std::vector<int32_t>{kBlock}, {1, 1}),
                      .seq_lens = vt::Tensor::FromVector(std::vector<int32_t>{n}, {1}),
                      .query_start_loc = vt::Tensor::FromVector(std::vector<int32_t>{0, n}, {2}),
                      .state_slot_ids = vt::Tensor::FromVector(std::vector<int32_t>{kSlot}, {1}),
                      .num_tokens = n,
                      .num_seqs = 1,
                      .num_decodes = n == 1 ? 1 : 0,
                      .max_query_len = n,
                      .max_seq_len = n};
}

vt::Tensor Rows(int32_t n) {
  std::vector<int32_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return vt::Tensor::FromVector(rows, {n});
}

std::vector<float> ToVector(const vt::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.Contiguous().data(), v.size() * sizeof(float));
  return v;
}

TEST(MtpHeadTest, DraftLogitsMatchTheTrainedHeadOfTheDemoModel) {
  const LoadedModel m = LoadHfFolder(std::string(VLLM_DEMO_MODEL_DIR) + "/hf", {.load_mtp = true});
  const testing::ReferenceModel ref = testing::LoadReference("demo");
  const SafetensorsFile file = SafetensorsFile::Open(std::string(VLLM_DEMO_MODEL_DIR) + "/reference.safetensors");
  const DecoderModel trunk(m.config, m.weights, {});
  const MtpHead head(m.config, m.weights, {}, trunk);
  for (size_t i = 1; i < ref.prompts.size(); ++i) {  // prompt 0 has one token: nothing to draft from
    SCOPED_TRACE("prompt " + std::to_string(i));
    const std::vector<int32_t>& ids = ref.prompts[i].prompt_ids;
    const int32_t n = static_cast<int32_t>(ids.size());
    const ModelCaches caches = AllocateCaches(trunk.cache_spec(), 2, kBlockSize, 2, vt::DType::kF32, vt::kCpu);
    const ForwardBatch batch{.input_ids = vt::Tensor::FromVector(ids, {n}), .attn = OneSequence(n),
                             .logits_indices = Rows(n)};
    const vt::Tensor hidden = trunk.ForwardHidden(batch, caches);

    testing::LogitsError trunk_error;  // the hidden states the head reads are HF's too
    trunk_error.Add(ToVector(trunk.LmHead(hidden, Rows(n))).data(), ref.prompts[i].logits.data(), n, ref.vocab_size);
    EXPECT_LE(trunk_error.max_rel, kRelTol) << trunk_error.ToString();

    const ModelCaches mtp_cache = AllocateCaches({head.cache_spec()}, 2, kBlockSize, 0, vt::DType::kF32, vt::kCpu);
    const std::vector<int32_t> next(ids.begin() + 1, ids.end());
    vt::Tensor out_hidden;
    const vt::Tensor logits = head.Forward(hidden.Slice(0, 0, n - 1), vt::Tensor::FromVector(next, {n - 1}),
                                           OneSequence(n - 1), mtp_cache.kv.at(0), Rows(n - 1), &out_hidden);
    const SafetensorsTensorInfo* info = file.FindTensor("mtp_logits." + std::to_string(i));
    ASSERT_NE(info, nullptr);
    const vt::Tensor expected = file.Tensor(*info);
    ASSERT_EQ(logits.shape(), expected.shape());
    testing::LogitsError error;
    error.Add(ToVector(logits).data(), ToVector(expected).data(), n - 1, ref.vocab_size);
    EXPECT_LE(error.max_rel, kRelTol) << error.ToString();
    EXPECT_EQ(error.argmax_mismatches, 0) << error.ToString();
    EXPECT_EQ(out_hidden.shape(), (vt::Shape{n - 1, m.config.hidden_size}));
  }
}

TEST(MtpHeadTest, WeightsLoadedWithoutTheMtpModuleAreRefusedNamingLoadMtp) {
  const LoadedModel m = LoadHfFolder(std::string(VLLM_DEMO_MODEL_DIR) + "/hf");
  const DecoderModel trunk(m.config, m.weights, {});
  try {
    MtpHead head(m.config, m.weights, {}, trunk);
    FAIL() << "built an MTP head without its weights";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("load_mtp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mtp.fc.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vllm
