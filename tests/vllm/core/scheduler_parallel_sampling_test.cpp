// Parallel samples of one prompt (n > 1, best_of): engine requests with identical
// prompt ids added at once. For a hybrid model with prefix caching the siblings of
// a request still computing the prompt wait until it has passed the prompt's last
// block boundary, whose state snapshot they then load (a snapshot is found only from
// the step after it is taken); other requests are admitted meanwhile. Without state
// snapshots nothing waits (attention blocks are shared within the step).
#include <gtest/gtest.h>

#include "vllm/core/scheduler.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

std::vector<int32_t> Range(int32_t n, int32_t first = 1) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

std::unique_ptr<Request> MakeRequest(const std::string& id, std::vector<int32_t> prompt, int64_t arrival) {
  SamplingParams params;
  params.max_tokens = 4;
  return std::make_unique<Request>(id, std::move(prompt), params, std::vector<int32_t>{}, arrival);
}

std::unordered_map<std::string, int32_t> SampleAll(const SchedulerOutput& out) {
  std::unordered_map<std::string, int32_t> sampled;
  for (const auto& [id, n] : out.num_scheduled_tokens) sampled[id] = 7;
  return sampled;
}

std::vector<std::string> BatchOrder(const SchedulerOutput& out) {
  std::vector<std::string> ids;
  for (std::string_view id : out.req_ids_in_batch_order()) ids.emplace_back(id);
  return ids;
}

// Hybrid model (state slots), 16-token pages, prefix caching with state snapshots.
KVCacheConfig HybridConfig() {
  return {.block_size = 16,
          .num_blocks = 64,
          .num_state_slots = 8,
          .enable_prefix_caching = true,
          .num_state_snapshots = 8,
          .state_checkpoint_interval = 512};
}

const SchedulerConfig kSchedulerConfig = {.max_num_batched_tokens = 256, .max_num_seqs = 8, .max_model_len = 256};

// Adds a, b and c with the same prompt of `prompt_len` tokens, then d with another.
void AddSiblingsThenAnother(Scheduler& sched, int32_t prompt_len) {
  sched.add_request(MakeRequest("a", Range(prompt_len), 0));
  sched.add_request(MakeRequest("b", Range(prompt_len), 1));
  sched.add_request(MakeRequest("c", Range(prompt_len), 2));
  sched.add_request(MakeRequest("d", Range(20, 1000), 3));
}

TEST(ParallelSamplingSchedulerTest, HybridSiblingsWaitForTheFirstsLastBoundaryThenLoadItsSnapshot) {
  Scheduler sched(kSchedulerConfig, HybridConfig());
  AddSiblingsThenAnother(sched, 100);

  // a computes up to the checkpoint 96 (the last block boundary before its 100th
  // token); b and c wait for it without holding up d, admitted behind them.
  SchedulerOutput s1 = sched.schedule();
  EXPECT_EQ(BatchOrder(s1), (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(s1.num_scheduled_tokens.at("a"), 96);
  EXPECT_EQ(s1.scheduled_new_reqs[0].block_ids, (Ids{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s1.num_scheduled_tokens.at("d"), 16);
  EXPECT_EQ(s1.scheduled_new_reqs[1].block_ids, (Ids{7}));
  ASSERT_EQ(s1.state_snapshot_saves.size(), 2u);
  EXPECT_EQ(s1.state_snapshot_saves[0].state_slot, 0);  // a's, at 96
  const int32_t snapshot_at_96 = s1.state_snapshot_saves[0].snapshot;
  EXPECT_EQ(sched.num_waiting(), 2);
  EXPECT_EQ(sched.get_request("b")->status, RequestStatus::kWaiting);
  sched.update_from_output(s1, SampleAll(s1));

  // The snapshot at 96 is found now: b and c share a's six blocks, load the
  // snapshot into their slots and compute the last 4 tokens.
  SchedulerOutput s2 = sched.schedule();
  EXPECT_EQ(BatchOrder(s2), (std::vector<std::string>{"a", "d", "b", "c"}));
  EXPECT_EQ(s2.num_scheduled_tokens.at("a"), 4);
  EXPECT_EQ(s2.num_scheduled_tokens.at("d"), 4);
  ASSERT_EQ(s2.scheduled_new_reqs.size(), 2u);
  const NewRequestData& b = s2.scheduled_new_reqs[0];
  const NewRequestData& c = s2.scheduled_new_reqs[1];
  EXPECT_EQ(b.num_computed_tokens, 96);
  EXPECT_EQ(c.num_computed_tokens, 96);
  EXPECT_EQ(b.block_ids, (Ids{1, 2, 3, 4, 5, 6, 10}));  // a took 8 and d 9 this step
  EXPECT_EQ(c.block_ids, (Ids{1, 2, 3, 4, 5, 6, 11}));
  EXPECT_EQ(s2.num_scheduled_tokens.at("b"), 4);
  EXPECT_EQ(s2.num_scheduled_tokens.at("c"), 4);
  ASSERT_EQ(s2.state_snapshot_loads.size(), 2u);
  EXPECT_EQ(s2.state_snapshot_loads[0].state_slot, b.state_slot);
  EXPECT_EQ(s2.state_snapshot_loads[0].snapshot, snapshot_at_96);
  EXPECT_EQ(s2.state_snapshot_loads[1].state_slot, c.state_slot);
  EXPECT_EQ(s2.state_snapshot_loads[1].snapshot, snapshot_at_96);
  EXPECT_EQ(sched.kv_cache_manager().prefix_cache_hits(), 2 * 96);
  sched.update_from_output(s2, SampleAll(s2));
  EXPECT_EQ(sched.num_waiting(), 0);
}

// With a token budget under the checkpoint the first computes several chunks; the
// siblings wait through all of them and are admitted once it has passed it.
TEST(ParallelSamplingSchedulerTest, HybridSiblingsWaitThroughSeveralChunksOfTheFirst) {
  SchedulerConfig config = kSchedulerConfig;
  config.max_num_batched_tokens = 40;
  Scheduler sched(config, HybridConfig());
  sched.add_request(MakeRequest("a", Range(100), 0));
  sched.add_request(MakeRequest("b", Range(100), 1));
  std::vector<int64_t> chunks_of_a;
  for (int step = 0; step < 3; ++step) {
    SchedulerOutput out = sched.schedule();
    EXPECT_EQ(BatchOrder(out), (std::vector<std::string>{"a"}));
    chunks_of_a.push_back(out.num_scheduled_tokens.at("a"));
    sched.update_from_output(out, SampleAll(out));
  }
  EXPECT_EQ(chunks_of_a, (std::vector<int64_t>{40, 40, 16}));  // the last chunk ends at the checkpoint
  SchedulerOutput s4 = sched.schedule();
  ASSERT_EQ(s4.scheduled_new_reqs.size(), 1u);
  EXPECT_EQ(s4.scheduled_new_reqs[0].num_computed_tokens, 96);
  EXPECT_EQ(s4.num_scheduled_tokens.at("b"), 4);
  EXPECT_EQ(s4.state_snapshot_loads.size(), 1u);
}

// Without state snapshots nothing waits: an attention-only model shares the blocks
// cached when the first was scheduled, within the step; a hybrid model without
// snapshots (or without prefix caching) has no hit to wait for.
TEST(ParallelSamplingSchedulerTest, WithoutStateSnapshotsSiblingsAreAdmittedTogether) {
  struct Case {
    const char* name;
    KVCacheConfig kv;
    int64_t sibling_hit;
  };
  KVCacheConfig attention_only = HybridConfig();
  attention_only.num_state_slots = 0;
  KVCacheConfig no_snapshots = HybridConfig();
  no_snapshots.num_state_snapshots = 0;
  KVCacheConfig no_prefix_caching = HybridConfig();
  no_prefix_caching.enable_prefix_caching = false;
  for (const Case& k : {Case{"attention only", attention_only, 96}, Case{"no snapshots", no_snapshots, 0},
                        Case{"no prefix caching", no_prefix_caching, 0}}) {
    SCOPED_TRACE(k.name);
    SchedulerConfig config = kSchedulerConfig;
    config.max_num_batched_tokens = 512;  // without checkpoints each computes its whole prompt
    Scheduler sched(config, k.kv);
    AddSiblingsThenAnother(sched, 100);
    SchedulerOutput s1 = sched.schedule();
    EXPECT_EQ(BatchOrder(s1), (std::vector<std::string>{"a", "b", "c", "d"}));
    ASSERT_EQ(s1.scheduled_new_reqs.size(), 4u);
    EXPECT_EQ(s1.scheduled_new_reqs[1].num_computed_tokens, k.sibling_hit);
    EXPECT_EQ(s1.scheduled_new_reqs[2].num_computed_tokens, k.sibling_hit);
    EXPECT_TRUE(s1.state_snapshot_loads.empty());
  }
}

// A prompt of at most one block has no boundary before its last token to wait for;
// one token more has one.
TEST(ParallelSamplingSchedulerTest, APromptOfOneBlockIsNeverDeferred) {
  Scheduler one_block(kSchedulerConfig, HybridConfig());
  AddSiblingsThenAnother(one_block, 16);
  EXPECT_EQ(BatchOrder(one_block.schedule()), (std::vector<std::string>{"a", "b", "c", "d"}));

  Scheduler past_one_block(kSchedulerConfig, HybridConfig());
  AddSiblingsThenAnother(past_one_block, 17);
  EXPECT_EQ(BatchOrder(past_one_block.schedule()), (std::vector<std::string>{"a", "d"}));
}

// A sibling added once the first has passed the checkpoint hits at once.
TEST(ParallelSamplingSchedulerTest, ASiblingPastTheCheckpointDefersNobody) {
  Scheduler sched(kSchedulerConfig, HybridConfig());
  sched.add_request(MakeRequest("a", Range(100), 0));
  SchedulerOutput s1 = sched.schedule();
  sched.update_from_output(s1, SampleAll(s1));
  SchedulerOutput s2 = sched.schedule();  // a's last 4 prompt tokens
  sched.update_from_output(s2, SampleAll(s2));
  // a is decoding now: past the checkpoint, so a sibling hits at once.
  sched.add_request(MakeRequest("b", Range(100), 1));
  SchedulerOutput s3 = sched.schedule();
  ASSERT_EQ(s3.scheduled_new_reqs.size(), 1u);
  EXPECT_EQ(s3.scheduled_new_reqs[0].num_computed_tokens, 96);
}

}  // namespace
}  // namespace vllm
