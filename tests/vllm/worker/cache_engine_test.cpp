// Cache allocation: K and V of each attention layer are strided views into one
// allocation; GDN layers get zeroed f32 state slots; sizes are reported exactly.
#include <gtest/gtest.h>

#include "vllm/worker/cache_engine.h"

namespace vllm {
namespace {

std::vector<LayerCacheSpec> HybridSpec() {
  const LayerCacheSpec gdn{.kind = LayerCacheSpec::Kind::kGatedDeltaNet,
                           .conv_dim = 40,
                           .conv_kernel = 4,
                           .num_value_heads = 2,
                           .key_head_dim = 8,
                           .value_head_dim = 4};
  const LayerCacheSpec attn{.kind = LayerCacheSpec::Kind::kFullAttention, .num_kv_heads = 2, .head_dim = 16};
  return {gdn, gdn, attn};
}

TEST(CacheEngineTest, SizesOfBlocksAndSlots) {
  EXPECT_EQ(KvBlockBytes(HybridSpec(), 16, vt::DType::kBF16), 2 * 16 * 2 * 16 * 2);
  EXPECT_EQ(KvBlockBytes(HybridSpec(), 16, vt::DType::kF32), 2 * 16 * 2 * 16 * 4);
  EXPECT_EQ(StateSlotBytes(HybridSpec()), 2 * 4 * (40 * 3 + 2 * 8 * 4));
  EXPECT_TRUE(HasRecurrentLayers(HybridSpec()));
  EXPECT_FALSE(HasRecurrentLayers({HybridSpec()[2]}));
}

TEST(CacheEngineTest, LayersGetTheirKindOfCache) {
  const ModelCaches caches = AllocateCaches(HybridSpec(), 5, 16, 3, vt::DType::kBF16, vt::kCpu);
  ASSERT_EQ(caches.kv.size(), 3u);
  ASSERT_EQ(caches.gdn.size(), 3u);
  for (int layer : {0, 1}) {
    EXPECT_FALSE(caches.kv[layer].k_cache.defined());
    EXPECT_EQ(caches.gdn[layer].conv_states.shape(), (vt::Shape{3, 40, 3}));
    EXPECT_EQ(caches.gdn[layer].ssm_states.shape(), (vt::Shape{3, 2, 8, 4}));
    EXPECT_EQ(caches.gdn[layer].ssm_states.dtype(), vt::DType::kF32);
    for (float v : caches.gdn[layer].ssm_states.ToFloatVector()) ASSERT_EQ(v, 0.0f);
    for (float v : caches.gdn[layer].conv_states.ToFloatVector()) ASSERT_EQ(v, 0.0f);
  }
  const LayerKvCache& kv = caches.kv[2];
  EXPECT_FALSE(caches.gdn[2].conv_states.defined());
  EXPECT_EQ(kv.k_cache.shape(), (vt::Shape{5, 16, 2, 16}));
  EXPECT_EQ(kv.k_cache.dtype(), vt::DType::kBF16);
  // [num_blocks, 2, block_size, Nkv, D] storage: block stride covers K and V.
  EXPECT_EQ(kv.k_cache.strides(), (vt::Shape{2 * 16 * 2 * 16, 2 * 16, 16, 1}));
  EXPECT_EQ(kv.v_cache.strides(), kv.k_cache.strides());
  EXPECT_EQ(kv.v_cache.offset() - kv.k_cache.offset(), 16 * 2 * 16);
  EXPECT_EQ(kv.k_cache.storage(), kv.v_cache.storage());
}

}  // namespace
}  // namespace vllm
