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

// Samples `token` for every scheduled request (those that do not sample ignore it).
std::unordered_map<std::string, int32_t> SampleAll(const SchedulerOutput& out, int32_t token = 7) {
  std::unordered_map<std::string, int32_t> sampled;
  for (const auto& [id, n] : out.num_scheduled_tokens) sampled[id] = token;
  return sampled;
}

std::vector<std::string> BatchOrder(const SchedulerOutput& out) {
  std::vector<std::string> ids;
  for (std::string_view id : out.req_ids_in_batch_order()) ids.emplace_back(id);
  return ids;
}

// A new request goes across whole once; afterwards only what changed: the sampled
// token, the blocks added, num_computed_tokens.
TEST(SchedulerTest, ChunkedPrefillUnderTheTokenBudgetThenDecodesFirst) {
  Scheduler sched({.max_num_batched_tokens = 10, .max_num_seqs = 8, .max_model_len = 64},
                  {.block_size = 4, .num_blocks = 10});
  sched.add_request(MakeRequest("a", 6, 0));
  sched.add_request(MakeRequest("b", 9, 1));

  SchedulerOutput s1 = sched.schedule();
  ASSERT_EQ(s1.scheduled_new_reqs.size(), 2u);
  EXPECT_TRUE(s1.scheduled_cached_reqs.empty());
  EXPECT_EQ(s1.total_num_scheduled_tokens, 10);
  const NewRequestData& a1 = s1.scheduled_new_reqs[0];
  EXPECT_EQ(a1.req_id, "a");
  EXPECT_EQ(a1.prompt_token_ids, (Ids{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(a1.block_ids, (Ids{1, 2}));
  EXPECT_EQ(a1.num_computed_tokens, 0);
  EXPECT_EQ(a1.state_slot, -1);
  EXPECT_EQ(a1.sampling_params.max_tokens, 8);
  EXPECT_EQ(s1.num_scheduled_tokens.at("a"), 6);
  const NewRequestData& b1 = s1.scheduled_new_reqs[1];
  EXPECT_EQ(b1.req_id, "b");
  EXPECT_EQ(b1.prompt_token_ids.size(), 9u);  // the whole prompt, though 4 tokens are computed
  EXPECT_EQ(b1.block_ids, (Ids{3}));
  EXPECT_EQ(s1.num_scheduled_tokens.at("b"), 4);
  sched.update_from_output(s1, SampleAll(s1));

  SchedulerOutput s2 = sched.schedule();
  EXPECT_TRUE(s2.scheduled_new_reqs.empty());
  ASSERT_EQ(s2.scheduled_cached_reqs.size(), 2u);
  EXPECT_EQ(BatchOrder(s2), (std::vector<std::string>{"a", "b"}));  // the decode comes first
  const CachedRequestData& a2 = s2.scheduled_cached_reqs[0];
  EXPECT_EQ(a2.new_token_ids, (Ids{7}));
  EXPECT_TRUE(a2.new_block_ids.empty());  // position 6 is still in block 2
  EXPECT_EQ(a2.num_computed_tokens, 6);
  EXPECT_FALSE(a2.resumed_from_preemption);
  EXPECT_EQ(s2.num_scheduled_tokens.at("a"), 1);
  const CachedRequestData& b2 = s2.scheduled_cached_reqs[1];  // then the rest of b's prompt
  EXPECT_TRUE(b2.new_token_ids.empty());
  EXPECT_EQ(b2.new_block_ids, (Ids{4, 5}));
  EXPECT_EQ(b2.num_computed_tokens, 4);
  EXPECT_EQ(s2.num_scheduled_tokens.at("b"), 5);
  EXPECT_TRUE(s2.finished_req_ids.empty());
}

TEST(SchedulerTest, PreemptsTheNewestRequestWhenPagesRunOutAndRecomputesIt) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 64},
                  {.block_size = 2, .num_blocks = 5});
  sched.add_request(MakeRequest("a", 3, 0, /*max_tokens=*/3));
  sched.add_request(MakeRequest("b", 3, 1, /*max_tokens=*/3));
  SchedulerOutput s1 = sched.schedule();
  ASSERT_EQ(s1.scheduled_new_reqs.size(), 2u);
  EXPECT_EQ(s1.scheduled_new_reqs[0].block_ids, (Ids{1, 2}));
  EXPECT_EQ(s1.scheduled_new_reqs[1].block_ids, (Ids{3, 4}));
  sched.update_from_output(s1, SampleAll(s1));
  SchedulerOutput s2 = sched.schedule();  // both decode at position 3: no new pages
  ASSERT_EQ(s2.scheduled_cached_reqs.size(), 2u);
  EXPECT_TRUE(s2.scheduled_cached_reqs[0].new_block_ids.empty());
  EXPECT_TRUE(s2.scheduled_cached_reqs[1].new_block_ids.empty());
  sched.update_from_output(s2, SampleAll(s2));

  // Position 4 needs a third page each; only b's pages can make room: b is newer.
  SchedulerOutput s3 = sched.schedule();
  EXPECT_EQ(BatchOrder(s3), (std::vector<std::string>{"a"}));
  EXPECT_EQ(s3.scheduled_cached_reqs[0].new_block_ids, (Ids{4}));  // b freed tail first: 4 before 3
  EXPECT_EQ(s3.preempted_req_ids, (std::vector<std::string>{"b"}));
  EXPECT_EQ(sched.num_preemptions(), 1);
  EXPECT_EQ(sched.get_request("b")->status, RequestStatus::kPreempted);
  EXPECT_EQ(sched.get_request("b")->num_computed_tokens, 0);
  auto u3 = sched.update_from_output(s3, SampleAll(s3));
  ASSERT_EQ(u3.size(), 1u);
  EXPECT_EQ(u3[0].status, RequestStatus::kFinishedLength);  // a generated its 3 tokens

  // b is recomputed from its prompt and the 2 tokens it had generated; the worker
  // has all but the last one, and gets its whole new block table.
  SchedulerOutput s4 = sched.schedule();
  EXPECT_EQ(s4.finished_req_ids, (std::vector<std::string>{"a"}));
  EXPECT_TRUE(s4.scheduled_new_reqs.empty());
  ASSERT_EQ(s4.scheduled_cached_reqs.size(), 1u);
  const CachedRequestData& b4 = s4.scheduled_cached_reqs[0];
  EXPECT_EQ(b4.req_id, "b");
  EXPECT_TRUE(b4.resumed_from_preemption);
  EXPECT_EQ(b4.new_token_ids, (Ids{7}));
  EXPECT_EQ(b4.new_block_ids, (Ids{3, 4, 2}));
  EXPECT_EQ(b4.num_computed_tokens, 0);
  EXPECT_EQ(s4.num_scheduled_tokens.at("b"), 5);
  auto u4 = sched.update_from_output(s4, SampleAll(s4));
  EXPECT_EQ(u4[0].status, RequestStatus::kFinishedLength);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(sched.kv_cache_manager().get_num_free_blocks(), 4);
  SchedulerOutput s5 = sched.schedule();
  EXPECT_TRUE(s5.empty());
  EXPECT_EQ(s5.finished_req_ids, (std::vector<std::string>{"b"}));
  EXPECT_TRUE(sched.schedule().finished_req_ids.empty()) << "each finished id is sent once";
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
  EXPECT_EQ(s1.scheduled_new_reqs[0].state_slot, 0);
  sched.add_request(MakeRequest("never_scheduled", 2, 1));
  sched.finish_requests({"a", "unknown", "never_scheduled"}, RequestStatus::kFinishedAborted);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(sched.kv_cache_manager().get_num_free_blocks(), 5);
  // Only a request the worker was sent is named for it to free.
  EXPECT_EQ(sched.schedule().finished_req_ids, (std::vector<std::string>{"a"}));
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
  EXPECT_EQ(s1.scheduled_new_reqs.size(), 2u);
  EXPECT_EQ(sched.num_waiting(), 1);
}

// A prefix-cache hit is part of the new request's block table and of its
// num_computed_tokens: the worker computes only the rest.
TEST(SchedulerTest, ANewRequestWithPrefixHitsStartsAfterThem) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 64},
                  {.block_size = 4, .num_blocks = 16, .enable_prefix_caching = true});
  sched.add_request(MakeRequest("first", 10, 0, 1));
  SchedulerOutput s1 = sched.schedule();
  EXPECT_EQ(s1.scheduled_new_reqs[0].block_ids, (Ids{1, 2, 3}));
  sched.update_from_output(s1, SampleAll(s1));  // finishes: max_tokens 1
  sched.add_request(MakeRequest("second", 9, 1, 1));  // the same first 9 tokens
  SchedulerOutput s2 = sched.schedule();
  EXPECT_EQ(s2.finished_req_ids, (std::vector<std::string>{"first"}));
  ASSERT_EQ(s2.scheduled_new_reqs.size(), 1u);
  const NewRequestData& second = s2.scheduled_new_reqs[0];
  EXPECT_EQ(second.num_computed_tokens, 8);
  EXPECT_EQ(second.block_ids, (Ids{1, 2, 4}));  // two cached full blocks, then a fresh one
  EXPECT_EQ(s2.num_scheduled_tokens.at("second"), 1);
}

}  // namespace
}  // namespace vllm
