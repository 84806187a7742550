#include "vllm/worker/cache_engine.h"

#include "vt/ops.h"

namespace vllm {

int64_t KvBlockBytes(const std::vector<LayerCacheSpec>& spec, int64_t block_size, vt::DType cache_dtype) {
  int64_t bytes = 0;
  for (const LayerCacheSpec& s : spec) {
    if (s.kind == LayerCacheSpec::Kind::kFullAttention) {
      bytes += vt::BytesFor(cache_dtype, 2 * block_size * s.num_kv_heads * s.head_dim);
    }
  }
  return bytes;
}

int64_t StateSlotBytes(const std::vector<LayerCacheSpec>& spec) {
  int64_t bytes = 0;
  for (const LayerCacheSpec& s : spec) {
    if (s.kind == LayerCacheSpec::Kind::kGatedDeltaNet) {
      bytes += 4 * (s.conv_dim * (s.conv_kernel - 1) + s.num_value_heads * s.key_head_dim * s.value_head_dim);
    }
  }
  return bytes;
}

bool HasRecurrentLayers(const std::vector<LayerCacheSpec>& spec) { return StateSlotBytes(spec) > 0; }

namespace {

LayerGdnState ZeroedStates(const LayerCacheSpec& s, int64_t num, vt::Device device) {
  return {.conv_states = vt::Tensor::Zeros({num, s.conv_dim, s.conv_kernel - 1}, vt::DType::kF32, device),
          .ssm_states = vt::Tensor::Zeros({num, s.num_value_heads, s.key_head_dim, s.value_head_dim},
                                          vt::DType::kF32, device)};
}

}  // namespace

ModelCaches AllocateCaches(const std::vector<LayerCacheSpec>& spec, int64_t num_blocks, int64_t block_size,
                           int64_t num_state_slots, vt::DType cache_dtype, vt::Device device,
                           int64_t num_state_snapshots) {
  ModelCaches caches;
  caches.kv.resize(spec.size());
  caches.gdn.resize(spec.size());
  caches.gdn_snapshots.resize(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    const LayerCacheSpec& s = spec[i];
    if (s.kind == LayerCacheSpec::Kind::kFullAttention) {
      vt::Tensor both = vt::Tensor::Empty({num_blocks, 2, block_size, s.num_kv_heads, s.head_dim}, cache_dtype, device);
      caches.kv[i] = {both.Select(1, 0), both.Select(1, 1)};
    } else {
      // Zeroed so a slot's first use starts from a clean state even before the
      // runner's per-sequence reset.
      caches.gdn[i] = ZeroedStates(s, num_state_slots, device);
      if (num_state_snapshots > 0) caches.gdn_snapshots[i] = ZeroedStates(s, num_state_snapshots, device);
    }
  }
  return caches;
}

}  // namespace vllm
