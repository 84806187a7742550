// Tensor parallelism on the CPU (distributed/tensor_parallel.h): each reference model
// run by a group of 2 and 4 ranks (threads with Gloo communicators, as processes
// would be) gives the greedy tokens of the model on one rank and its logits within
// f32 reduction-order tolerance, and still matches HF. Every rank runs the same
// scheduler over the same requests, so their forwards meet in the same collectives;
// rank 0's run is compared.
//
// Tolerance: 1e-4 of each logits row's max (model_reference.h's measure), HF's own
// tolerance in hf_reference_test.cpp. A sharded block sums its partial products in
// another order than the whole matrix (measured: at most a few 1e-6).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vllm/distributed/gloo_communicator.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/model_executor/models/model_registry.h"
#include "vllm/model_loader/hf_to_gguf.h"
#include "vllm/testing/engine_harness.h"
#include "vllm/testing/gloo_ranks.h"
#include "vllm/testing/model_fixtures.h"
#include "vllm/testing/model_reference.h"
#include "vt/error.h"

namespace vllm {
namespace {

constexpr double kRelTol = 1e-4;

// All prompts at once under a small budget and 4-token pages (decodes and prompt
// chunks share steps), 16 tokens each. Without prompt_logits only the sampling rows
// get logits, so some steps (prompt chunks alone) have none.
testing::GenerateResult RunAll(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                               bool prompt_logits = true) {
  const testing::HarnessOptions options{.block_size = 4, .max_num_batched_tokens = 20, .prompt_logits = prompt_logits};
  return testing::GenerateGreedy(model, prompts, 16, options);
}

// Rank 0's run of `loaded` over a group of world_size (experts split whole between the
// ranks with expert_parallel).
testing::GenerateResult RunTensorParallel(const LoadedModel& loaded, int world_size,
                                          const std::vector<std::vector<int32_t>>& prompts, bool prompt_logits = true,
                                          bool expert_parallel = false) {
  testing::GenerateResult rank0;
  testing::RunRanks(world_size, [&](int rank, Communicator& group) {
    const std::unique_ptr<Model> model = ModelRegistry::Create(
        loaded, ModelOptions{.device = vt::kCpu, .tensor_parallel = &group, .enable_expert_parallel = expert_parallel});
    testing::GenerateResult run = RunAll(*model, prompts, prompt_logits);
    if (rank == 0) rank0 = std::move(run);
  });
  return rank0;
}

void ExpectSameRun(const testing::GenerateResult& got, const testing::GenerateResult& ref,
                   bool prompt_logits = true) {
  ASSERT_EQ(got.requests.size(), ref.requests.size()) << "a rank failed (see above)";
  const testing::RunErrors e = testing::CompareRuns(got, ref);
  EXPECT_EQ(e.greedy_mismatches, 0);
  if (prompt_logits) {
    EXPECT_LE(e.prompt.max_rel, kRelTol) << e.prompt.ToString();
  }
  EXPECT_LE(e.decode.max_rel, kRelTol) << e.decode.ToString();
  ::testing::Test::RecordProperty("prompt_max_rel", std::to_string(e.prompt.max_rel));
  ::testing::Test::RecordProperty("decode_max_rel", std::to_string(e.decode.max_rel));
}

struct Case {
  std::string variant;
  int world_size;
  bool expert_parallel = false;
};

class TensorParallelReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelReferenceTest, GreedyTokensAndLogitsEqualOneRankAndHf) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  const testing::ReferenceModel ref = testing::LoadReferenceVariant(GetParam().variant);
  const LoadedModel loaded = LoadModel(ref.hf_folder);
  std::vector<std::vector<int32_t>> prompts;
  for (const testing::ReferencePrompt& p : ref.prompts) prompts.push_back(p.prompt_ids);
  const std::unique_ptr<Model> one = ModelRegistry::Create(loaded, ModelOptions{});
  const testing::GenerateResult single = RunAll(*one, prompts);
  const testing::GenerateResult sharded =
      RunTensorParallel(loaded, GetParam().world_size, prompts, true, GetParam().expert_parallel);
  ExpectSameRun(sharded, single);
  const testing::RunErrors hf = testing::CompareRun(ref, {0, 1, 2, 3, 4}, sharded);
  EXPECT_LE(hf.prompt.max_rel, kRelTol) << "against HF: " << hf.prompt.ToString();
}

INSTANTIATE_TEST_SUITE_P(Models, TensorParallelReferenceTest,
                         ::testing::Values(Case{"qwen35_dense_untied", 2}, Case{"qwen35_dense_untied", 4},
                                           Case{"qwen35_moe", 2}, Case{"qwen35_moe", 4}, Case{"qwen35_moe", 2, true},
                                           Case{"qwen35_moe", 4, true}, Case{"qwen3", 2}, Case{"qwen3", 4},
                                           Case{"qwen35_causallm", 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.variant + "_tp" + std::to_string(info.param.world_size) +
                                  (info.param.expert_parallel ? "_ep" : "");
                         });

// A Q8_0 GGUF: column runs of whole 32-value blocks, value heads in the tiled order
// (Hv = 2 Hk, so a rank's value heads are two runs), one KV head replicated on both
// ranks, experts split inside their intermediate width. Plain requests (no prompt
// logprobs): steps of prompt chunks alone gather no logits rows.
TEST(TensorParallelGgufTest, Q8_0MoeWithTiledValueHeadsEqualsOneRank) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  testing::MoeDims dims;
  dims.base.linear_value_head_dim = 32;
  dims.moe_intermediate_size = 64;
  dims.shared_expert_intermediate_size = 64;
  const LoadedModel loaded = LoadModel(testing::BuildMoeGguf(dims, GgufOutType::kQ8_0, 5));
  ASSERT_TRUE(loaded.config.gdn_tiled_value_heads);
  // The first prompt (30 tokens) fills the first step's 20-token budget alone.
  std::vector<int32_t> first;
  for (int32_t i = 0; i < 30; ++i) first.push_back((i * 7 + 3) % 32);
  const std::vector<std::vector<int32_t>> prompts = {first, {3, 8}, {25}};
  const std::unique_ptr<Model> one = ModelRegistry::Create(loaded, ModelOptions{});
  const testing::GenerateResult single = RunAll(*one, prompts, false);
  ExpectSameRun(RunTensorParallel(loaded, 2, prompts, false), single, false);
  // The same ranks holding whole Q8_0 experts (views of the file's expert rows).
  ExpectSameRun(RunTensorParallel(loaded, 2, prompts, false, true), single, false);
}

TEST(TensorParallelShardTest, AGroupSizeThatDoesNotDivideTheHeadsIsNamed) {
  const testing::ReferenceModel ref = testing::LoadReferenceVariant("qwen35_causallm");  // Hk 2
  const ModelConfig config = LoadModelConfig(ref.hf_folder);
  try {
    ShardModelConfig(config, 0, 4);
    FAIL() << "4 ranks over 2 GDN key heads were accepted";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_num_key_heads (2) is not divisible by --tensor-parallel-size 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(TensorParallelShardTest, ARankHoldsItsShareOfEveryHeadAndWidth) {
  const testing::ReferenceModel ref = testing::LoadReferenceVariant("qwen35_moe");
  const LoadedModel loaded = LoadModel(ref.hf_folder);
  const TensorParallelShard shard = ShardForTensorParallel(loaded.config, loaded.weights, 3, 4);
  const ModelConfig& c = shard.config;
  EXPECT_EQ(c.num_attention_heads, 1);
  EXPECT_EQ(c.num_key_value_heads, 1);  // 2 KV heads over 4 ranks: each replicated twice
  EXPECT_EQ(c.linear_num_key_heads, 1);
  EXPECT_EQ(c.linear_num_value_heads, 2);
  EXPECT_EQ(c.moe_intermediate_size, 8);
  EXPECT_EQ(c.shared_expert_intermediate_size, 16);
  EXPECT_EQ(c.vocab_size, loaded.config.vocab_size);
  // Every weight the rank's config names is there with its shape.
  EXPECT_NO_THROW(CheckWeightsMatchSpecs(ModelWeightSpecs(c), c, shard.weights));
  // Rank 3's KV head is the model's head 1: rows [32, 64) of k_proj.
  const std::string k = "layers.3.self_attn.k_proj.weight";
  ASSERT_EQ(loaded.config.layer_types.at(3), LayerType::kFullAttention);
  EXPECT_EQ(shard.weights.Get(k).ToFloatVector(), loaded.weights.Get(k).Slice(0, 32, 64).ToFloatVector());
}

// Expert parallelism: rank 1 of 4 holds experts 2 and 3 of 8 whole (views of the
// checkpoint's rows), the router scores all 8, the shared expert is split by width.
TEST(TensorParallelShardTest, AnExpertParallelRankHoldsWholeExperts) {
  const testing::ReferenceModel ref = testing::LoadReferenceVariant("qwen35_moe");
  const LoadedModel loaded = LoadModel(ref.hf_folder);
  ASSERT_EQ(loaded.config.num_experts, 8);
  const TensorParallelShard shard = ShardForTensorParallel(loaded.config, loaded.weights, 1, 4, true);
  const ModelConfig& c = shard.config;
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.local_experts, 2);
  EXPECT_EQ(c.expert_begin, 2);
  EXPECT_EQ(c.moe_intermediate_size, loaded.config.moe_intermediate_size);
  EXPECT_EQ(c.shared_expert_intermediate_size, loaded.config.shared_expert_intermediate_size / 4);
  EXPECT_NO_THROW(CheckWeightsMatchSpecs(ModelWeightSpecs(c), c, shard.weights));
  const std::string p = "layers.0.mlp.";
  EXPECT_EQ(shard.weights.Get(p + "gate.weight").size(0), 8);
  for (const char* name : {"experts.gate_proj", "experts.up_proj", "experts.down_proj"}) {
    EXPECT_EQ(shard.weights.Get(p + name).ToFloatVector(), loaded.weights.Get(p + name).Slice(0, 2, 4).ToFloatVector())
        << name;
  }
  ModelConfig six = loaded.config;  // every other width divides by 4
  six.num_experts = 6;
  try {
    ShardModelConfig(six, 0, 4, true);
    ADD_FAILURE() << "6 experts over 4 ranks were accepted";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_experts (6) is not divisible by --tensor-parallel-size 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(TensorParallelShardTest, VocabularyRowsArePaddedToEqualBlocks) {
  const VocabShard last = VocabShardOf(10, 3, 4);
  EXPECT_EQ(last.padded, 3);
  EXPECT_EQ(last.begin, 9);
  EXPECT_EQ(last.end, 10);
  const VocabShard first = VocabShardOf(10, 0, 4);
  EXPECT_EQ(first.begin, 0);
  EXPECT_EQ(first.end, 3);
}

}  // namespace
}  // namespace vllm
