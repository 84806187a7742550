// CPU kernel of GdnDecode: the unfused ops one after another (CausalConv1dUpdate,
// L2Norm of q and k, GdnGates, GdnRecurrent, GatedRmsNorm), which is the op's
// definition. The GPU fuses them to save launches in a decode step; on the CPU each op
// already runs at the memory speed of its data and the launches cost nothing.
#include <cmath>
#include <vector>

#include "vt/ops.h"

namespace vt::cpu {
namespace {

void GdnDecodeCpu(const GdnDecodeArgs& a) {
  const int64_t batch = a.mixed.size(0), channels = a.mixed.size(1);
  const int64_t hk = a.key_heads, dk = a.key_dim, hv = a.out.size(1), dv = a.out.size(2);
  const DType dtype = a.mixed.dtype();
  const Tensor conv = Tensor::Empty({batch, channels}, dtype, kCpu);  // [B, C]
  CausalConv1dUpdate({.x = a.mixed, .weight = a.conv_weight, .conv_states = a.conv_states,
                      .state_slot_ids = a.state_slot_ids, .out = conv, .apply_silu = true});
  // Views of the conv output: q, k [B, Hk, Dk], v [B, Hv, Dv], rows strided by C.
  const int64_t key_width = hk * dk;
  const Tensor q = conv.AsStrided({batch, hk, dk}, {channels, dk, 1}, conv.offset());
  const Tensor k = conv.AsStrided({batch, hk, dk}, {channels, dk, 1}, conv.offset() + key_width);
  const Tensor v = conv.AsStrided({batch, hv, dv}, {channels, dv, 1}, conv.offset() + 2 * key_width);
  const Tensor qn = Tensor::Empty({batch, hk, dk}, dtype, kCpu), kn = Tensor::Empty({batch, hk, dk}, dtype, kCpu);
  L2Norm({.x = q, .out = qn, .eps = 1e-6f, .scale = 1.0f / std::sqrt(static_cast<float>(dk))});
  L2Norm({.x = k, .out = kn, .eps = 1e-6f, .scale = 1.0f});
  const Tensor g = Tensor::Empty({batch, hv}, DType::kF32, kCpu), beta = Tensor::Empty({batch, hv}, DType::kF32, kCpu);
  GdnGates({.a = a.a, .b = a.b, .A = a.A, .dt_bias = a.dt_bias, .g = g, .beta = beta});
  std::vector<int32_t> starts(static_cast<size_t>(batch + 1));
  for (int64_t i = 0; i <= batch; ++i) starts[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const Tensor core = Tensor::Zeros({batch, hv, dv}, dtype, kCpu);  // skipped rows: 0, so out is 0
  GdnRecurrent({.q = qn,
                .k = kn,
                .v = v,
                .g = g,
                .beta = beta,
                .states = a.states,
                .query_start_loc = Tensor::FromVector(starts, {batch + 1}),
                .state_slot_ids = a.state_slot_ids,
                .out = core,
                .tiled_value_heads = a.tiled_value_heads});
  GatedRmsNorm({.x = core, .z = a.z, .weight = a.norm_weight, .out = a.out, .eps = a.eps});
}

}  // namespace

VT_REGISTER_KERNEL(GdnDecode, kCPU, GdnDecodeCpu);

}  // namespace vt::cpu
