// SchedulerOutput crossing to a tensor-parallel worker (core/scheduler_output_codec.h):
// every field comes back equal, and a truncated message is an error, never a read
// past its end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vllm/core/scheduler_output_codec.h"
#include "vt/error.h"

namespace vllm {
namespace {

SchedulerOutput EveryFieldSet() {
  SchedulerOutput o;
  SamplingParams p;
  p.temperature = 0.7, p.top_p = 0.9, p.top_k = 5, p.min_p = 0.1, p.repetition_penalty = 1.1;
  p.presence_penalty = 0.5, p.frequency_penalty = -0.5, p.seed = 42, p.max_tokens = 33, p.min_tokens = 2;
  p.stop = {"END", ""}, p.stop_token_ids = {7, 8}, p.ignore_eos = true, p.include_stop_str_in_output = true;
  p.skip_special_tokens = false, p.logprobs = 3, p.prompt_logprobs = -1, p.logit_bias = {{4, -2.5f}};
  p.allowed_token_ids = {1, 2, 3}, p.bad_words_token_ids = {{5, 6}, {9}};
  p.output_kind = RequestOutputKind::kDelta;
  p.structured_outputs = StructuredOutputsParams{.choice = std::vector<std::string>{"yes", "no"},
                                                 .prebuilt_key = "tools:1",
                                                 .disable_any_whitespace = true};
  o.scheduled_new_reqs.push_back({.req_id = "a",
                                  .prompt_token_ids = {1, 2, 3},
                                  .sampling_params = p,
                                  .eos_token_ids = {0},
                                  .block_ids = {4, 5},
                                  .state_slot = 2,
                                  .num_computed_tokens = 16});
  o.scheduled_cached_reqs.push_back({.req_id = "b",
                                     .resumed_from_preemption = true,
                                     .new_token_ids = {9},
                                     .new_block_ids = {6},
                                     .state_slot = 1,
                                     .num_computed_tokens = 40});
  o.num_scheduled_tokens = {{"a", 3}, {"b", 1}};
  o.total_num_scheduled_tokens = 4;
  o.preempted_req_ids = {"c"};
  o.finished_req_ids = {"d", "e"};
  o.state_snapshot_loads = {{1, 7}};
  o.state_snapshot_saves = {{2, 8}, {1, 9}};
  o.structured_output_request_ids = {{"a", 0}};
  o.grammar_bitmask = {0xffffffffu, 5u};
  o.grammar_bitmask_words = 2;
  o.scheduled_spec_decode_tokens = {{"b", {11, 12}}};
  return o;
}

TEST(SchedulerOutputCodecTest, EveryFieldComesBackEqual) {
  const SchedulerOutput sent = EveryFieldSet();
  const std::vector<uint8_t> bytes = EncodeSchedulerOutput(sent);
  const SchedulerOutput got = DecodeSchedulerOutput(bytes);
  EXPECT_EQ(EncodeSchedulerOutput(got), bytes);  // maps are written sorted: equal outputs, equal bytes
  ASSERT_EQ(got.scheduled_new_reqs.size(), 1u);
  const SamplingParams& p = got.scheduled_new_reqs[0].sampling_params;
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"END", ""}));
  EXPECT_EQ(p.prompt_logprobs, -1);
  EXPECT_EQ(p.bad_words_token_ids, (std::vector<std::vector<int32_t>>{{5, 6}, {9}}));
  EXPECT_EQ(p.output_kind, RequestOutputKind::kDelta);
  ASSERT_TRUE(p.structured_outputs.has_value());
  EXPECT_EQ(p.structured_outputs->choice, (std::vector<std::string>{"yes", "no"}));
  EXPECT_FALSE(p.structured_outputs->json.has_value());
  EXPECT_TRUE(p.structured_outputs->disable_any_whitespace);
  EXPECT_EQ(got.scheduled_new_reqs[0].block_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(got.scheduled_cached_reqs[0].num_computed_tokens, 40);
  EXPECT_TRUE(got.scheduled_cached_reqs[0].resumed_from_preemption);
  EXPECT_EQ(got.num_scheduled_tokens.at("a"), 3);
  EXPECT_EQ(got.state_snapshot_saves[1].snapshot, 9);
  EXPECT_EQ(got.grammar_bitmask, (std::vector<uint32_t>{0xffffffffu, 5u}));
  EXPECT_EQ(got.scheduled_spec_decode_tokens.at("b"), (std::vector<int32_t>{11, 12}));
}

TEST(SchedulerOutputCodecTest, ABitmaskStillFillingIsAwaitedBeforeItIsSent) {
  SchedulerOutput o;
  o.grammar_bitmask = {0, 0};
  o.grammar_bitmask_words = 2;
  o.await_grammar_bitmask = [&] { o.grammar_bitmask = {3, 4}; };
  EXPECT_EQ(DecodeSchedulerOutput(EncodeSchedulerOutput(o)).grammar_bitmask, (std::vector<uint32_t>{3, 4}));
}

TEST(SchedulerOutputCodecTest, EveryTruncationAndTrailingBytesAreErrors) {
  const std::vector<uint8_t> bytes = EncodeSchedulerOutput(EveryFieldSet());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(DecodeSchedulerOutput(cut), vt::Error) << n << " of " << bytes.size() << " bytes";
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(DecodeSchedulerOutput(longer), vt::Error);
}

}  // namespace
}  // namespace vllm
