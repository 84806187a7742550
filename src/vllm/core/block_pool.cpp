#include "vllm/core/block_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vllm {

BlockHash HashBlockTokens(std::optional<BlockHash> parent, const int32_t* token_ids, int64_t count) {
  // splitmix64-style mixing of the parent hash and every token id: a 64-bit hash,
  // so a collision between two different prefixes is ~n^2 / 2^65 for n blocks.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent ? *parent : 0x6a09e667f3bcc908ull);
  for (int64_t i = 0; i < count; ++i) h = mix(h ^ static_cast<uint32_t>(token_ids[i]));
  return mix(h ^ static_cast<uint64_t>(count));
}

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching) : enable_caching_(enable_caching) {
  if (num_blocks < 2) {
    throw std::invalid_argument("the KV cache needs at least 2 blocks (one is the null block), got " +
                                std::to_string(num_blocks));
  }
  blocks_.resize(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) blocks_[i].block_id = i;
  for (int32_t i = 1; i < num_blocks; ++i) PushBack(i);
  blocks_[0].ref_cnt = 1;  // the null block is never freed
}

double BlockPool::get_usage() const {
  const int32_t usable = num_blocks() - 1;
  return 1.0 - static_cast<double>(num_free_) / usable;
}

void BlockPool::PushBack(int32_t id) {
  KVCacheBlock& b = blocks_[id];
  b.prev_free = free_back_;
  b.next_free = -1;
  b.in_free_queue = true;
  if (free_back_ >= 0) blocks_[free_back_].next_free = id;
  else free_front_ = id;
  free_back_ = id;
  ++num_free_;
}

void BlockPool::Remove(int32_t id) {
  KVCacheBlock& b = blocks_[id];
  if (b.prev_free >= 0) blocks_[b.prev_free].next_free = b.next_free;
  else free_front_ = b.next_free;
  if (b.next_free >= 0) blocks_[b.next_free].prev_free = b.prev_free;
  else free_back_ = b.prev_free;
  b.prev_free = b.next_free = -1;
  b.in_free_queue = false;
  --num_free_;
}

int32_t BlockPool::PopFront() {
  int32_t id = free_front_;
  Remove(id);
  return id;
}

std::vector<int32_t> BlockPool::get_new_blocks(int32_t n) {
  if (n > num_free_) {
    throw std::logic_error("BlockPool: asked for " + std::to_string(n) + " blocks with " + std::to_string(num_free_) +
                           " free (callers must check get_num_free_blocks first)");
  }
  std::vector<int32_t> ids;
  ids.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    int32_t id = PopFront();
    KVCacheBlock& b = blocks_[id];
    Uncache(b);  // evicted from the prefix cache
    b.ref_cnt = 1;
    ids.push_back(id);
  }
  return ids;
}

void BlockPool::Uncache(KVCacheBlock& b) {
  if (!b.block_hash) return;
  auto it = cached_block_hash_to_block_.find(*b.block_hash);
  if (it != cached_block_hash_to_block_.end()) {
    std::erase(it->second, b.block_id);
    if (it->second.empty()) cached_block_hash_to_block_.erase(it);
  }
  b.block_hash.reset();
  b.token_ids.clear();
  b.cache_serial = b.parent_serial = 0;
}

std::vector<int32_t> BlockPool::get_cached_blocks(BlockHash hash, std::span<const int32_t> token_ids,
                                                  std::optional<int32_t> parent) const {
  std::vector<int32_t> hits;
  if (!enable_caching_) return hits;
  auto it = cached_block_hash_to_block_.find(hash);
  if (it == cached_block_hash_to_block_.end()) return hits;
  const uint64_t parent_serial = parent ? blocks_.at(*parent).cache_serial : 0;
  if (parent && parent_serial == 0) return hits;  // the parent is not cached
  for (int32_t id : it->second) {
    const KVCacheBlock& b = blocks_[id];
    if (b.parent_serial == parent_serial && std::equal(b.token_ids.begin(), b.token_ids.end(), token_ids.begin(),
                                                       token_ids.end())) {
      hits.push_back(id);
    }
  }
  return hits;
}

void BlockPool::touch(const std::vector<int32_t>& block_ids) {
  for (int32_t id : block_ids) {
    KVCacheBlock& b = blocks_.at(id);
    if (b.ref_cnt == 0 && b.in_free_queue) Remove(id);
    ++b.ref_cnt;
  }
}

void BlockPool::cache_full_block(int32_t block_id, BlockHash hash, std::span<const int32_t> token_ids,
                                 std::optional<int32_t> parent) {
  if (!enable_caching_) return;
  KVCacheBlock& b = blocks_.at(block_id);
  if (b.block_hash) return;  // already cached (a prefix hit)
  const uint64_t parent_serial = parent ? blocks_.at(*parent).cache_serial : 0;
  if (parent && parent_serial == 0) return;  // unreachable: no lookup can pass through its parent
  b.block_hash = hash;
  b.token_ids.assign(token_ids.begin(), token_ids.end());
  b.cache_serial = next_cache_serial_++;
  b.parent_serial = parent_serial;
  cached_block_hash_to_block_[hash].push_back(block_id);
}

void BlockPool::free_blocks(const std::vector<int32_t>& block_ids) {
  for (int32_t id : block_ids) {
    if (id == 0) continue;  // padding with the null block
    KVCacheBlock& b = blocks_.at(id);
    if (b.ref_cnt <= 0) throw std::logic_error("BlockPool: block " + std::to_string(id) + " freed twice");
    if (--b.ref_cnt == 0) PushBack(id);
  }
}

void BlockPool::reset_prefix_cache() {
  for (KVCacheBlock& b : blocks_) Uncache(b);
}

}  // namespace vllm
