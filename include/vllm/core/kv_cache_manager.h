// The KV cache manager: the scheduler's front door to cache memory.
//
// Attention pages come from one BlockPool (block_size tokens per block, the same
// block table for every attention layer). Models with Gated DeltaNet layers also
// need one recurrent-state slot per running request (conv + SSM state of every GDN
// layer), taken at admission from a StateSlotPool and freed with the request.
// Running out is a return value (the scheduler then preempts), never an exception.
//
// Prefix caching for such hybrid models pairs cached blocks with snapshots of the
// recurrent state (state_snapshot_pool.h). The state is checkpointed at these
// positions p (multiples of block_size), where the scheduler ends prompt chunks so
// that a snapshot is a copy after a forward and never an extra one:
//   - every state_checkpoint_interval tokens;
//   - the last block boundary before the last known token: where the same prompt
//     sent again starts (one token is always computed);
//   - the end of the known tokens when it is a block boundary: the prompt's end
//     (where a chat's next turn starts when the answer's text tokenizes to other
//     ids) and, during decode, every block boundary, of which only the request's
//     latest is kept (the end of its answer when it finishes, where the next turn
//     of a chat starts when the answer tokenizes back the same).
// A lookup takes the longest chain of cached blocks whose end has a snapshot,
// following every cached copy of a block (copies carry different continuations).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/block_pool.h"
#include "vllm/core/request.h"
#include "vllm/core/state_snapshot_pool.h"

namespace vllm {

class StateSlotPool {
 public:
  explicit StateSlotPool(int32_t num_slots);
  int32_t num_slots() const { return num_slots_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  std::optional<int32_t> Allocate();  // the lowest free slot id
  void Free(int32_t slot);

 private:
  int32_t num_slots_;
  std::vector<int32_t> free_;  // kept sorted descending: back() is the lowest id
};

struct KVCacheConfig {
  int32_t block_size = 16;
  int32_t num_blocks = 0;       // including the null block
  int32_t num_state_slots = 0;  // 0 when the model has no recurrent layers
  bool enable_prefix_caching = false;
  // Recurrent-state snapshots for prefix caching (hybrid models; 0: none, so no
  // hits), and the checkpoint interval in tokens (a multiple of block_size).
  int32_t num_state_snapshots = 0;
  int32_t state_checkpoint_interval = 512;
};

// A prefix-cache hit: the cached blocks, the tokens they hold and, for a hybrid
// model, the snapshot of the state after those tokens (-1: none).
struct ComputedBlocks {
  std::vector<int32_t> block_ids;
  int64_t num_tokens = 0;
  int32_t state_snapshot = -1;
};

class KVCacheManager {
 public:
  // `hash_block_tokens` finds prefix-cache candidates (block_pool.h: a hit is
  // always checked against the block's tokens and parent).
  explicit KVCacheManager(const KVCacheConfig& config, BlockHashFn hash_block_tokens = HashBlockTokens);

  const KVCacheConfig& config() const { return config_; }
  const BlockPool& block_pool() const { return pool_; }
  bool has_state_slots() const { return config_.num_state_slots > 0; }
  // Whether recurrent-state snapshots are taken (prefix caching for a hybrid model).
  bool has_state_snapshots() const { return snapshots_.num_snapshots() > 0; }
  int32_t num_free_state_slots() const { return slots_.num_free(); }

  // Prefix-cache lookup for a request with nothing computed yet: the longest chain
  // of its full blocks already cached (for a hybrid model: that ends where a state
  // snapshot was taken). At least one token is always left to compute (its logits
  // are needed).
  ComputedBlocks get_computed_blocks(Request& request);
  // Hybrid models with prefix caching: the first state checkpoint after
  // num_computed tokens of the request (a prompt chunk ends there), or nullopt.
  std::optional<int64_t> next_state_checkpoint(const Request& request, int64_t num_computed) const;
  // After allocate_slots for a chunk ending at `end` tokens: the snapshot the state
  // is saved to after the step when `end` is a checkpoint, or nullopt.
  std::optional<int32_t> take_state_snapshot(const Request& request, int64_t end);
  // Snapshots taken in the previous step become visible to lookups (their states
  // have been written); the scheduler calls this at the start of each step.
  void commit_state_snapshots() { snapshots_.commit_pending(); }
  int32_t num_state_snapshots_used() const { return snapshots_.num_used(pool_); }
  // The last multiple of block_size below num_tokens (0 for num_tokens <= 1): the
  // furthest a lookup of num_tokens tokens reaches (one is always computed), and
  // a state checkpoint of a request of that many tokens.
  int64_t LastBoundaryBefore(int64_t num_tokens) const;

  // Makes room for num_new_tokens more tokens after request.num_computed_tokens
  // (+ num_new_computed_tokens of prefix hits in new_computed_blocks), allocating
  // pages and, for a request without one, a state slot. Returns the blocks appended
  // to the request's table (the prefix hits, then fresh ones; empty when its last
  // block still has room), or nullopt (and changes nothing) when there is not
  // enough free memory.
  std::optional<std::vector<int32_t>> allocate_slots(Request& request, int64_t num_new_tokens,
                                                     const std::vector<int32_t>& new_computed_blocks = {},
                                                     int64_t num_new_computed_tokens = 0);

  // Frees the request's pages (tail first) and state slot.
  void free(const Request& request);

  const std::vector<int32_t>& get_block_ids(const std::string& req_id) const;
  std::optional<int32_t> get_state_slot(const std::string& req_id) const;
  int32_t get_num_free_blocks() const { return pool_.get_num_free_blocks(); }
  double get_usage() const { return pool_.get_usage(); }
  // vLLM's prefix cache stats, in tokens, since construction: every get_computed_blocks
  // call with prefix caching on queries the request's tokens and hits those found.
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }
  int64_t num_requests() const { return static_cast<int64_t>(req_to_blocks_.size()); }

 private:
  // One cached block ending a chain of a request's first blocks: `parent` indexes
  // the link of the block before it (one depth shallower; -1 for a first block).
  struct CachedLink {
    int32_t block_id;
    int32_t parent;
  };
  // depths[i]: every cached block that ends a chain of cached blocks holding the
  // request's first i + 1 blocks (up to max_blocks). Copies of a block (a request
  // computed cached blocks again after a shorter hit) each carry their own
  // children, so the lookup follows every copy rather than the first.
  std::vector<std::vector<CachedLink>> CachedChains(const Request& request, int64_t max_blocks) const;
  void UpdateBlockHashes(Request& request) const;
  // The tokens of the request's full block i.
  std::span<const int32_t> BlockTokens(const Request& request, int64_t i) const;

  KVCacheConfig config_;
  BlockHashFn hash_block_tokens_;
  BlockPool pool_;
  StateSlotPool slots_;
  std::unordered_map<std::string, std::vector<int32_t>> req_to_blocks_;
  std::unordered_map<std::string, int64_t> num_cached_blocks_;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
  std::unordered_map<std::string, int32_t> req_to_state_slot_;
  StateSnapshotPool snapshots_;
  // The block whose snapshot is the request's latest decode checkpoint (dropped when
  // a later one is taken).
  std::unordered_map<std::string, int32_t> req_to_rolling_snapshot_block_;
};

}  // namespace vllm
