// The interface every model implements. The runner reaches a model only through
// ModelRegistry::Forward (models/model_registry.h).
#pragma once

#include <cstdint>
#include <vector>

#include "vllm/model_executor/forward_batch.h"
#include "vt/tensor.h"

namespace vllm {

// What one layer needs in the cache.
struct LayerCacheSpec {
  enum class Kind { kFullAttention, kGatedDeltaNet };
  Kind kind = Kind::kFullAttention;
  // Full attention: paged K and V of [Nkv, D] per token.
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  // Gated DeltaNet: conv state [conv_dim, K - 1] and SSM state [Hv, Dk, Dv], f32.
  int64_t conv_dim = 0;
  int64_t conv_kernel = 0;
  int64_t num_value_heads = 0;
  int64_t key_head_dim = 0;
  int64_t value_head_dim = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual int64_t vocab_size() const = 0;
  virtual vt::Device device() const = 0;
  virtual vt::DType activation_dtype() const = 0;
  virtual std::vector<LayerCacheSpec> cache_spec() const = 0;
  // Logits [N, vocab] f32 for the rows batch.logits_indices of the final hidden states.
  virtual vt::Tensor Forward(const ForwardBatch& batch, const ModelCaches& caches) const = 0;
};

}  // namespace vllm
