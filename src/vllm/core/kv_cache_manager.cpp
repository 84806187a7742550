#include "vllm/core/kv_cache_manager.h"

#include <algorithm>
#include <stdexcept>

namespace vllm {

StateSlotPool::StateSlotPool(int32_t num_slots) : num_slots_(num_slots) {
  for (int32_t i = num_slots - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<int32_t> StateSlotPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  int32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

void StateSlotPool::Free(int32_t slot) {
  if (slot < 0 || slot >= num_slots_ || std::find(free_.begin(), free_.end(), slot) != free_.end()) {
    throw std::logic_error("StateSlotPool: bad free of slot " + std::to_string(slot));
  }
  free_.insert(std::lower_bound(free_.begin(), free_.end(), slot, std::greater<int32_t>()), slot);
}

KVCacheManager::KVCacheManager(const KVCacheConfig& config, BlockHashFn hash_block_tokens)
    : config_(config),
      hash_block_tokens_(hash_block_tokens),
      pool_(config.num_blocks, config.enable_prefix_caching),
      slots_(config.num_state_slots),
      snapshots_(config.enable_prefix_caching && config.num_state_slots > 0 ? config.num_state_snapshots : 0) {
  if (config.block_size < 1) throw std::invalid_argument("block_size must be >= 1");
  if (config.state_checkpoint_interval < 1 || config.state_checkpoint_interval % config.block_size != 0) {
    throw std::invalid_argument("--state-checkpoint-interval must be a positive multiple of --block-size (" +
                                std::to_string(config.block_size) + "), got " +
                                std::to_string(config.state_checkpoint_interval));
  }
}

std::span<const int32_t> KVCacheManager::BlockTokens(const Request& request, int64_t i) const {
  return std::span<const int32_t>(request.all_token_ids()).subspan(i * config_.block_size, config_.block_size);
}

void KVCacheManager::UpdateBlockHashes(Request& request) const {
  const int64_t bs = config_.block_size;
  const int64_t num_full = request.num_tokens() / bs;
  const int32_t* tokens = request.all_token_ids().data();
  while (static_cast<int64_t>(request.block_hashes.size()) < num_full) {
    const int64_t i = static_cast<int64_t>(request.block_hashes.size());
    std::optional<BlockHash> parent;
    if (i > 0) parent = request.block_hashes[i - 1];
    request.block_hashes.push_back(hash_block_tokens_(parent, tokens + i * bs, bs));
  }
}

std::vector<std::vector<KVCacheManager::CachedLink>> KVCacheManager::CachedChains(const Request& request,
                                                                                 int64_t max_blocks) const {
  std::vector<std::vector<CachedLink>> depths;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const std::span<const int32_t> tokens = BlockTokens(request, i);
    std::vector<CachedLink> links;
    if (i == 0) {
      for (int32_t id : pool_.get_cached_blocks(request.block_hashes[0], tokens, std::nullopt)) {
        links.push_back({.block_id = id, .parent = -1});
      }
    } else {
      const std::vector<CachedLink>& parents = depths.back();
      for (int32_t p = 0; p < static_cast<int32_t>(parents.size()); ++p) {
        for (int32_t id : pool_.get_cached_blocks(request.block_hashes[i], tokens, parents[p].block_id)) {
          links.push_back({.block_id = id, .parent = p});
        }
      }
    }
    if (links.empty()) break;
    depths.push_back(std::move(links));
  }
  return depths;
}

ComputedBlocks KVCacheManager::get_computed_blocks(Request& request) {
  if (!config_.enable_prefix_caching || request.sampling_params.prompt_logprobs) return {};
  UpdateBlockHashes(request);
  // Leave at least the last token to compute.
  const int64_t max_blocks = std::min<int64_t>((request.num_tokens() - 1) / config_.block_size,
                                               static_cast<int64_t>(request.block_hashes.size()));
  const std::vector<std::vector<CachedLink>> depths = CachedChains(request, max_blocks);
  // The longest chain; for a hybrid model the recurrent state must be restored too,
  // so the longest whose last block has a snapshot.
  ComputedBlocks hit;
  for (int64_t depth = static_cast<int64_t>(depths.size()); depth > 0 && hit.block_ids.empty(); --depth) {
    const std::vector<CachedLink>& ends = depths[depth - 1];
    for (int32_t end = 0; end < static_cast<int32_t>(ends.size()); ++end) {
      if (has_state_slots()) {
        const std::optional<int32_t> snapshot = snapshots_.find(pool_, ends[end].block_id);
        if (!snapshot) continue;
        hit.state_snapshot = *snapshot;
        snapshots_.touch(*snapshot);
      }
      hit.block_ids.resize(depth);
      for (int64_t d = depth - 1, link = end; d >= 0; link = depths[d][link].parent, --d) {
        hit.block_ids[d] = depths[d][link].block_id;
      }
      break;
    }
  }
  hit.num_tokens = static_cast<int64_t>(hit.block_ids.size()) * config_.block_size;
  prefix_cache_queries_ += request.num_tokens();
  prefix_cache_hits_ += hit.num_tokens;
  return hit;
}

int64_t KVCacheManager::LastBoundaryBefore(int64_t num_tokens) const {
  return std::max<int64_t>(num_tokens - 1, 0) / config_.block_size * config_.block_size;
}

std::optional<int64_t> KVCacheManager::next_state_checkpoint(const Request& request, int64_t num_computed) const {
  if (snapshots_.num_snapshots() == 0) return std::nullopt;
  const int64_t interval = config_.state_checkpoint_interval;
  const int64_t next_interval = (num_computed / interval + 1) * interval;
  // Interval positions past the last one are past the known tokens.
  const int64_t last = LastBoundaryBefore(request.num_tokens());
  if (last <= num_computed) return std::nullopt;
  return std::min(next_interval, last);
}

std::optional<int32_t> KVCacheManager::take_state_snapshot(const Request& request, int64_t end) {
  const int64_t bs = config_.block_size;
  if (snapshots_.num_snapshots() == 0 || end <= 0 || end % bs != 0) return std::nullopt;
  const bool at_interval = end % config_.state_checkpoint_interval == 0;
  if (!at_interval && end != LastBoundaryBefore(request.num_tokens()) && end != request.num_tokens()) {
    return std::nullopt;
  }
  const std::vector<int32_t>& blocks = get_block_ids(request.req_id);
  if (end / bs > static_cast<int64_t>(blocks.size())) return std::nullopt;
  const int32_t block = blocks[end / bs - 1];
  const std::optional<int32_t> snapshot = snapshots_.allocate(pool_, block);
  // A checkpoint past the prompt (a decode one) replaces the request's previous
  // one; the prompt's and the interval ones stay. The prompt's end, when it is a
  // block boundary, is the prompt's too: a chat's next turn resends the prompt and
  // the answer as text, whose ids may differ from the answer's, and starts there.
  if (snapshot && !at_interval && end > request.num_prompt_tokens()) {
    auto [it, first] = req_to_rolling_snapshot_block_.try_emplace(request.req_id, block);
    if (!first) {
      snapshots_.release(pool_, it->second);
      it->second = block;
    }
  }
  return snapshot;
}

std::optional<std::vector<int32_t>> KVCacheManager::allocate_slots(Request& request, int64_t num_new_tokens,
                                                                   const std::vector<int32_t>& new_computed_blocks,
                                                                   int64_t num_new_computed_tokens) {
  std::vector<int32_t>& blocks = req_to_blocks_[request.req_id];
  const bool needs_slot = has_state_slots() && !req_to_state_slot_.count(request.req_id);
  const int64_t bs = config_.block_size;
  const int64_t num_computed = request.num_computed_tokens + num_new_computed_tokens;
  const int64_t num_required = (num_computed + num_new_tokens + bs - 1) / bs;
  const int64_t num_new_blocks =
      std::max<int64_t>(0, num_required - static_cast<int64_t>(blocks.size() + new_computed_blocks.size()));
  // Prefix hits sitting unused in the free queue leave it when touched.
  int64_t evictable_hits = 0;
  for (int32_t id : new_computed_blocks) evictable_hits += pool_.block(id).ref_cnt == 0;
  if (num_new_blocks > pool_.get_num_free_blocks() - evictable_hits || (needs_slot && slots_.num_free() == 0)) {
    if (blocks.empty()) req_to_blocks_.erase(request.req_id);
    return std::nullopt;
  }
  if (needs_slot) req_to_state_slot_[request.req_id] = *slots_.Allocate();
  pool_.touch(new_computed_blocks);
  std::vector<int32_t> new_blocks = new_computed_blocks;
  const std::vector<int32_t> fresh = pool_.get_new_blocks(static_cast<int32_t>(num_new_blocks));
  new_blocks.insert(new_blocks.end(), fresh.begin(), fresh.end());
  blocks.insert(blocks.end(), new_blocks.begin(), new_blocks.end());

  // Blocks that become full with this step's tokens are cached (vLLM caches them
  // when scheduled: they are computed before any later request can be scheduled).
  if (config_.enable_prefix_caching) {
    UpdateBlockHashes(request);
    int64_t& num_cached = num_cached_blocks_[request.req_id];
    const int64_t num_full = std::min<int64_t>((num_computed + num_new_tokens) / bs,
                                               static_cast<int64_t>(request.block_hashes.size()));
    for (int64_t i = num_cached; i < num_full; ++i) {
      std::optional<int32_t> parent;
      if (i > 0) parent = blocks[i - 1];
      pool_.cache_full_block(blocks[i], request.block_hashes[i], BlockTokens(request, i), parent);
    }
    num_cached = std::max(num_cached, num_full);
  }
  return new_blocks;
}

void KVCacheManager::free(const Request& request) {
  auto it = req_to_blocks_.find(request.req_id);
  if (it != req_to_blocks_.end()) {
    std::vector<int32_t> reversed(it->second.rbegin(), it->second.rend());
    pool_.free_blocks(reversed);
    req_to_blocks_.erase(it);
  }
  num_cached_blocks_.erase(request.req_id);
  req_to_rolling_snapshot_block_.erase(request.req_id);  // its last decode checkpoint stays
  auto slot = req_to_state_slot_.find(request.req_id);
  if (slot != req_to_state_slot_.end()) {
    slots_.Free(slot->second);
    req_to_state_slot_.erase(slot);
  }
}

const std::vector<int32_t>& KVCacheManager::get_block_ids(const std::string& req_id) const {
  static const std::vector<int32_t> kNone;
  auto it = req_to_blocks_.find(req_id);
  return it == req_to_blocks_.end() ? kNone : it->second;
}

std::optional<int32_t> KVCacheManager::get_state_slot(const std::string& req_id) const {
  auto it = req_to_state_slot_.find(req_id);
  if (it == req_to_state_slot_.end()) return std::nullopt;
  return it->second;
}

}  // namespace vllm
