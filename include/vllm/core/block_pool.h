// The pool of KV cache blocks (pages), as in vLLM v1.
//
// Block 0 is the null_block: never handed out, used to pad block tables.
// A block with ref_cnt 0 sits in the free queue; the queue's front is evicted
// first (least recently freed). A freed block keeps its cached contents, so a later
// request with the same prefix can take it back (prefix-cache hit) until it is evicted:
//
//   free queue:  front [b7 b3 b9 ... b2] back      get_new_blocks pops the front
//                                                  free_blocks appends at the back
//   cached:      hash -> blocks for every full block whose hash is known
//
// The hash only finds candidates: a hit is a block holding exactly the request's
// tokens whose parent is exactly the request's previous hit, so a hash collision
// (the hash is 64-bit and not cryptographic) can never hand out another prompt's
// KV. Each caching of a block gets a fresh cache_serial and records its parent's:
// a parent evicted and cached again with other tokens no longer matches the
// children cached under its old contents.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "vllm/core/request.h"

namespace vllm {

struct KVCacheBlock {
  int32_t block_id = 0;
  int32_t ref_cnt = 0;
  std::optional<BlockHash> block_hash;  // set while the block is cached
  std::vector<int32_t> token_ids;      // the block's tokens, while cached
  uint64_t cache_serial = 0;           // unique per caching; 0 while not cached
  uint64_t parent_serial = 0;          // the parent's cache_serial when cached; 0 for a first block
  // Free-queue links (block ids; -1 = none).
  int32_t prev_free = -1;
  int32_t next_free = -1;
  bool in_free_queue = false;
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t get_num_free_blocks() const { return num_free_; }
  // Fraction of blocks in use (the null block excluded).
  double get_usage() const;
  const KVCacheBlock& block(int32_t block_id) const { return blocks_.at(block_id); }
  int32_t null_block() const { return 0; }

  // Pops n blocks from the free queue (evicting their cached hashes), ref_cnt = 1.
  // Precondition: n <= get_num_free_blocks().
  std::vector<int32_t> get_new_blocks(int32_t n);
  // The cached blocks under `hash` that hold exactly `token_ids` after the cached
  // block `parent` (nullopt: a request's first block), oldest caching first. There
  // can be several: a request that computes blocks already cached (its hit stopped
  // at an earlier state snapshot, or it ran beside the first) caches its copies too,
  // and its later blocks are cached after those copies only.
  std::vector<int32_t> get_cached_blocks(BlockHash hash, std::span<const int32_t> token_ids,
                                         std::optional<int32_t> parent) const;
  // Takes a reference on prefix-cache hits (removing them from the free queue if unused).
  void touch(const std::vector<int32_t>& block_ids);
  // Records a newly full block (its hash, tokens and parent: the cached block
  // before it in the request's table, nullopt for the first) so later requests can
  // share it. A block whose parent is not cached cannot be reached and stays private.
  void cache_full_block(int32_t block_id, BlockHash hash, std::span<const int32_t> token_ids,
                        std::optional<int32_t> parent);
  // Drops a reference on each block, in the given order (callers pass a request's
  // blocks tail first, so its last blocks are evicted before its shared prefix).
  void free_blocks(const std::vector<int32_t>& block_ids);
  // Evicts every cached hash (e.g. when weights change); blocks stay allocated.
  void reset_prefix_cache();

 private:
  void PushBack(int32_t block_id);
  void Remove(int32_t block_id);
  int32_t PopFront();
  void Uncache(KVCacheBlock& block);

  std::vector<KVCacheBlock> blocks_;
  bool enable_caching_;
  int32_t free_front_ = -1, free_back_ = -1, num_free_ = 0;
  uint64_t next_cache_serial_ = 1;
  // Several blocks may share a hash (a collision, or the same tokens computed twice).
  std::unordered_map<BlockHash, std::vector<int32_t>> cached_block_hash_to_block_;
};

// Hash of one full block chained to its parent's hash (vLLM's hash_block_tokens).
BlockHash HashBlockTokens(std::optional<BlockHash> parent, const int32_t* token_ids, int64_t count);
// The block hash function the KV cache manager uses (HashBlockTokens; tests inject
// colliding ones).
using BlockHashFn = BlockHash (*)(std::optional<BlockHash> parent, const int32_t* token_ids, int64_t count);

}  // namespace vllm
