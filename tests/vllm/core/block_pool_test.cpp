// BlockPool and KVCacheManager: exact block ids, reference counts, prefix-cache
// hits and eviction order, state slots, and no leaks.
#include <gtest/gtest.h>

#include "vllm/core/block_pool.h"
#include "vllm/core/kv_cache_manager.h"

namespace vllm {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Request> MakeRequest(const std::string& id, std::vector<int32_t> prompt, int64_t arrival = 0) {
  SamplingParams params;
  params.max_tokens = 8;
  return std::make_unique<Request>(id, std::move(prompt), params, std::vector<int32_t>{}, arrival);
}

TEST(BlockPoolTest, NullBlockIsReservedAndFreeQueueIsFifo) {
  BlockPool pool(6, false);
  EXPECT_EQ(pool.get_num_free_blocks(), 5);
  EXPECT_EQ(pool.get_new_blocks(2), (Ids{1, 2}));
  EXPECT_EQ(pool.get_new_blocks(1), (Ids{3}));
  pool.free_blocks({2, 1});
  EXPECT_EQ(pool.get_new_blocks(3), (Ids{4, 5, 2}));
  EXPECT_EQ(pool.get_num_free_blocks(), 1);
  EXPECT_THROW(pool.get_new_blocks(2), std::logic_error);
  EXPECT_THROW(pool.free_blocks({3, 3}), std::logic_error);
}

TEST(BlockPoolTest, CachedBlocksAreReusedUntilEvicted) {
  BlockPool pool(4, true);
  Ids a = pool.get_new_blocks(2);  // {1, 2}
  const Ids first{1, 2}, second{3, 4};
  pool.cache_full_block(1, 111, first, std::nullopt);
  pool.cache_full_block(2, 222, second, 1);
  pool.free_blocks({2, 1});  // queue: 3, 2, 1
  EXPECT_EQ(pool.get_cached_blocks(111, first, std::nullopt), Ids{1});
  pool.touch({1});  // a prefix hit takes block 1 back out of the queue
  EXPECT_EQ(pool.block(1).ref_cnt, 1);
  EXPECT_EQ(pool.get_num_free_blocks(), 2);
  EXPECT_EQ(pool.get_new_blocks(2), (Ids{3, 2}));  // evicts hash 222
  EXPECT_TRUE(pool.get_cached_blocks(222, second, 1).empty());
  EXPECT_EQ(pool.get_cached_blocks(111, first, std::nullopt), Ids{1});
}

// The hash only names candidates: a hit holds the same tokens after the same
// parent, whatever the hashes say.
TEST(BlockPoolTest, AHitNeedsTheSameTokensAfterTheSameParent) {
  BlockPool pool(8, true);
  EXPECT_EQ(pool.get_new_blocks(3), (Ids{1, 2, 3}));
  constexpr BlockHash kSame = 42;  // every block collides
  pool.cache_full_block(1, kSame, Ids{1, 2}, std::nullopt);
  pool.cache_full_block(2, kSame, Ids{3, 4}, 1);
  pool.cache_full_block(3, kSame, Ids{5, 6}, std::nullopt);
  EXPECT_EQ(pool.get_cached_blocks(kSame, Ids{1, 2}, std::nullopt), Ids{1});
  EXPECT_EQ(pool.get_cached_blocks(kSame, Ids{5, 6}, std::nullopt), Ids{3});
  EXPECT_EQ(pool.get_cached_blocks(kSame, Ids{3, 4}, 1), Ids{2});
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{3, 4}, 3).empty()) << "the right tokens after another parent";
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{3, 4}, std::nullopt).empty()) << "a child is no first block";
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{9, 9}, std::nullopt).empty());
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{1, 2}, 4).empty()) << "block 4 is not cached";

  // Block 1 is evicted while its child stays in use, then cached again: the child
  // was computed after block 1's old contents and is no longer its child.
  pool.free_blocks({1});  // queue: 4, 5, 6, 7, 1
  EXPECT_EQ(pool.get_new_blocks(5), (Ids{4, 5, 6, 7, 1}));
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{1, 2}, std::nullopt).empty());
  pool.cache_full_block(1, kSame, Ids{1, 2}, std::nullopt);
  EXPECT_EQ(pool.get_cached_blocks(kSame, Ids{1, 2}, std::nullopt), Ids{1});
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{3, 4}, 1).empty());
  // A block after an uncached parent cannot be reached, so it is not cached.
  pool.cache_full_block(5, kSame, Ids{7, 8}, 6);
  EXPECT_FALSE(pool.block(5).block_hash.has_value());
  pool.reset_prefix_cache();
  EXPECT_TRUE(pool.get_cached_blocks(kSame, Ids{5, 6}, std::nullopt).empty());
}

// The same tokens after the same parent cached twice (a request computed them again):
// both copies are hits, and each keeps the children cached after it.
TEST(BlockPoolTest, CopiesOfABlockAreAllHitsAndEachKeepsItsOwnChildren) {
  BlockPool pool(8, true);
  EXPECT_EQ(pool.get_new_blocks(4), (Ids{1, 2, 3, 4}));
  pool.cache_full_block(1, 11, Ids{1, 2}, std::nullopt);
  pool.cache_full_block(2, 22, Ids{3, 4}, 1);
  pool.cache_full_block(3, 11, Ids{1, 2}, std::nullopt);  // a copy of block 1
  pool.cache_full_block(4, 33, Ids{5, 6}, 3);
  EXPECT_EQ(pool.get_cached_blocks(11, Ids{1, 2}, std::nullopt), (Ids{1, 3}));
  EXPECT_EQ(pool.get_cached_blocks(22, Ids{3, 4}, 1), Ids{2});
  EXPECT_TRUE(pool.get_cached_blocks(22, Ids{3, 4}, 3).empty());
  EXPECT_EQ(pool.get_cached_blocks(33, Ids{5, 6}, 3), Ids{4});
  EXPECT_TRUE(pool.get_cached_blocks(33, Ids{5, 6}, 1).empty());
}

TEST(KVCacheManagerTest, AllocatesWholeBlocksAndReturnsNoRoomInsteadOfThrowing) {
  KVCacheManager kv({.block_size = 4, .num_blocks = 5, .num_state_slots = 0, .enable_prefix_caching = false});
  auto a = MakeRequest("a", {1, 2, 3, 4, 5});
  ASSERT_TRUE(kv.allocate_slots(*a, 5));
  EXPECT_EQ(kv.get_block_ids("a"), (Ids{1, 2}));
  a->num_computed_tokens = 5;
  ASSERT_TRUE(kv.allocate_slots(*a, 3));  // tokens 5..7 fit in block 2
  EXPECT_EQ(kv.get_block_ids("a"), (Ids{1, 2}));
  auto b = MakeRequest("b", std::vector<int32_t>(9, 7));
  EXPECT_FALSE(kv.allocate_slots(*b, 9));  // needs 3, 2 free
  EXPECT_TRUE(kv.get_block_ids("b").empty());
  EXPECT_EQ(kv.get_num_free_blocks(), 2);
  kv.free(*a);
  EXPECT_EQ(kv.get_num_free_blocks(), 4);
  ASSERT_TRUE(kv.allocate_slots(*b, 9));
  EXPECT_EQ(kv.get_block_ids("b"), (Ids{3, 4, 2}));  // a's blocks were freed tail first: 2 before 1
  kv.free(*b);
  EXPECT_EQ(kv.get_num_free_blocks(), 4);
  EXPECT_EQ(kv.num_requests(), 0);
}

BlockHash CollidingHash(std::optional<BlockHash>, const int32_t*, int64_t) { return 42; }

// With a hash under which every block collides, a request still gets only blocks
// computed for its own prefix (the old hash-only lookup handed b a's blocks), and
// still finds them among the colliding ones.
TEST(KVCacheManagerTest, CollidingHashesNeverShareAnotherPromptsBlocks) {
  KVCacheManager kv({.block_size = 4, .num_blocks = 16, .num_state_slots = 0, .enable_prefix_caching = true},
                    CollidingHash);
  auto a = MakeRequest("a", {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(kv.get_computed_blocks(*a).num_tokens, 0);
  EXPECT_EQ(kv.allocate_slots(*a, 9), (Ids{1, 2, 3}));  // blocks 1 and 2 are full: cached
  kv.free(*a);
  auto b = MakeRequest("b", {11, 12, 13, 14, 15, 16, 17, 18, 19});
  const auto [b_hits, b_tokens, b_snapshot] = kv.get_computed_blocks(*b);
  EXPECT_TRUE(b_hits.empty());
  EXPECT_EQ(b_tokens, 0);
  EXPECT_EQ(kv.allocate_slots(*b, 9), (Ids{4, 5, 6}));
  kv.free(*b);
  auto c = MakeRequest("c", {11, 12, 13, 14, 15, 16, 17, 18, 20, 21});
  const auto [c_hits, c_tokens, c_snapshot] = kv.get_computed_blocks(*c);
  EXPECT_EQ(c_hits, (Ids{4, 5}));
  EXPECT_EQ(c_tokens, 8);
  // a's first block, then the tokens of b's second block: only the first is a's.
  auto d = MakeRequest("d", {1, 2, 3, 4, 15, 16, 17, 18, 0});
  EXPECT_EQ(kv.get_computed_blocks(*d).block_ids, (Ids{1}));
}

TEST(KVCacheManagerTest, StateSlotsAreTakenAtAdmissionAndFreedWithTheRequest) {
  KVCacheManager kv({.block_size = 4, .num_blocks = 8, .num_state_slots = 2, .enable_prefix_caching = false});
  auto a = MakeRequest("a", {1}), b = MakeRequest("b", {2}), c = MakeRequest("c", {3});
  ASSERT_TRUE(kv.allocate_slots(*a, 1));
  ASSERT_TRUE(kv.allocate_slots(*b, 1));
  EXPECT_EQ(kv.get_state_slot("a"), 0);
  EXPECT_EQ(kv.get_state_slot("b"), 1);
  EXPECT_FALSE(kv.allocate_slots(*c, 1));  // pages are free, slots are not
  EXPECT_EQ(kv.get_num_free_blocks(), 5);
  kv.free(*a);
  ASSERT_TRUE(kv.allocate_slots(*c, 1));
  EXPECT_EQ(kv.get_state_slot("c"), 0);
}

TEST(KVCacheManagerTest, PrefixCacheHitsShareFullBlocksAndLeaveOneTokenToCompute) {
  KVCacheManager kv({.block_size = 2, .num_blocks = 8, .num_state_slots = 0, .enable_prefix_caching = true});
  auto a = MakeRequest("a", {1, 2, 3, 4, 5});
  auto [hits_a, tokens_a, snapshot_a] = kv.get_computed_blocks(*a);
  EXPECT_TRUE(hits_a.empty());
  ASSERT_TRUE(kv.allocate_slots(*a, 5));
  EXPECT_EQ(kv.get_block_ids("a"), (Ids{1, 2, 3}));

  auto b = MakeRequest("b", {1, 2, 3, 4, 9, 9});
  auto [hits_b, tokens_b, snapshot_b] = kv.get_computed_blocks(*b);
  EXPECT_EQ(hits_b, (Ids{1, 2}));
  EXPECT_EQ(tokens_b, 4);
  ASSERT_TRUE(kv.allocate_slots(*b, 2, hits_b, tokens_b));
  EXPECT_EQ(kv.get_block_ids("b"), (Ids{1, 2, 4}));
  EXPECT_EQ(kv.block_pool().block(1).ref_cnt, 2);

  // A prompt that is entirely cached still computes its last token.
  auto c = MakeRequest("c", {1, 2, 3, 4});
  auto [hits_c, tokens_c, snapshot_c] = kv.get_computed_blocks(*c);
  EXPECT_EQ(hits_c, (Ids{1}));
  EXPECT_EQ(tokens_c, 2);

  kv.free(*a);
  kv.free(*b);
  EXPECT_EQ(kv.block_pool().block(1).ref_cnt, 0);
  EXPECT_EQ(kv.get_num_free_blocks(), 7);
  // Freed blocks stay cached: a later identical prefix hits again.
  auto d = MakeRequest("d", {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(kv.get_computed_blocks(*d).block_ids, (Ids{1, 2}));
}

}  // namespace
}  // namespace vllm
