// ModelRunner: SchedulerOutput -> batch metadata (exact values for a batch mixing a
// decode, a new prompt chunk and a continuing chunk), which logits rows each
// request gets, recurrent-state resets, and how sampled rows map back to requests.
// A stub model stands in for a real one (the model tests run real ones).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "vllm/worker/cache_engine.h"
#include "vllm/worker/model_runner.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vllm {
namespace {

constexpr int64_t kBlockSize = 4;
constexpr int64_t kVocab = 16;

// Logits row r is one-hot at (logits_indices[r] % vocab): greedy sampling then
// returns the batch row each request's logits came from.
class RowEchoModel final : public Model {
 public:
  int64_t vocab_size() const override { return kVocab; }
  vt::Device device() const override { return vt::kCpu; }
  vt::DType activation_dtype() const override { return vt::DType::kF32; }
  std::vector<LayerCacheSpec> cache_spec() const override {
    return {{.kind = LayerCacheSpec::Kind::kGatedDeltaNet, .conv_dim = 3, .conv_kernel = 4, .num_value_heads = 1,
             .key_head_dim = 2, .value_head_dim = 2}};
  }
  vt::Tensor Forward(const ForwardBatch& batch, const ModelCaches&) const override {
    last_batch = batch;
    const std::vector<int64_t> rows = batch.logits_indices.ToIntVector();
    std::vector<float> logits(rows.size() * kVocab, 0.0f);
    for (size_t r = 0; r < rows.size(); ++r) logits[r * kVocab + rows[r] % kVocab] = 1.0f;
    return vt::Tensor::FromVector(logits, {static_cast<int64_t>(rows.size()), kVocab});
  }
  mutable ForwardBatch last_batch;
};

std::vector<int64_t> Ints(const vt::Tensor& t) { return t.ToIntVector(); }

struct MixedStep {
  std::vector<std::unique_ptr<Request>> requests;
  SchedulerOutput output;
};

// r0: a decode at position 9; r1: the first 5 tokens of a 7-token prompt (a new
// sequence); r2: prompt positions 6..8 of a 9-token prompt, ending it (samples).
MixedStep BuildMixedStep(bool r1_wants_prompt_logprobs) {
  MixedStep step;
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams with_logprobs = greedy;
  if (r1_wants_prompt_logprobs) with_logprobs.prompt_logprobs = 2;
  const std::vector<int32_t> no_eos;
  step.requests.push_back(std::make_unique<Request>("r0", std::vector<int32_t>(9, 1), greedy, no_eos, 0));
  step.requests.push_back(
      std::make_unique<Request>("r1", std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}, with_logprobs, no_eos, 1));
  step.requests.push_back(std::make_unique<Request>("r2", std::vector<int32_t>(9, 2), greedy, no_eos, 2));
  step.requests[0]->AppendOutputToken(7);
  auto scheduled = [&](int i, std::vector<int32_t> tokens, int64_t computed, std::vector<int32_t> blocks, int32_t slot,
                       bool is_new, bool samples) {
    return ScheduledRequest{.req_id = step.requests[i]->req_id,
                            .request = step.requests[i].get(),
                            .token_ids = std::move(tokens),
                            .num_computed_tokens = computed,
                            .block_ids = std::move(blocks),
                            .state_slot = slot,
                            .is_new_sequence = is_new,
                            .samples = samples};
  };
  step.output.scheduled = {scheduled(0, {7}, 9, {3, 5, 8}, 2, false, true),
                           scheduled(1, {1, 2, 3, 4, 5}, 0, {2, 6}, 1, true, false),
                           scheduled(2, {2, 2, 2}, 6, {1, 4, 7}, 0, false, true)};
  step.output.num_decodes = 1;
  step.output.total_num_scheduled_tokens = 9;
  return step;
}

ModelCaches Caches(const Model& model) {
  return AllocateCaches(model.cache_spec(), 10, kBlockSize, 3, vt::DType::kF32, vt::kCpu);
}

TEST(ModelRunnerTest, MixedBatchMetadata) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  const MixedStep step = BuildMixedStep(false);
  const ForwardBatch batch = runner.PrepareBatch(step.output);
  const AttnMetadata& m = batch.attn;
  EXPECT_EQ(Ints(batch.input_ids), (std::vector<int64_t>{7, 1, 2, 3, 4, 5, 2, 2, 2}));
  EXPECT_EQ(Ints(m.positions), (std::vector<int64_t>{9, 0, 1, 2, 3, 4, 6, 7, 8}));
  // slot = block_ids[pos / 4] * 4 + pos % 4
  EXPECT_EQ(Ints(m.slot_mapping), (std::vector<int64_t>{33, 8, 9, 10, 11, 24, 18, 19, 28}));
  EXPECT_EQ(m.block_tables.shape(), (vt::Shape{3, 3}));
  EXPECT_EQ(Ints(m.block_tables), (std::vector<int64_t>{3, 5, 8, 2, 6, 0, 1, 4, 7}));  // padded with block 0
  EXPECT_EQ(Ints(m.seq_lens), (std::vector<int64_t>{10, 5, 9}));
  EXPECT_EQ(Ints(m.query_start_loc), (std::vector<int64_t>{0, 1, 6, 9}));
  EXPECT_EQ(Ints(m.state_slot_ids), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(Ints(batch.logits_indices), (std::vector<int64_t>{0, 8}));  // r1 neither samples nor scores
  EXPECT_EQ(m.num_tokens, 9);
  EXPECT_EQ(m.num_seqs, 3);
  EXPECT_EQ(m.num_decodes, 1);
  EXPECT_EQ(m.max_query_len, 5);
  EXPECT_EQ(m.max_seq_len, 10);
}

TEST(ModelRunnerTest, PromptLogprobsTakeEveryRowOfTheChunk) {
  const MixedStep step = BuildMixedStep(true);
  const std::vector<LogitsRows> rows = ModelRunner::PlanLogitsRows(step.output);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ((std::vector<int64_t>{rows[0].first_row, rows[0].num_rows, rows[0].first_position}),
            (std::vector<int64_t>{0, 1, 9}));
  EXPECT_EQ((std::vector<int64_t>{rows[1].first_row, rows[1].num_rows, rows[1].first_position}),
            (std::vector<int64_t>{1, 5, 0}));
  EXPECT_EQ((std::vector<int64_t>{rows[2].first_row, rows[2].num_rows, rows[2].first_position}),
            (std::vector<int64_t>{6, 1, 8}));
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  EXPECT_EQ(Ints(runner.PrepareBatch(step.output).logits_indices), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 8}));
  const RunnerOutput out = runner.Execute(step.output);
  ASSERT_EQ(out.prompt_logprobs.count("r1"), 1u);
  const PromptLogprobsChunk& chunk = out.prompt_logprobs.at("r1");
  EXPECT_EQ(chunk.first_position, 1);
  ASSERT_EQ(chunk.entries.size(), 5u);  // positions 0..4 score prompt tokens 1..5
  EXPECT_EQ(out.sampled.count("r1"), 0u);
}

// Each sampling request gets the token of its own row (the stub makes the argmax
// the batch row), and new sequences start from a zeroed recurrent state while the
// others keep theirs.
TEST(ModelRunnerTest, ExecuteResetsNewSequencesAndSamplesTheirOwnRows) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  const LayerGdnState& state = runner.caches().gdn[0];
  vt::Fill({.dst = state.conv_states, .value = 1.0});
  vt::Fill({.dst = state.ssm_states, .value = 1.0});
  const MixedStep step = BuildMixedStep(false);
  const RunnerOutput out = runner.Execute(step.output);
  ASSERT_EQ(out.sampled.size(), 2u);
  EXPECT_EQ(out.sampled.at("r0").token_id, 0);  // row 0
  EXPECT_EQ(out.sampled.at("r2").token_id, 8);  // row 8
  for (int slot = 0; slot < 3; ++slot) {
    const float expected = slot == 1 ? 0.0f : 1.0f;  // r1 is the new sequence, in slot 1
    for (float v : state.conv_states.Select(0, slot).ToFloatVector()) EXPECT_EQ(v, expected) << "slot " << slot;
    for (float v : state.ssm_states.Select(0, slot).ToFloatVector()) EXPECT_EQ(v, expected) << "slot " << slot;
  }
  EXPECT_EQ(Ints(model.last_batch.attn.positions), (std::vector<int64_t>{9, 0, 1, 2, 3, 4, 6, 7, 8}));
}

// Greedy requests without logprobs, penalties or pending min_tokens are sampled by
// one vt::Argmax over the step's logits on the model's device (only the token ids
// come back); a request that needs the sampler's other work sends the whole step
// through the host sampler. Both give each request its own row's token.
TEST(ModelRunnerTest, PlainGreedyStepsTakeTheArgmaxOnTheDevice) {
  RowEchoModel model;
  for (const bool penalty : {false, true}) {
    SCOPED_TRACE(penalty ? "r2 with a repetition penalty" : "all plain greedy");
    ModelRunner runner(model, Caches(model), kBlockSize, 0);
    MixedStep step = BuildMixedStep(false);
    if (penalty) {
      SamplingParams params;
      params.temperature = 0;
      params.repetition_penalty = 1.5;
      step.requests[2] = std::make_unique<Request>("r2", std::vector<int32_t>(9, 2), params, std::vector<int32_t>{}, 2);
      step.output.scheduled[2].request = step.requests[2].get();
    }
    vt::reach::Reset();
    const RunnerOutput out = runner.Execute(step.output);
    EXPECT_EQ(vt::reach::Count("ModelRunner::ArgmaxOnDevice"), penalty ? 0u : 1u);
    EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), penalty ? 1u : 0u);
    ASSERT_EQ(out.sampled.size(), 2u);
    EXPECT_EQ(out.sampled.at("r0").token_id, 0);
    EXPECT_EQ(out.sampled.at("r2").token_id, 8);
  }
}

TEST(ModelRunnerTest, RequestBeyondItsBlocksIsRefused) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  MixedStep step = BuildMixedStep(false);
  step.output.scheduled[2].block_ids = {1, 4};  // 9 tokens need 3 blocks of 4
  EXPECT_THROW(runner.PrepareBatch(step.output), std::logic_error);
}

}  // namespace
}  // namespace vllm
