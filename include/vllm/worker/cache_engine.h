// Allocates a model's caches on its device: paged K/V for every full-attention
// layer and recurrent-state slots for every Gated DeltaNet layer.
//
// Each attention layer gets one allocation [num_blocks, 2, block_size, Nkv, D];
// K and V are the strided views Select(1, 0) and Select(1, 1) (the ops address
// caches only through view strides).
#pragma once

#include <cstdint>
#include <vector>

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"

namespace vllm {

// Bytes of one KV block over all attention layers, and of one state slot over all
// GDN layers.
int64_t KvBlockBytes(const std::vector<LayerCacheSpec>& spec, int64_t block_size, vt::DType cache_dtype);
int64_t StateSlotBytes(const std::vector<LayerCacheSpec>& spec);
bool HasRecurrentLayers(const std::vector<LayerCacheSpec>& spec);

// num_state_snapshots: state snapshots for hybrid prefix caching (gdn_snapshots).
ModelCaches AllocateCaches(const std::vector<LayerCacheSpec>& spec, int64_t num_blocks, int64_t block_size,
                           int64_t num_state_slots, vt::DType cache_dtype, vt::Device device,
                           int64_t num_state_snapshots = 0);

}  // namespace vllm
