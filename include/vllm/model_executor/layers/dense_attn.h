// dense_attn::AttnBlock: THE full-attention path for every model, every backend,
// prefill and decode alike (docs/architecture.md §2, docs/qwen35.md §2).
//
//   x [T, H] -> q_proj | k_proj | v_proj (one MergedProjection) -> projected [T, Nq*2D | Nkv*D | Nkv*D]
//   projected[:, q] --AttnGateSplit--> query [T, Nq, D], gate [T, Nq*D]
//                     (or [T, Nq*D] viewed as query when there is no gate)
//   projected[:, k], projected[:, v] viewed as k, v [T, Nkv, D]
//   query, k: per-head RMSNorm (plain or 1+w) -> partial NeoX RoPE (skipped at width 0)
//   WriteKvCache(k, v) -> PagedAttention(query) -> attn [T, Nq, D]
//   attn *= sigmoid(gate) (when gated) -> o_proj -> out [T, H]
//
// Qwen3 (no gate, plain norms, head_dim 128, full rotary) and Qwen3.5 (gate, 1+w
// norms, head_dim 256, rotary 64) differ only in AttnDims. Each Forward counts one
// reach of "dense_attn::AttnBlock".
#pragma once

#include <cstdint>

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/layers/merged_projection.h"
#include "vt/tensor.h"

namespace vllm::dense_attn {

struct AttnDims {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // 0 = no rotation
  float rope_theta = 10000.0f;
  float rms_norm_eps = 1e-6f;
  bool output_gate = false;       // q_proj also emits a per-head gate
  float qk_norm_weight_offset = 0;  // 1 for zero-centred (1 + w) norms
};

struct AttnWeights {
  vt::Tensor q_proj;  // [Nq * D * (gate ? 2 : 1), H]
  vt::Tensor k_proj;  // [Nkv * D, H]
  vt::Tensor v_proj;  // [Nkv * D, H]
  vt::Tensor o_proj;  // [H, Nq * D]
  vt::Tensor q_norm;  // [D] (undefined: no q/k norm)
  vt::Tensor k_norm;  // [D]
};

class AttnBlock {
 public:
  // q_proj, k_proj and v_proj go to placement.device through one MergedProjection
  // (merged there when the placement's policy and their dtypes allow); the other
  // weights must already be on that device.
  AttnBlock(const AttnDims& dims, AttnWeights weights, const ProjectionPlacement& placement);

  // x [T, H] (already normalised), out [T, H] of x's dtype.
  void Forward(const vt::Tensor& x, const AttnMetadata& meta, const LayerKvCache& cache,
               const vt::Tensor& out) const;

  const AttnDims& dims() const { return dims_; }

 private:
  // Columns of qkv_proj_'s output, in this order.
  enum QkvProj : size_t { kQ, kK, kV };

  AttnDims dims_;
  AttnWeights w_;  // q_proj, k_proj, v_proj are moved into qkv_proj_ (empty here)
  MergedProjection qkv_proj_;
};

}  // namespace vllm::dense_attn
