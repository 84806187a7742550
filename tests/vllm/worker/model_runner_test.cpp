// ModelRunner: SchedulerOutput -> its own per-request state -> batch metadata
// (exact values for a batch mixing a decode, a continuing chunk and a new prompt
// chunk), which logits rows each request gets, recurrent-state resets, how sampled
// rows map back to requests, and state kept in step with the scheduler's.
// A stub model stands in for a real one (the model tests run real ones).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vllm/core/scheduler.h"

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

SamplingParams Greedy() {
  SamplingParams greedy;
  greedy.temperature = 0;
  return greedy;
}

NewRequestData NewRequest(const std::string& id, std::vector<int32_t> prompt, std::vector<int32_t> blocks, int32_t slot,
                          SamplingParams params = Greedy()) {
  return {.req_id = id,
          .prompt_token_ids = std::move(prompt),
          .sampling_params = std::move(params),
          .block_ids = std::move(blocks),
          .state_slot = slot};
}

struct MixedStep {
  SchedulerOutput prefill, mixed;
};

// Step 1 (prefill): r0's whole 9-token prompt (samples), r2's first 6 of 9 tokens.
// Step 2 (mixed), in batch order: r0 decodes token 7 at position 9; r2 computes
// positions 6..8, ending its prompt (samples), with one more block; r1 is new: the
// first 5 tokens of a 7-token prompt.
MixedStep BuildMixedStep(bool r1_wants_prompt_logprobs, const SamplingParams& r2_params = Greedy()) {
  MixedStep step;
  step.prefill.scheduled_new_reqs = {NewRequest("r0", std::vector<int32_t>(9, 1), {3, 5, 8}, 2),
                                     NewRequest("r2", std::vector<int32_t>(9, 2), {1, 4}, 0, r2_params)};
  step.prefill.num_scheduled_tokens = {{"r0", 9}, {"r2", 6}};
  step.prefill.total_num_scheduled_tokens = 15;
  SamplingParams r1_params = Greedy();
  if (r1_wants_prompt_logprobs) r1_params.prompt_logprobs = 2;
  step.mixed.scheduled_cached_reqs = {{.req_id = "r0", .new_token_ids = {7}, .num_computed_tokens = 9},
                                      {.req_id = "r2", .new_block_ids = {7}, .num_computed_tokens = 6}};
  step.mixed.scheduled_new_reqs = {NewRequest("r1", {1, 2, 3, 4, 5, 6, 7}, {2, 6}, 1, r1_params)};
  step.mixed.num_scheduled_tokens = {{"r0", 1}, {"r2", 3}, {"r1", 5}};
  step.mixed.total_num_scheduled_tokens = 9;
  return step;
}

ModelCaches Caches(const Model& model) {
  return AllocateCaches(model.cache_spec(), 10, kBlockSize, 3, vt::DType::kF32, vt::kCpu);
}

TEST(ModelRunnerTest, MixedBatchMetadata) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  const MixedStep step = BuildMixedStep(false);
  runner.UpdateStates(step.prefill);
  const ForwardBatch batch = runner.PrepareBatch(runner.UpdateStates(step.mixed));
  const AttnMetadata& m = batch.attn;
  EXPECT_EQ(Ints(batch.input_ids), (std::vector<int64_t>{7, 2, 2, 2, 1, 2, 3, 4, 5}));
  EXPECT_EQ(Ints(m.positions), (std::vector<int64_t>{9, 6, 7, 8, 0, 1, 2, 3, 4}));
  // slot = block_ids[pos / 4] * 4 + pos % 4
  EXPECT_EQ(Ints(m.slot_mapping), (std::vector<int64_t>{33, 18, 19, 28, 8, 9, 10, 11, 24}));
  EXPECT_EQ(m.block_tables.shape(), (vt::Shape{3, 3}));
  EXPECT_EQ(Ints(m.block_tables), (std::vector<int64_t>{3, 5, 8, 1, 4, 7, 2, 6, 0}));  // padded with block 0
  EXPECT_EQ(Ints(m.seq_lens), (std::vector<int64_t>{10, 9, 5}));
  EXPECT_EQ(Ints(m.query_start_loc), (std::vector<int64_t>{0, 1, 4, 9}));
  EXPECT_EQ(Ints(m.state_slot_ids), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(Ints(batch.logits_indices), (std::vector<int64_t>{0, 3}));  // r1 neither samples nor scores
  EXPECT_EQ(m.num_tokens, 9);
  EXPECT_EQ(m.num_seqs, 3);
  EXPECT_EQ(m.num_decodes, 1);
  EXPECT_EQ(m.max_query_len, 5);
  EXPECT_EQ(m.max_seq_len, 10);
}

TEST(ModelRunnerTest, PromptLogprobsTakeEveryRowOfTheChunk) {
  const MixedStep step = BuildMixedStep(true);
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  runner.Execute(step.prefill);
  const StepLogits logits = runner.ExecuteModel(step.mixed);
  const std::vector<LogitsRows>& rows = logits.rows;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ((std::vector<int64_t>{rows[0].first_row, rows[0].num_rows, rows[0].first_position}),
            (std::vector<int64_t>{0, 1, 9}));
  EXPECT_EQ((std::vector<int64_t>{rows[1].first_row, rows[1].num_rows, rows[1].first_position}),
            (std::vector<int64_t>{1, 1, 8}));
  EXPECT_EQ((std::vector<int64_t>{rows[2].first_row, rows[2].num_rows, rows[2].first_position}),
            (std::vector<int64_t>{2, 5, 0}));
  EXPECT_EQ(Ints(model.last_batch.logits_indices), (std::vector<int64_t>{0, 3, 4, 5, 6, 7, 8}));
  const RunnerOutput out = runner.SampleTokens(logits);
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
  const MixedStep step = BuildMixedStep(false);
  runner.Execute(step.prefill);
  vt::Fill({.dst = state.conv_states, .value = 1.0});
  vt::Fill({.dst = state.ssm_states, .value = 1.0});
  const RunnerOutput out = runner.Execute(step.mixed);
  ASSERT_EQ(out.sampled.size(), 2u);
  EXPECT_EQ(out.sampled.at("r0").token_id, 0);  // row 0
  EXPECT_EQ(out.sampled.at("r2").token_id, 3);  // row 3
  for (int slot = 0; slot < 3; ++slot) {
    const float expected = slot == 1 ? 0.0f : 1.0f;  // r1 is the new sequence, in slot 1
    for (float v : state.conv_states.Select(0, slot).ToFloatVector()) EXPECT_EQ(v, expected) << "slot " << slot;
    for (float v : state.ssm_states.Select(0, slot).ToFloatVector()) EXPECT_EQ(v, expected) << "slot " << slot;
  }
  EXPECT_EQ(Ints(model.last_batch.attn.positions), (std::vector<int64_t>{9, 6, 7, 8, 0, 1, 2, 3, 4}));
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
    SamplingParams r2_params = Greedy();
    if (penalty) r2_params.repetition_penalty = 1.5;
    const MixedStep step = BuildMixedStep(false, r2_params);
    runner.Execute(step.prefill);
    vt::reach::Reset();
    const RunnerOutput out = runner.Execute(step.mixed);
    EXPECT_EQ(vt::reach::Count("ModelRunner::ArgmaxOnDevice"), penalty ? 0u : 1u);
    EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), penalty ? 1u : 0u);
    ASSERT_EQ(out.sampled.size(), 2u);
    EXPECT_EQ(out.sampled.at("r0").token_id, 0);
    EXPECT_EQ(out.sampled.at("r2").token_id, 3);
  }
}

TEST(ModelRunnerTest, RequestBeyondItsBlocksIsRefused) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  MixedStep step = BuildMixedStep(false);
  step.mixed.scheduled_cached_reqs[1].new_block_ids.clear();  // 9 tokens need 3 blocks of 4
  runner.UpdateStates(step.prefill);
  EXPECT_THROW(runner.PrepareBatch(runner.UpdateStates(step.mixed)), std::logic_error);
}

// The runner's own copy of each request: tokens and blocks appended from the
// deltas, num_computed_tokens as sent, and the state freed when the request is
// named finished, even in an output that schedules nothing.
TEST(ModelRunnerTest, KeepsItsOwnRequestStateAndFreesFinishedRequests) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  const MixedStep step = BuildMixedStep(false);
  runner.Execute(step.prefill);
  runner.Execute(step.mixed);
  ASSERT_EQ(runner.num_request_states(), 3);
  const CachedRequestState* r0 = runner.request_state("r0");
  ASSERT_NE(r0, nullptr);
  std::vector<int32_t> r0_tokens(9, 1);
  r0_tokens.push_back(7);
  EXPECT_EQ(r0->request.all_token_ids(), r0_tokens);
  EXPECT_EQ(r0->request.output_token_ids(), (std::vector<int32_t>{7}));
  EXPECT_EQ(r0->block_ids, (std::vector<int32_t>{3, 5, 8}));
  EXPECT_EQ(r0->num_computed_tokens, 9);
  EXPECT_EQ(runner.request_state("r2")->block_ids, (std::vector<int32_t>{1, 4, 7}));
  EXPECT_EQ(runner.request_state("r1")->state_slot, 1);

  SchedulerOutput finished;
  finished.finished_req_ids = {"r0", "r2"};
  EXPECT_TRUE(runner.Execute(finished).sampled.empty());
  EXPECT_EQ(runner.request_state("r0"), nullptr);
  EXPECT_EQ(runner.request_state("r2"), nullptr);
  EXPECT_EQ(runner.num_request_states(), 1);
  // A freed id can come back as a new request at once.
  SchedulerOutput again;
  again.finished_req_ids = {"r1"};
  again.scheduled_new_reqs = {NewRequest("r1", {9, 9}, {2}, 1)};
  again.num_scheduled_tokens = {{"r1", 2}};
  runner.Execute(again);
  EXPECT_EQ(runner.request_state("r1")->request.all_token_ids(), (std::vector<int32_t>{9, 9}));
}

// A request resumed after preemption gets its whole new block table and state
// slot, and its recurrent state restarts from zero.
TEST(ModelRunnerTest, AResumedRequestTakesItsNewTableAndSlot) {
  RowEchoModel model;
  ModelRunner runner(model, Caches(model), kBlockSize, 0);
  const MixedStep step = BuildMixedStep(false);
  runner.Execute(step.prefill);  // r0 in slot 2 with blocks {3, 5, 8}; r2 in slot 0
  const LayerGdnState& state = runner.caches().gdn[0];
  vt::Fill({.dst = state.ssm_states, .value = 1.0});
  SchedulerOutput resumed;
  resumed.scheduled_cached_reqs = {{.req_id = "r0",
                                    .resumed_from_preemption = true,
                                    .new_token_ids = {7},
                                    .new_block_ids = {6, 9, 4},
                                    .state_slot = 1,
                                    .num_computed_tokens = 0}};
  resumed.num_scheduled_tokens = {{"r0", 10}};
  runner.Execute(resumed);
  const CachedRequestState* r0 = runner.request_state("r0");
  EXPECT_EQ(r0->block_ids, (std::vector<int32_t>{6, 9, 4}));
  EXPECT_EQ(r0->state_slot, 1);
  EXPECT_EQ(Ints(model.last_batch.attn.slot_mapping), (std::vector<int64_t>{24, 25, 26, 27, 36, 37, 38, 39, 16, 17}));
  EXPECT_EQ(Ints(model.last_batch.attn.state_slot_ids), (std::vector<int64_t>{1}));
  for (float v : state.ssm_states.Select(0, 1).ToFloatVector()) EXPECT_EQ(v, 0.0f);
  for (float v : state.ssm_states.Select(0, 0).ToFloatVector()) EXPECT_EQ(v, 1.0f);
}

TEST(ModelRunnerTest, OutputsThatDoNotFitItsStatesAreRefused) {
  RowEchoModel model;
  const MixedStep step = BuildMixedStep(false);
  auto refused = [&](const std::function<void(SchedulerOutput&)>& change, const std::string& what) {
    ModelRunner runner(model, Caches(model), kBlockSize, 0);
    runner.UpdateStates(step.prefill);
    SchedulerOutput bad = step.mixed;
    change(bad);
    try {
      runner.UpdateStates(bad);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused([](SchedulerOutput& o) { o.scheduled_cached_reqs[0].req_id = "ghost"; }, "'ghost' was never sent");
  refused([](SchedulerOutput& o) { o.scheduled_new_reqs[0].req_id = "r0"; }, "'r0' is already known");
  refused([](SchedulerOutput& o) { o.num_scheduled_tokens["r0"] = 2; }, "scheduled for 2 tokens after 9");
  refused([](SchedulerOutput& o) { o.scheduled_cached_reqs[1].state_slot = 2; }, "without being resumed");
  refused([](SchedulerOutput& o) { o.num_scheduled_tokens["extra"] = 1; }, "names 4 requests");
}

// Driven by the real scheduler through chunked prefill, preemption and finishes,
// the runner's copy of every running request equals the scheduler's (tokens up to
// what is scheduled, block table, slot), and nothing is left once all finished.
TEST(ModelRunnerTest, FollowsTheSchedulerThroughPreemption) {
  RowEchoModel model;
  ModelRunner runner(model, AllocateCaches(model.cache_spec(), 7, kBlockSize, 3, vt::DType::kF32, vt::kCpu),
                     kBlockSize, 0);
  Scheduler sched({.max_num_batched_tokens = 8, .max_num_seqs = 3, .max_model_len = 20},
                  {.block_size = static_cast<int32_t>(kBlockSize), .num_blocks = 7, .num_state_slots = 3});
  for (int i = 0; i < 3; ++i) {
    sched.add_request(std::make_unique<Request>("q" + std::to_string(i), std::vector<int32_t>(5 + i, 1 + i), Greedy(),
                                                std::vector<int32_t>{}, i));
  }
  int steps = 0;
  for (; sched.has_unfinished_requests() && steps < 500; ++steps) {
    const SchedulerOutput output = sched.schedule();
    const RunnerOutput ran = runner.Execute(output);
    for (std::string_view id : output.req_ids_in_batch_order()) {
      const std::string req_id(id);
      const Request& r = *sched.get_request(req_id);
      const CachedRequestState* mine = runner.request_state(req_id);
      ASSERT_NE(mine, nullptr) << req_id;
      EXPECT_EQ(mine->request.all_token_ids(), r.all_token_ids()) << req_id << " at step " << steps;
      EXPECT_EQ(mine->block_ids, sched.kv_cache_manager().get_block_ids(req_id)) << req_id << " at step " << steps;
      EXPECT_EQ(mine->state_slot, sched.kv_cache_manager().get_state_slot(req_id).value_or(-1)) << req_id;
      EXPECT_EQ(mine->num_computed_tokens, r.num_computed_tokens) << req_id;
    }
    std::unordered_map<std::string, int32_t> sampled;
    for (const auto& [id, result] : ran.sampled) sampled[id] = result.token_id;
    sched.update_from_output(output, sampled);
  }
  ASSERT_FALSE(sched.has_unfinished_requests());
  EXPECT_GT(sched.num_preemptions(), 0) << "the scenario must preempt";
  runner.Execute(sched.schedule());  // names the last finished requests
  EXPECT_EQ(runner.num_request_states(), 0);
}
}  // namespace
}  // namespace vllm
