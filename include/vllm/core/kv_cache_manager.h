// The KV cache manager: the scheduler's front door to cache memory.
//
// Attention pages come from one BlockPool (block_size tokens per block, the same
// block table for every attention layer). Models with Gated DeltaNet layers also
// need one recurrent-state slot per running request (conv + SSM state of every GDN
// layer), taken at admission from a StateSlotPool and freed with the request.
// Running out is a return value (the scheduler then preempts), never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/block_pool.h"
#include "vllm/core/request.h"

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
};

class KVCacheManager {
 public:
  // `hash_block_tokens` finds prefix-cache candidates (block_pool.h: a hit is
  // always checked against the block's tokens and parent).
  explicit KVCacheManager(const KVCacheConfig& config, BlockHashFn hash_block_tokens = HashBlockTokens);

  const KVCacheConfig& config() const { return config_; }
  const BlockPool& block_pool() const { return pool_; }
  bool has_state_slots() const { return config_.num_state_slots > 0; }

  // Prefix-cache lookup for a request with nothing computed yet: the longest chain
  // of its full blocks already cached. At least one token is always left to compute
  // (its logits are needed). Returns block ids and the tokens they cover.
  std::pair<std::vector<int32_t>, int64_t> get_computed_blocks(Request& request);

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
};

}  // namespace vllm
