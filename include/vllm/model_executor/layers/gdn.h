// gdn::GdnBlock: THE Gated DeltaNet path (docs/qwen35.md §3), prefill and decode alike.
//
//   x [T, H] -> in_proj (qkv | z | b | a, one MergedProjection) -> projected [T, conv_dim + value_dim + 2 Hv]
//   mixed = projected[:, qkv] [T, conv_dim] -> causal conv + SiLU (state in/out)
//            -> q [T, Hk, Dk], k [T, Hk, Dk], v [T, Hv, Dv]   (views of the conv output)
//   q, k: L2 norm (q also scaled by 1/sqrt(Dk))
//   a, b = projected[:, a], projected[:, b] [T, Hv] -> g = A softplus(a + dt_bias), beta = sigmoid(b)
//   gated delta rule (state [Hv, Dk, Dv] f32 per sequence slot) -> o [T, Hv, Dv]
//   z = projected[:, z] [T, Hv, Dv];  y = RMSNorm(o) * w * silu(z)  ->  out_proj -> out [T, H]
//
// A batch of single-token decodes takes the fused decode op (GdnDecode: conv update,
// norms, gates, delta rule and gated norm; ReplayState's decode rows the unfused
// CausalConv1dUpdate and GdnRecurrent); any batch with a prompt chunk takes the
// varlen ops (CausalConv1d, GdnChunkedPrefill) for all its sequences, decodes
// included (a chunk of one).
// A new sequence's state slot must have been zeroed by the caller. Each Forward
// counts one reach of "gdn::GdnBlock".
#pragma once

#include <cstdint>

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/layers/merged_projection.h"
#include "vt/tensor.h"

namespace vllm::gdn {

struct GdnDims {
  int64_t hidden_size = 0;
  int64_t num_key_heads = 0;    // Hk
  int64_t num_value_heads = 0;  // Hv
  int64_t key_head_dim = 0;     // Dk
  int64_t value_head_dim = 0;   // Dv
  int64_t conv_kernel = 4;      // K
  float rms_norm_eps = 1e-6f;
  bool tiled_value_heads = false;  // GGUF's order: value head j reads key head j % Hk

  int64_t key_dim() const { return num_key_heads * key_head_dim; }
  int64_t value_dim() const { return num_value_heads * value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

struct GdnWeights {
  vt::Tensor in_proj_qkv;  // [conv_dim, H]
  vt::Tensor in_proj_z;    // [value_dim, H]
  vt::Tensor in_proj_b;    // [Hv, H]
  vt::Tensor in_proj_a;    // [Hv, H]
  vt::Tensor conv1d;       // [conv_dim, K]
  vt::Tensor A;            // [Hv] = -exp(A_log)
  vt::Tensor dt_bias;      // [Hv]
  vt::Tensor norm;         // [Dv], plain weight
  vt::Tensor out_proj;     // [H, value_dim]
};

class GdnBlock {
 public:
  // The four input projections go to placement.device through one MergedProjection
  // (merged there when the placement's policy and their dtypes allow); the other
  // weights must already be on that device.
  GdnBlock(const GdnDims& dims, GdnWeights weights, const ProjectionPlacement& placement);

  // x [T, H] (already normalised), out [T, H] of x's dtype. With projected_out, the
  // in_proj output [T, W] (what ReplayState takes) is kept there.
  void Forward(const vt::Tensor& x, const AttnMetadata& meta, const LayerGdnState& state, const vt::Tensor& out,
               vt::Tensor* projected_out = nullptr) const;
  // Advances the conv and recurrent state of meta's sequences over rows of an earlier
  // Forward's projected_out ([T', W], in meta's varlen order), as that Forward did
  // over them, without the output: speculative decoding lands a sequence's state on
  // its last accepted token by restoring the state from before the step and
  // replaying the accepted rows.
  void ReplayState(const vt::Tensor& projected, const AttnMetadata& meta, const LayerGdnState& state) const;

  const GdnDims& dims() const { return dims_; }

 private:
  // Columns of in_proj_'s output, in this order.
  enum InProj : size_t { kQkv, kZ, kB, kA };

  // The conv, norms, gates and delta rule over projected [T, W]: the core output
  // [T, Hv, Dv] (before the gated norm); the states advance.
  vt::Tensor Recur(const vt::Tensor& projected, const AttnMetadata& meta, const LayerGdnState& state) const;

  GdnDims dims_;
  GdnWeights w_;  // in_proj_* are moved into in_proj_ (empty here)
  MergedProjection in_proj_;
};

}  // namespace vllm::gdn
