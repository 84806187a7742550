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

LayerGdnState States(const LayerCacheSpec& s, int64_t num, vt::Device device, bool zeroed) {
  auto make = [&](const vt::Shape& shape) {
    return zeroed ? vt::Tensor::Zeros(shape, vt::DType::kF32, device) : vt::Tensor::Empty(shape, vt::DType::kF32, device);
  };
  return {.conv_states = make({num, s.conv_dim, s.conv_kernel - 1}),
          .ssm_states = make({num, s.num_value_heads, s.key_head_dim, s.value_head_dim})};
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
      caches.gdn[i] = States(s, num_state_slots, device, /*zeroed=*/true);
      // A snapshot is read only after a save wrote it (state_snapshot_pool.h: a hit
      // names a saved snapshot), so the pool (0.5 GiB by default) is not written here:
      // zeroing it cost an engine's start about 0.6 s on a 2-core VM.
      if (num_state_snapshots > 0) caches.gdn_snapshots[i] = States(s, num_state_snapshots, device, /*zeroed=*/false);
    }
  }
  return caches;
}

}  // namespace vllm
