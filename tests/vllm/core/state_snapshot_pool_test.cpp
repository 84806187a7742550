// StateSnapshotPool and the hybrid prefix cache in KVCacheManager / Scheduler:
// snapshots keyed by cached blocks, stale when their block is evicted, pending for
// one step, LRU; checkpoint positions, chunk ends, loads and saves (exact ids).
#include <gtest/gtest.h>

#include <tuple>

#include "vllm/core/kv_cache_manager.h"
#include "vllm/core/scheduler.h"
#include "vllm/core/state_snapshot_pool.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Request> MakeRequest(const std::string& id, std::vector<int32_t> prompt, int64_t max_tokens = 8,
                                     int64_t arrival = 0) {
  SamplingParams params;
  params.max_tokens = max_tokens;
  return std::make_unique<Request>(id, std::move(prompt), params, std::vector<int32_t>{}, arrival);
}

std::vector<int32_t> Range(int32_t n, int32_t first = 1) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

TEST(StateSnapshotPoolTest, ASnapshotIsFoundThroughItsCachedBlockUntilTheBlockIsEvicted) {
  BlockPool blocks(4, true);
  EXPECT_EQ(blocks.get_new_blocks(2), (Ids{1, 2}));
  blocks.cache_full_block(1, 11, Ids{1, 2}, std::nullopt);
  StateSnapshotPool pool(2);
  EXPECT_FALSE(pool.allocate(blocks, 2).has_value()) << "block 2 is not cached";
  EXPECT_EQ(pool.allocate(blocks, 1), 0);
  EXPECT_FALSE(pool.allocate(blocks, 1).has_value()) << "block 1 already has one";
  EXPECT_FALSE(pool.find(blocks, 1).has_value()) << "pending until the step ran";
  pool.commit_pending();
  EXPECT_EQ(pool.find(blocks, 1), 0);
  EXPECT_EQ(pool.num_used(blocks), 1);
  blocks.free_blocks({2, 1});                    // queue: 3, 2, 1
  EXPECT_EQ(blocks.get_new_blocks(3), (Ids{3, 2, 1}));  // evicts block 1's hash
  EXPECT_FALSE(pool.find(blocks, 1).has_value());
  EXPECT_EQ(pool.num_used(blocks), 0) << "a snapshot whose block is gone is dropped";
}

TEST(StateSnapshotPoolTest, StaleEntriesGoFirstThenTheLeastRecentlyUsedNeverPendingOnes) {
  BlockPool blocks(6, true);
  EXPECT_EQ(blocks.get_new_blocks(4), (Ids{1, 2, 3, 4}));
  for (int32_t b = 1; b <= 4; ++b) blocks.cache_full_block(b, 100 + b, Ids{b}, std::nullopt);
  StateSnapshotPool pool(2);
  EXPECT_EQ(pool.allocate(blocks, 1), 0);
  EXPECT_EQ(pool.allocate(blocks, 2), 1);
  EXPECT_FALSE(pool.allocate(blocks, 3).has_value()) << "both are pending";
  pool.commit_pending();
  pool.touch(0);                         // block 1's snapshot is now the most recent
  EXPECT_EQ(pool.allocate(blocks, 3), 1);  // evicts block 2's
  EXPECT_FALSE(pool.find(blocks, 2).has_value());
  pool.commit_pending();
  pool.release(blocks, 1);
  EXPECT_EQ(pool.allocate(blocks, 4), 0) << "a released entry is free";
}

// Hybrid model (state slots), pages of 4, a checkpoint every 8 tokens.
KVCacheConfig HybridConfig(int32_t num_snapshots = 8) {
  return {.block_size = 4,
          .num_blocks = 32,
          .num_state_slots = 2,
          .enable_prefix_caching = true,
          .num_state_snapshots = num_snapshots,
          .state_checkpoint_interval = 8};
}

TEST(HybridKVCacheManagerTest, CheckpointsAreIntervalsTheLastBoundaryBeforeTheEndAndDecodeBoundaries) {
  KVCacheManager kv(HybridConfig());
  auto r = MakeRequest("r", Range(19));
  EXPECT_EQ(kv.next_state_checkpoint(*r, 0), 8);
  EXPECT_EQ(kv.next_state_checkpoint(*r, 8), 16);
  EXPECT_EQ(kv.next_state_checkpoint(*r, 16), std::nullopt) << "the last boundary before token 19 is 16";
  auto s = MakeRequest("s", Range(14));
  EXPECT_EQ(kv.next_state_checkpoint(*s, 8), 12);
  EXPECT_THROW(KVCacheManager({.block_size = 4, .num_blocks = 8, .state_checkpoint_interval = 6}),
               std::invalid_argument);
}

TEST(HybridKVCacheManagerTest, AHitStopsAtTheLastBlockWithASnapshotAndDecodeCheckpointsRoll) {
  KVCacheManager kv(HybridConfig());
  auto a = MakeRequest("a", Range(14));
  ASSERT_TRUE(kv.allocate_slots(*a, 8));
  EXPECT_EQ(kv.take_state_snapshot(*a, 8), 0);
  a->num_computed_tokens = 8;
  ASSERT_TRUE(kv.allocate_slots(*a, 4));
  EXPECT_EQ(kv.take_state_snapshot(*a, 12), 1) << "the last boundary before the prompt's end";
  a->num_computed_tokens = 12;
  ASSERT_TRUE(kv.allocate_slots(*a, 2));
  EXPECT_FALSE(kv.take_state_snapshot(*a, 14).has_value());
  a->num_computed_tokens = 14;
  a->AppendOutputToken(50);
  a->AppendOutputToken(51);  // 16 tokens: the decode computing token 15 ends a block
  kv.commit_state_snapshots();
  a->num_computed_tokens = 15;
  ASSERT_TRUE(kv.allocate_slots(*a, 1));
  EXPECT_EQ(kv.take_state_snapshot(*a, 16), 2) << "16 is an interval checkpoint: it stays";
  for (int32_t t = 52; t < 56; ++t) a->AppendOutputToken(t);  // 20 tokens
  a->num_computed_tokens = 19;
  ASSERT_TRUE(kv.allocate_slots(*a, 1));
  EXPECT_EQ(kv.take_state_snapshot(*a, 20), 3);
  kv.commit_state_snapshots();
  for (int32_t t = 56; t < 60; ++t) a->AppendOutputToken(t);  // 24 tokens
  a->num_computed_tokens = 23;
  ASSERT_TRUE(kv.allocate_slots(*a, 1));
  EXPECT_EQ(kv.take_state_snapshot(*a, 24), 4);
  for (int32_t t = 60; t < 64; ++t) a->AppendOutputToken(t);  // 28 tokens
  a->num_computed_tokens = 27;
  ASSERT_TRUE(kv.allocate_slots(*a, 1));
  EXPECT_EQ(kv.take_state_snapshot(*a, 28), 5);  // and the decode checkpoint at 20 (snapshot 3) is dropped
  kv.commit_state_snapshots();
  kv.free(*a);
  EXPECT_EQ(kv.num_state_snapshots_used(), 5);  // 8, 12, 16, 24, 28

  // The first 13 tokens again: blocks 0-2 are cached, the snapshot at 12 ends them.
  auto b = MakeRequest("b", Range(13));
  const ComputedBlocks hit = kv.get_computed_blocks(*b);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2, 3}));
  EXPECT_EQ(hit.num_tokens, 12);
  EXPECT_EQ(hit.state_snapshot, 1);
  // The first 11 and another: blocks 0-1 are cached, block 1 (8 tokens) has a snapshot.
  std::vector<int32_t> prefix = Range(11);
  prefix.push_back(99);
  prefix.push_back(98);
  auto c = MakeRequest("c", prefix);
  EXPECT_EQ(kv.get_computed_blocks(*c).num_tokens, 8);
}

// The scheduler cuts prompt chunks at checkpoints, sends the snapshot loads of
// admissions on a hit and the saves of chunks ending at checkpoints.
TEST(HybridSchedulerTest, ChunksEndAtCheckpointsAndHitsLoadTheirSnapshot) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 2, .max_model_len = 64}, HybridConfig());
  sched.add_request(MakeRequest("a", Range(13), 1));
  SchedulerOutput s1 = sched.schedule();
  EXPECT_EQ(s1.num_scheduled_tokens.at("a"), 8);
  ASSERT_EQ(s1.state_snapshot_saves.size(), 1u);
  EXPECT_EQ(s1.state_snapshot_saves[0].state_slot, 0);
  EXPECT_EQ(s1.state_snapshot_saves[0].snapshot, 0);
  sched.update_from_output(s1, {});
  SchedulerOutput s2 = sched.schedule();
  EXPECT_EQ(s2.num_scheduled_tokens.at("a"), 4);
  EXPECT_EQ(s2.state_snapshot_saves.size(), 1u);
  sched.update_from_output(s2, {});
  SchedulerOutput s3 = sched.schedule();
  EXPECT_EQ(s3.num_scheduled_tokens.at("a"), 1);
  EXPECT_TRUE(s3.state_snapshot_saves.empty());
  sched.update_from_output(s3, {{"a", 7}});  // finishes: max_tokens 1

  sched.add_request(MakeRequest("b", Range(20), 1, 1));
  SchedulerOutput s4 = sched.schedule();
  ASSERT_EQ(s4.scheduled_new_reqs.size(), 1u);
  EXPECT_EQ(s4.scheduled_new_reqs[0].num_computed_tokens, 12);
  EXPECT_EQ(s4.num_scheduled_tokens.at("b"), 4) << "12 -> the interval checkpoint 16";
  ASSERT_EQ(s4.state_snapshot_loads.size(), 1u);
  EXPECT_EQ(s4.state_snapshot_loads[0].snapshot, 1);
  EXPECT_EQ(s4.state_snapshot_loads[0].state_slot, s4.scheduled_new_reqs[0].state_slot);
  EXPECT_EQ(sched.kv_cache_manager().prefix_cache_hits(), 12);
}

// Runs `request` through the scheduler alone until it finishes, sampling the ids
// first_output_id, first_output_id + 1, ...; returns its prefix-cache hit (tokens)
// and its output.
std::pair<int64_t, std::vector<int32_t>> RunAlone(Scheduler& sched, std::unique_ptr<Request> request,
                                                  int32_t first_output_id) {
  const std::string id = request->req_id;
  const int64_t hits_before = sched.kv_cache_manager().prefix_cache_hits();
  sched.add_request(std::move(request));
  std::vector<int32_t> output;
  while (sched.get_request(id)) {
    const SchedulerOutput out = sched.schedule();
    const int32_t next_output_id = first_output_id + static_cast<int32_t>(output.size());
    for (const RequestUpdate& u : sched.update_from_output(out, {{id, next_output_id}})) {
      output.insert(output.end(), u.new_token_ids.begin(), u.new_token_ids.end());
    }
  }
  return {sched.kv_cache_manager().prefix_cache_hits() - hits_before, output};
}

// A chat as `bench serve --num-turns` sends it: each turn's prompt is the previous
// one, the previous answer as its text tokenizes again (its first `kept` ids, then
// 3 others) and a new message. Every turn must start at least at the previous
// prompt's last full block: its state was checkpointed there (or at the prompt's
// end when that is a block boundary), and the block chain holds it even where an
// earlier turn computed the same blocks again after a shorter hit (those copies
// carry the later turns' blocks, and the lookup must follow them).
TEST(HybridSchedulerTest, EachTurnOfAChatStartsAtLeastAtThePreviousPromptsLastFullBlock) {
  KVCacheConfig config = HybridConfig(32);
  config.num_blocks = 128;
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 2, .max_model_len = 128}, config);
  struct Turn {
    int32_t kept;         // answer ids that tokenize back the same
    int32_t message_len;  // the new message
  };
  // Prompts of 14, 28, 43, 56 and 70 tokens (28 and 56 end on a block boundary).
  const std::vector<Turn> later_turns = {{6, 5}, {0, 12}, {2, 8}, {5, 6}};
  std::vector<int32_t> prompt = Range(14);
  auto [first_hit, answer] = RunAlone(sched, MakeRequest("turn1", prompt, 10), 1000);
  EXPECT_EQ(first_hit, 0);
  std::vector<int64_t> hits;
  for (size_t t = 0; t < later_turns.size(); ++t) {
    const int64_t previous_prompt_len = static_cast<int64_t>(prompt.size());
    const auto base = static_cast<int32_t>(2000 + 100 * t);
    prompt.insert(prompt.end(), answer.begin(), answer.begin() + later_turns[t].kept);
    for (int32_t id : Range(3, base)) prompt.push_back(id);
    for (int32_t id : Range(later_turns[t].message_len, base + 50)) prompt.push_back(id);
    int64_t hit = 0;
    std::tie(hit, answer) = RunAlone(sched, MakeRequest("turn" + std::to_string(t + 2), prompt, 10), base + 1000);
    EXPECT_GE(hit, previous_prompt_len / 4 * 4) << "turn " << t + 2 << " of a " << prompt.size() << "-token prompt";
    hits.push_back(hit);
  }
  // Turns 2 and 5 start at the previous answer's last checkpoint (20, 60: its ids
  // up to there tokenize back the same), turn 3 at the previous prompt's end (28),
  // turn 4 at the previous prompt's last block boundary (40). Turn 5's chain runs
  // through the copy of tokens 40..43 that turn 4 computed again.
  EXPECT_EQ(hits, (std::vector<int64_t>{20, 28, 40, 60}));
}

}  // namespace
}  // namespace vllm
