// The scheduler with speculative decoding: a decode with drafts computes its last
// known token and the drafts, with lookahead slots for the drafter; the drafts are
// capped by the budget, max_tokens and max_model_len; after the step the computed
// tokens drop by the rejected drafts, tokens append up to the first stop, and the
// counters add up.
#include <gtest/gtest.h>

#include "vllm/core/scheduler.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Request> MakeRequest(const std::string& id, int64_t prompt_len, int64_t max_tokens,
                                     std::vector<int32_t> stop = {}) {
  SamplingParams params;
  params.max_tokens = max_tokens;
  params.stop_token_ids = std::move(stop);
  std::vector<int32_t> prompt(prompt_len, 100);
  return std::make_unique<Request>(id, std::move(prompt), params, std::vector<int32_t>{}, 0);
}

// Prefills "a" (prompt of 6 unless given, one token sampled) and proposes `drafts` for it.
Scheduler PrefilledWithDrafts(const Ids& drafts, int64_t max_tokens = 16, int64_t budget = 64,
                              int64_t max_model_len = 64, std::vector<int32_t> stop = {}, int64_t prompt_len = 6) {
  Scheduler sched({.max_num_batched_tokens = budget, .max_num_seqs = 4, .max_model_len = max_model_len,
                   .num_lookahead_tokens = 3},
                  {.block_size = 4, .num_blocks = 40});
  sched.add_request(MakeRequest("a", prompt_len, max_tokens, std::move(stop)));
  const SchedulerOutput prefill = sched.schedule();
  sched.update_from_output(prefill, {{"a", 7}});
  sched.update_draft_token_ids({{"a", drafts}});
  return sched;
}

TEST(SchedulerSpecDecodeTest, DraftsFollowTheLastTokenWithLookaheadSlots) {
  Scheduler sched = PrefilledWithDrafts({11, 12, 13});
  const SchedulerOutput out = sched.schedule();
  EXPECT_EQ(out.num_scheduled_tokens.at("a"), 4);  // token 7 and three drafts
  EXPECT_EQ(out.scheduled_spec_decode_tokens.at("a"), (Ids{11, 12, 13}));
  ASSERT_EQ(out.scheduled_cached_reqs.size(), 1u);
  EXPECT_EQ(out.scheduled_cached_reqs[0].new_token_ids, (Ids{7}));  // drafts are not history
  // Positions 6..9 computed and 3 lookahead slots: 13 tokens, 4 blocks.
  EXPECT_EQ(sched.kv_cache_manager().get_block_ids("a").size(), 4u);
}

TEST(SchedulerSpecDecodeTest, RejectedDraftsAreNotComputedAndTheCountersAddUp) {
  Scheduler sched = PrefilledWithDrafts({11, 12, 13});
  const SchedulerOutput out = sched.schedule();
  // Draft 11 accepted, 12 rejected: the step produced 11 and the target's 20.
  const std::vector<RequestUpdate> updates = sched.update_from_sampled_tokens(out, {{"a", {11, 20}}});
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].new_token_ids, (Ids{11, 20}));
  const Request* a = sched.get_request("a");
  EXPECT_EQ(a->output_token_ids(), (Ids{7, 11, 20}));
  EXPECT_EQ(a->num_computed_tokens, 8);  // prompt, 7 and 11; 20 is next
  EXPECT_TRUE(a->spec_token_ids.empty());
  const SpecDecodingStats& s = sched.spec_decoding_stats();
  EXPECT_EQ(s.num_drafts, 1);
  EXPECT_EQ(s.num_draft_tokens, 3);
  EXPECT_EQ(s.num_accepted_tokens, 1);
  EXPECT_EQ(s.num_accepted_tokens_per_pos, (std::vector<int64_t>{1, 0, 0}));
  // The next step computes 20 alone (no drafts proposed).
  const SchedulerOutput next = sched.schedule();
  EXPECT_EQ(next.num_scheduled_tokens.at("a"), 1);
  EXPECT_TRUE(next.scheduled_spec_decode_tokens.empty());
  EXPECT_EQ(next.scheduled_cached_reqs[0].num_computed_tokens, 8);
}

TEST(SchedulerSpecDecodeTest, MoreTokensThanDraftsPlusOneIsALogicError) {
  Scheduler sched = PrefilledWithDrafts({11});
  const SchedulerOutput out = sched.schedule();
  EXPECT_THROW(sched.update_from_sampled_tokens(out, {{"a", {11, 12, 13}}}), std::logic_error);
}

TEST(SchedulerSpecDecodeTest, ATokenThatStopsEndsTheRequestThereAndDropsTheRest) {
  Scheduler sched = PrefilledWithDrafts({11, 12, 13}, 16, 64, 64, {12});
  const SchedulerOutput out = sched.schedule();
  const std::vector<RequestUpdate> updates = sched.update_from_sampled_tokens(out, {{"a", {11, 12, 13, 14}}});
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].new_token_ids, (Ids{11, 12}));
  EXPECT_EQ(updates[0].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(sched.get_request("a"), nullptr);
  EXPECT_EQ(sched.kv_cache_manager().get_usage(), 0.0);
}

TEST(SchedulerSpecDecodeTest, DraftsAreCappedByTheBudgetMaxTokensAndMaxModelLen) {
  {
    Scheduler sched = PrefilledWithDrafts({11, 12, 13}, 16, /*budget=*/3, 64, {}, /*prompt_len=*/2);
    EXPECT_EQ(sched.schedule().scheduled_spec_decode_tokens.at("a"), (Ids{11, 12}));
  }
  {
    // One output token so far, max_tokens 3: one draft, then the token after it.
    Scheduler sched = PrefilledWithDrafts({11, 12, 13}, /*max_tokens=*/3);
    EXPECT_EQ(sched.schedule().scheduled_spec_decode_tokens.at("a"), (Ids{11}));
  }
  {
    // 7 tokens known, max_model_len 9: one more draft and the token after it fit.
    Scheduler sched = PrefilledWithDrafts({11, 12, 13}, 16, 64, /*max_model_len=*/9);
    const SchedulerOutput out = sched.schedule();
    EXPECT_EQ(out.scheduled_spec_decode_tokens.at("a"), (Ids{11}));
    EXPECT_LE(static_cast<int64_t>(sched.kv_cache_manager().get_block_ids("a").size()) * 4, 12);
  }
  {
    Scheduler sched = PrefilledWithDrafts({11, 12, 13}, /*max_tokens=*/2);
    const SchedulerOutput out = sched.schedule();
    EXPECT_TRUE(out.scheduled_spec_decode_tokens.empty());
    EXPECT_EQ(out.num_scheduled_tokens.at("a"), 1);
  }
}

TEST(SchedulerSpecDecodeTest, PreemptionDropsTheDrafts) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 4, .max_model_len = 64, .num_lookahead_tokens = 2},
                  {.block_size = 4, .num_blocks = 7});
  sched.add_request(MakeRequest("a", 8, 16));
  sched.add_request(MakeRequest("b", 8, 16));
  const SchedulerOutput prefill = sched.schedule();
  sched.update_from_output(prefill, {{"a", 7}, {"b", 7}});
  sched.update_draft_token_ids({{"a", {11, 12}}, {"b", {11, 12}}});
  const SchedulerOutput out = sched.schedule();  // 6 usable blocks, all taken: b is preempted
  ASSERT_EQ(out.preempted_req_ids.size(), 1u);
  EXPECT_TRUE(sched.get_request(out.preempted_req_ids[0])->spec_token_ids.empty());
  EXPECT_EQ(out.scheduled_spec_decode_tokens.count(out.preempted_req_ids[0]), 0u);
}

}  // namespace
}  // namespace vllm
