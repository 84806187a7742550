#include "vllm/model_executor/layers/gdn.h"

#include <cmath>
#include <string>

#include "vt/error.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vllm::gdn {

GdnBlock::GdnBlock(const GdnDims& dims, GdnWeights weights, const ProjectionPlacement& placement)
    : dims_(dims), w_(std::move(weights)) {
  auto check = [&](const vt::Tensor& t, const char* name, vt::Shape shape, const char* meaning) {
    if (!t.defined() || t.shape() != shape) {
      throw vt::Error(std::string("gdn::GdnBlock: ") + name + " must be " + vt::ShapeToString(shape) + " (" + meaning +
                      "), got " + (t.defined() ? t.Describe() : "no tensor"));
    }
  };
  const int64_t H = dims.hidden_size, Hv = dims.num_value_heads;
  if (dims.num_key_heads < 1 || Hv % dims.num_key_heads != 0) {
    throw vt::Error("gdn::GdnBlock: value heads (" + std::to_string(Hv) + ") must be a multiple of key heads (" +
                    std::to_string(dims.num_key_heads) + ")");
  }
  check(w_.in_proj_qkv, "in_proj_qkv", {dims.conv_dim(), H},
        "[2 * key_heads * key_dim + value_heads * value_dim, hidden]");
  check(w_.in_proj_z, "in_proj_z", {dims.value_dim(), H}, "[value_heads * value_dim, hidden]");
  check(w_.in_proj_b, "in_proj_b", {Hv, H}, "[value_heads, hidden]");
  check(w_.in_proj_a, "in_proj_a", {Hv, H}, "[value_heads, hidden]");
  check(w_.conv1d, "conv1d", {dims.conv_dim(), dims.conv_kernel}, "[conv_dim, conv_kernel]");
  check(w_.A, "A", {Hv}, "[value_heads]");
  check(w_.dt_bias, "dt_bias", {Hv}, "[value_heads]");
  check(w_.norm, "norm", {dims.value_head_dim}, "[value_dim]");
  check(w_.out_proj, "out_proj", {H, dims.value_dim()}, "[hidden, value_heads * value_dim]");
  in_proj_ = MergedProjection("gdn::GdnBlock",
                              {{"in_proj_qkv", std::move(w_.in_proj_qkv)},
                               {"in_proj_z", std::move(w_.in_proj_z)},
                               {"in_proj_b", std::move(w_.in_proj_b)},
                               {"in_proj_a", std::move(w_.in_proj_a)}},
                              placement);
}

void GdnBlock::Forward(const vt::Tensor& x, const AttnMetadata& meta, const LayerGdnState& state,
                       const vt::Tensor& out, vt::Tensor* projected_out) const {
  vt::reach::Hit("gdn::GdnBlock");
  const int64_t T = x.size(0), Hv = dims_.num_value_heads, Dv = dims_.value_head_dim;
  // [T, C | Hv*Dv | Hv | Hv]: the qkv, z, b and a projections of x side by side;
  // each consumer reads its columns through a view whose rows are strided by W.
  const int64_t W = in_proj_.out_features();
  vt::Tensor projected = vt::Tensor::Empty({T, W}, x.dtype(), x.device());
  in_proj_.Forward(x, projected);
  if (projected_out != nullptr) *projected_out = projected;
  const vt::Tensor z_columns = in_proj_.Columns(projected, kZ);
  const vt::Tensor z = z_columns.AsStrided({T, Hv, Dv}, {W, Dv, 1}, z_columns.offset());  // [T, Hv, Dv]
  if (meta.max_query_len == 1) {
    // A decode step: conv, norms, gates, delta rule and gated norm as one op (two
    // launches on a GPU instead of six).
    const vt::Tensor core = vt::Tensor::Empty({T, Hv, Dv}, x.dtype(), x.device());
    vt::GdnDecode({.mixed = in_proj_.Columns(projected, kQkv),
                   .conv_weight = w_.conv1d,
                   .conv_states = state.conv_states,
                   .a = in_proj_.Columns(projected, kA),
                   .b = in_proj_.Columns(projected, kB),
                   .A = w_.A,
                   .dt_bias = w_.dt_bias,
                   .states = state.ssm_states,
                   .state_slot_ids = meta.state_slot_ids,
                   .z = z,
                   .norm_weight = w_.norm,
                   .out = core,
                   .key_heads = dims_.num_key_heads,
                   .key_dim = dims_.key_head_dim,
                   .eps = dims_.rms_norm_eps,
                   .tiled_value_heads = dims_.tiled_value_heads});
    vt::MatMul({.x = core.View({T, Hv * Dv}), .w = w_.out_proj, .out = out});
    return;
  }
  const vt::Tensor core = Recur(projected, meta, state);  // [T, Hv, Dv]
  vt::GatedRmsNorm({.x = core, .z = z, .weight = w_.norm, .out = core, .eps = dims_.rms_norm_eps});
  vt::MatMul({.x = core.View({T, Hv * Dv}), .w = w_.out_proj, .out = out});
}

void GdnBlock::ReplayState(const vt::Tensor& projected, const AttnMetadata& meta, const LayerGdnState& state) const {
  if (projected.ndim() != 2 || projected.size(1) != in_proj_.out_features()) {
    throw vt::Error("gdn::GdnBlock::ReplayState: projected must be [T, " + std::to_string(in_proj_.out_features()) +
                    "] (Forward's projected_out rows), got " + projected.Describe());
  }
  Recur(projected, meta, state);
}

vt::Tensor GdnBlock::Recur(const vt::Tensor& projected, const AttnMetadata& meta, const LayerGdnState& state) const {
  const int64_t T = projected.size(0), Hk = dims_.num_key_heads, Hv = dims_.num_value_heads;
  const int64_t Dk = dims_.key_head_dim, Dv = dims_.value_head_dim, C = dims_.conv_dim();
  const vt::DType dt = projected.dtype();
  const vt::Device dev = projected.device();
  const bool all_decodes = meta.max_query_len == 1;
  const vt::Tensor mixed = in_proj_.Columns(projected, kQkv);  // raw [q | k | v] before the conv, [T, C]
  vt::Tensor conv = vt::Tensor::Empty({T, C}, dt, dev);
  if (all_decodes) {
    vt::CausalConv1dUpdate({.x = mixed, .weight = w_.conv1d, .conv_states = state.conv_states,
                            .state_slot_ids = meta.state_slot_ids, .out = conv, .apply_silu = true});
  } else {
    vt::CausalConv1d({.x = mixed, .weight = w_.conv1d, .conv_states = state.conv_states,
                      .query_start_loc = meta.query_start_loc, .state_slot_ids = meta.state_slot_ids, .out = conv,
                      .apply_silu = true});
  }
  // Views of the conv output: q [T, Hk, Dk], k [T, Hk, Dk], v [T, Hv, Dv], rows strided by C.
  const int64_t key_dim = dims_.key_dim();
  vt::Tensor q = conv.AsStrided({T, Hk, Dk}, {C, Dk, 1}, conv.offset());
  vt::Tensor k = conv.AsStrided({T, Hk, Dk}, {C, Dk, 1}, conv.offset() + key_dim);
  vt::Tensor v = conv.AsStrided({T, Hv, Dv}, {C, Dv, 1}, conv.offset() + 2 * key_dim);
  vt::Tensor qn = vt::Tensor::Empty({T, Hk, Dk}, dt, dev), kn = vt::Tensor::Empty({T, Hk, Dk}, dt, dev);
  vt::L2Norm({.x = q, .out = qn, .eps = 1e-6f, .scale = 1.0f / std::sqrt(static_cast<float>(Dk))});
  vt::L2Norm({.x = k, .out = kn, .eps = 1e-6f, .scale = 1.0f});

  const vt::Tensor a = in_proj_.Columns(projected, kA), b = in_proj_.Columns(projected, kB);  // [T, Hv]
  vt::Tensor g = vt::Tensor::Empty({T, Hv}, vt::DType::kF32, dev);
  vt::Tensor beta = vt::Tensor::Empty({T, Hv}, vt::DType::kF32, dev);
  vt::GdnGates({.a = a, .b = b, .A = w_.A, .dt_bias = w_.dt_bias, .g = g, .beta = beta});

  vt::Tensor core = vt::Tensor::Empty({T, Hv, Dv}, dt, dev);
  const vt::GdnArgs args{.q = qn,
                         .k = kn,
                         .v = v,
                         .g = g,
                         .beta = beta,
                         .states = state.ssm_states,
                         .query_start_loc = meta.query_start_loc,
                         .state_slot_ids = meta.state_slot_ids,
                         .out = core,
                         .tiled_value_heads = dims_.tiled_value_heads};
  if (all_decodes) {
    vt::GdnRecurrent(args);
  } else {
    vt::GdnChunkedPrefill(args);
  }
  return core;
}

}  // namespace vllm::gdn
