// The scheduler's book of recurrent-state snapshots (prefix caching for hybrid
// models, docs/architecture.md §4).
//
// A snapshot is a copy of one request's state slot (the conv and SSM state of every
// Gated DeltaNet layer) taken after the first p tokens, p a multiple of block_size.
// It pairs with the cached attention block that ends at p and is keyed by that
// block: its id and cache_serial. The block is found through the block hash chain
// (block_pool.h), whose hits are checked against tokens and parents, so a snapshot
// found this way was computed from exactly the request's first p tokens. When the
// block is evicted or cached again, its serial changes and the snapshot is stale:
// it is never found again and is the first to be reused.
//
//   block table   | b0 | b1 | b2 | b3 | b4 |        (block_size 16)
//   snapshots              s@32      s@64          keyed by (b1, serial), (b3, serial)
//
// A snapshot taken during a step is written by the worker after that step's
// forward, so it is pending (neither found nor evicted) until commit_pending(),
// which the scheduler calls at the start of the next step. Eviction: stale
// snapshots first, then the least recently used.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "vllm/core/block_pool.h"

namespace vllm {

class StateSnapshotPool {
 public:
  explicit StateSnapshotPool(int32_t num_snapshots);

  int32_t num_snapshots() const { return static_cast<int32_t>(entries_.size()); }
  // Snapshots holding a valid (not stale) state, pending ones included.
  int32_t num_used(const BlockPool& pool) const;

  // The committed snapshot paired with the cached block `block_id`, if any.
  std::optional<int32_t> find(const BlockPool& pool, int32_t block_id) const;
  // Marks a snapshot as just used (LRU).
  void touch(int32_t snapshot);
  // A snapshot for the state at the end of the cached block `block_id`, pending
  // until commit_pending(). nullopt when that block already has one, when the block
  // is not cached, or when every snapshot is pending.
  std::optional<int32_t> allocate(const BlockPool& pool, int32_t block_id);
  // Drops the snapshot of the cached block `block_id` (its state is no longer
  // wanted); nothing when the block has none, or the entry was reused since.
  void release(const BlockPool& pool, int32_t block_id);
  void commit_pending();
  // Drops every snapshot (reset_prefix_cache).
  void reset();

 private:
  struct Entry {
    int32_t block_id = -1;       // -1: free
    uint64_t cache_serial = 0;   // the block's serial when the snapshot was taken
    uint64_t last_used = 0;      // LRU tick
    bool pending = false;
  };
  bool IsValid(const BlockPool& pool, const Entry& e) const;
  std::optional<int32_t> PickVictim(const BlockPool& pool) const;

  std::vector<Entry> entries_;
  uint64_t tick_ = 0;
};

}  // namespace vllm
