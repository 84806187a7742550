// Scheduler: token budget, chunked prefill, decode-first order, preemption of the
// newest request by recompute, stop rules, aborts, and no leaked pages.
#include <gtest/gtest.h>

#include "vllm/core/scheduler.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Request> MakeRequest(const std::string& id, int64_t prompt_len, int64_t arrival,
                                     int64_t max_tokens = 8, std::vector<int32_t> eos = {}) {
  SamplingParams params;
  params.max_tokens = max_tokens;
  std::vector<int32_t> prompt(prompt_len);
  for (int64_t i = 0; i < prompt_len; ++i) prompt[i] = static_cast<int32_t>(100 + i);
  return std::make_unique<Request>(id, std::move(prompt), params, std::move(eos), arrival);
}

// Samples token 7 for every request that samples this step.
std::unordered_map<std::string, int32_t> SampleAll(const SchedulerOutput& out, int32_t token = 7) {
  std::unordered_map<std::string, int32_t> sampled;
  for (const ScheduledRequest& s : out.scheduled) {
    if (s.samples) sampled[s.req_id] = token;
  }
  return sampled;
}

TEST(SchedulerTest, ChunkedPrefillUnderTheTokenBudgetThenDecodesFirst) {
  Scheduler sched({.max_num_batched_tokens = 10, .max_num_seqs = 8, .max_model_len = 64},
                  {.block_size = 4, .num_blocks = 10});
  sched.add_request(MakeRequest("a", 6, 0));
  sched.add_request(MakeRequest("b", 9, 1));

  SchedulerOutput s1 = sched.schedule();
  ASSERT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(s1.total_num_scheduled_tokens, 10);
  EXPECT_EQ(s1.scheduled[0].req_id, "a");
  EXPECT_EQ(s1.scheduled[0].token_ids.size(), 6u);
  EXPECT_EQ(s1.scheduled[0].block_ids, (Ids{1, 2}));
  EXPECT_TRUE(s1.scheduled[0].samples);
  EXPECT_TRUE(s1.scheduled[0].is_new_sequence);
  EXPECT_EQ(s1.scheduled[1].req_id, "b");
  EXPECT_EQ(s1.scheduled[1].token_ids, (Ids{100, 101, 102, 103}));
  EXPECT_EQ(s1.scheduled[1].block_ids, (Ids{3}));
  EXPECT_FALSE(s1.scheduled[1].samples);
  sched.update_from_output(s1, SampleAll(s1));

  SchedulerOutput s2 = sched.schedule();
  ASSERT_EQ(s2.scheduled.size(), 2u);
  EXPECT_EQ(s2.num_decodes, 1);
  EXPECT_EQ(s2.scheduled[0].req_id, "a");  // the decode comes first
  EXPECT_EQ(s2.scheduled[0].token_ids, (Ids{7}));
  EXPECT_EQ(s2.scheduled[0].num_computed_tokens, 6);
  EXPECT_EQ(s2.scheduled[1].req_id, "b");  // then the rest of b's prompt
  EXPECT_EQ(s2.scheduled[1].num_computed_tokens, 4);
  EXPECT_EQ(s2.scheduled[1].token_ids.size(), 5u);
  EXPECT_EQ(s2.scheduled[1].block_ids, (Ids{3, 4, 5}));
  EXPECT_FALSE(s2.scheduled[1].is_new_sequence);
  EXPECT_TRUE(s2.scheduled[1].samples);
}

TEST(SchedulerTest, PreemptsTheNewestRequestWhenPagesRunOutAndRecomputesIt) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 64},
                  {.block_size = 2, .num_blocks = 5});
  sched.add_request(MakeRequest("a", 3, 0, /*max_tokens=*/3));
  sched.add_request(MakeRequest("b", 3, 1, /*max_tokens=*/3));
  SchedulerOutput s1 = sched.schedule();
  ASSERT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(s1.scheduled[0].block_ids, (Ids{1, 2}));
  EXPECT_EQ(s1.scheduled[1].block_ids, (Ids{3, 4}));
  sched.update_from_output(s1, SampleAll(s1));
  SchedulerOutput s2 = sched.schedule();  // both decode at position 3: no new pages
  EXPECT_EQ(s2.scheduled.size(), 2u);
  sched.update_from_output(s2, SampleAll(s2));

  // Position 4 needs a third page each; only b's pages can make room: b is newer.
  SchedulerOutput s3 = sched.schedule();
  ASSERT_EQ(s3.scheduled.size(), 1u);
  EXPECT_EQ(s3.scheduled[0].req_id, "a");
  EXPECT_EQ(s3.scheduled[0].block_ids, (Ids{1, 2, 4}));  // b freed tail first: 4 before 3
  EXPECT_EQ(s3.preempted_req_ids, (std::vector<std::string>{"b"}));
  EXPECT_EQ(sched.num_preemptions(), 1);
  EXPECT_EQ(sched.get_request("b")->status, RequestStatus::kPreempted);
  EXPECT_EQ(sched.get_request("b")->num_computed_tokens, 0);
  auto u3 = sched.update_from_output(s3, SampleAll(s3));
  ASSERT_EQ(u3.size(), 1u);
  EXPECT_EQ(u3[0].status, RequestStatus::kFinishedLength);  // a generated its 3 tokens

  // b is recomputed from its prompt and the 2 tokens it had generated.
  SchedulerOutput s4 = sched.schedule();
  ASSERT_EQ(s4.scheduled.size(), 1u);
  EXPECT_EQ(s4.scheduled[0].req_id, "b");
  EXPECT_TRUE(s4.scheduled[0].is_new_sequence);
  EXPECT_EQ(s4.scheduled[0].token_ids, (Ids{100, 101, 102, 7, 7}));
  EXPECT_EQ(s4.scheduled[0].block_ids, (Ids{3, 4, 2}));
  auto u4 = sched.update_from_output(s4, SampleAll(s4));
  EXPECT_EQ(u4[0].status, RequestStatus::kFinishedLength);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(sched.kv_cache_manager().get_num_free_blocks(), 4);
}

TEST(SchedulerTest, StopRulesEosStopTokensAndLengthCap) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 6},
                  {.block_size = 4, .num_blocks = 16});
  sched.add_request(MakeRequest("eos", 2, 0, 8, /*eos=*/{7}));
  sched.add_request(MakeRequest("cap", 4, 1, 8));
  SchedulerOutput s1 = sched.schedule();
  auto u1 = sched.update_from_output(s1, SampleAll(s1, 7));
  ASSERT_EQ(u1.size(), 2u);
  EXPECT_EQ(u1[0].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(u1[1].status, RequestStatus::kRunning);
  SchedulerOutput s2 = sched.schedule();
  auto u2 = sched.update_from_output(s2, SampleAll(s2, 9));
  EXPECT_EQ(u2[0].status, RequestStatus::kFinishedLength);  // 4 + 2 tokens = max_model_len
  EXPECT_STREQ(FinishReason(u2[0].status), "length");
}

TEST(SchedulerTest, AbortFreesEverythingAndBadRequestsAreRejected) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 32},
                  {.block_size = 4, .num_blocks = 6, .num_state_slots = 2});
  sched.add_request(MakeRequest("a", 5, 0, 4));
  SchedulerOutput s1 = sched.schedule();
  EXPECT_EQ(s1.scheduled[0].state_slot, 0);
  sched.finish_requests({"a", "unknown"}, RequestStatus::kFinishedAborted);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(sched.kv_cache_manager().get_num_free_blocks(), 5);
  EXPECT_THROW(sched.add_request(MakeRequest("long", 32, 1)), std::invalid_argument);
  EXPECT_THROW(sched.add_request(MakeRequest("huge", 10, 2, 20)), std::invalid_argument);  // 30 tokens > 5 blocks
  sched.add_request(MakeRequest("dup", 2, 3));
  EXPECT_THROW(sched.add_request(MakeRequest("dup", 2, 4)), std::invalid_argument);
}

TEST(SchedulerTest, MaxNumSeqsAndStateSlotsLimitAdmission) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 2, .max_model_len = 32},
                  {.block_size = 4, .num_blocks = 32, .num_state_slots = 8});
  for (int i = 0; i < 3; ++i) sched.add_request(MakeRequest("r" + std::to_string(i), 3, i));
  SchedulerOutput s1 = sched.schedule();
  EXPECT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(sched.num_waiting(), 1);
}

}  // namespace
}  // namespace vllm
