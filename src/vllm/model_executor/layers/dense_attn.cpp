#include "vllm/model_executor/layers/dense_attn.h"

#include <cmath>
#include <string>

#include "vt/error.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vllm::dense_attn {

AttnBlock::AttnBlock(const AttnDims& dims, AttnWeights weights, const ProjectionPlacement& placement)
    : dims_(dims), w_(std::move(weights)) {
  const int64_t H = dims.hidden_size, D = dims.head_dim;
  auto check = [](const vt::Tensor& t, const char* name, const vt::Shape& shape, const char* meaning) {
    if (!t.defined() || t.shape() != shape) {
      throw vt::Error(std::string("dense_attn::AttnBlock: ") + name + " must be " + vt::ShapeToString(shape) + " (" +
                      meaning + "), got " + (t.defined() ? t.Describe() : "no tensor"));
    }
  };
  check(w_.q_proj, "q_proj", {dims.num_heads * D * (dims.output_gate ? 2 : 1), H},
        dims.output_gate ? "[heads * head_dim * 2 (query and gate), hidden]" : "[heads * head_dim, hidden]");
  check(w_.k_proj, "k_proj", {dims.num_kv_heads * D, H}, "[kv_heads * head_dim, hidden]");
  check(w_.v_proj, "v_proj", {dims.num_kv_heads * D, H}, "[kv_heads * head_dim, hidden]");
  check(w_.o_proj, "o_proj", {H, dims.num_heads * D}, "[hidden, heads * head_dim]");
  if (w_.q_norm.defined() || w_.k_norm.defined()) {
    check(w_.q_norm, "q_norm", {D}, "[head_dim]");
    check(w_.k_norm, "k_norm", {D}, "[head_dim]");
  }
  if (dims.rotary_dim < 0 || dims.rotary_dim > D || dims.rotary_dim % 2 != 0) {
    throw vt::Error("dense_attn::AttnBlock: rotary_dim " + std::to_string(dims.rotary_dim) +
                    " must be even and within [0, head_dim " + std::to_string(D) + "]");
  }
  qkv_proj_ = MergedProjection("dense_attn::AttnBlock",
                               {{"q_proj", std::move(w_.q_proj)},
                                {"k_proj", std::move(w_.k_proj)},
                                {"v_proj", std::move(w_.v_proj)}},
                               placement);
}

void AttnBlock::Forward(const vt::Tensor& x, const AttnMetadata& meta, const LayerKvCache& cache,
                        const vt::Tensor& out) const {
  vt::reach::Hit("dense_attn::AttnBlock");
  const int64_t T = x.size(0), Nq = dims_.num_heads, Nkv = dims_.num_kv_heads, D = dims_.head_dim;
  const vt::DType dt = x.dtype();
  const vt::Device dev = x.device();

  // [T, Nq*D*(1|2) | Nkv*D | Nkv*D]: the q, k and v projections side by side; the
  // heads below are views whose token rows are strided by W.
  const int64_t W = qkv_proj_.out_features();
  vt::Tensor projected = vt::Tensor::Empty({T, W}, dt, dev);
  qkv_proj_.Forward(x, projected);
  const vt::Tensor q_out = qkv_proj_.Columns(projected, kQ);  // [T, Nq*D*(1|2)]
  auto heads = [&](size_t part, int64_t num_heads) {          // [T, num_heads, D]
    return projected.AsStrided({T, num_heads, D}, {W, D, 1}, projected.offset() + qkv_proj_.begin(part));
  };
  const vt::Tensor k3 = heads(kK, Nkv), v3 = heads(kV, Nkv);

  vt::Tensor query, gate;
  if (dims_.output_gate) {
    query = vt::Tensor::Empty({T, Nq, D}, dt, dev);
    gate = vt::Tensor::Empty({T, Nq * D}, dt, dev);
    vt::AttnGateSplit({.qg = q_out, .query = query, .gate = gate, .head_dim = D});
  } else {
    query = heads(kQ, Nq);
  }
  if (w_.q_norm.defined()) {
    vt::RmsNorm({.x = query, .weight = w_.q_norm, .out = query, .eps = dims_.rms_norm_eps,
                 .weight_offset = dims_.qk_norm_weight_offset});
    vt::RmsNorm({.x = k3, .weight = w_.k_norm, .out = k3, .eps = dims_.rms_norm_eps,
                 .weight_offset = dims_.qk_norm_weight_offset});
  }
  // RopeNeox returns before any kernel when rotary_dim is 0 (NoPE).
  vt::RopeNeox({.x = query, .positions = meta.positions, .rotary_dim = dims_.rotary_dim, .theta = dims_.rope_theta});
  vt::RopeNeox({.x = k3, .positions = meta.positions, .rotary_dim = dims_.rotary_dim, .theta = dims_.rope_theta});

  vt::WriteKvCache({.k = k3, .v = v3, .k_cache = cache.k_cache, .v_cache = cache.v_cache,
                    .slot_mapping = meta.slot_mapping});
  vt::Tensor attn = vt::Tensor::Empty({T, Nq, D}, dt, dev);
  vt::PagedAttention({.q = query,
                      .k_cache = cache.k_cache,
                      .v_cache = cache.v_cache,
                      .block_tables = meta.block_tables,
                      .seq_lens = meta.seq_lens,
                      .query_start_loc = meta.query_start_loc,
                      .out = attn,
                      .scale = 1.0f / std::sqrt(static_cast<float>(D)),
                      .max_query_len = meta.max_query_len,
                      .max_seq_len = meta.max_seq_len});
  vt::Tensor attn2 = attn.View({T, Nq * D});
  if (dims_.output_gate) vt::SigmoidMul({.x = attn2, .gate = gate, .out = attn2});
  vt::MatMul({.x = attn2, .w = w_.o_proj, .out = out});
}

}  // namespace vllm::dense_attn
