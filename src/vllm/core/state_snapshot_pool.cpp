#include "vllm/core/state_snapshot_pool.h"

#include <algorithm>

namespace vllm {

StateSnapshotPool::StateSnapshotPool(int32_t num_snapshots) : entries_(std::max(num_snapshots, 0)) {}

bool StateSnapshotPool::IsValid(const BlockPool& pool, const Entry& e) const {
  return e.block_id >= 0 && pool.block(e.block_id).cache_serial == e.cache_serial;
}

int32_t StateSnapshotPool::num_used(const BlockPool& pool) const {
  int32_t n = 0;
  for (const Entry& e : entries_) n += IsValid(pool, e);
  return n;
}

std::optional<int32_t> StateSnapshotPool::find(const BlockPool& pool, int32_t block_id) const {
  const uint64_t serial = pool.block(block_id).cache_serial;
  if (serial == 0) return std::nullopt;
  for (int32_t i = 0; i < num_snapshots(); ++i) {
    const Entry& e = entries_[i];
    if (!e.pending && e.block_id == block_id && e.cache_serial == serial) return i;
  }
  return std::nullopt;
}

void StateSnapshotPool::touch(int32_t snapshot) { entries_.at(snapshot).last_used = ++tick_; }

std::optional<int32_t> StateSnapshotPool::PickVictim(const BlockPool& pool) const {
  // A free or stale entry first; otherwise the least recently used committed one.
  std::optional<int32_t> lru;
  for (int32_t i = 0; i < num_snapshots(); ++i) {
    const Entry& e = entries_[i];
    if (!IsValid(pool, e)) return i;
    if (!e.pending && (!lru || e.last_used < entries_[*lru].last_used)) lru = i;
  }
  return lru;
}

std::optional<int32_t> StateSnapshotPool::allocate(const BlockPool& pool, int32_t block_id) {
  const uint64_t serial = pool.block(block_id).cache_serial;
  if (serial == 0) return std::nullopt;
  for (const Entry& e : entries_) {
    if (e.block_id == block_id && e.cache_serial == serial) return std::nullopt;  // already kept
  }
  const std::optional<int32_t> victim = PickVictim(pool);
  if (!victim) return std::nullopt;
  entries_[*victim] = {.block_id = block_id, .cache_serial = serial, .last_used = ++tick_, .pending = true};
  return victim;
}

void StateSnapshotPool::release(const BlockPool& pool, int32_t block_id) {
  const uint64_t serial = pool.block(block_id).cache_serial;
  for (Entry& e : entries_) {
    if (e.block_id == block_id && e.cache_serial == serial) e = Entry{};
  }
}

void StateSnapshotPool::commit_pending() {
  for (Entry& e : entries_) e.pending = false;
}

void StateSnapshotPool::reset() {
  for (Entry& e : entries_) e = Entry{};
}

}  // namespace vllm
