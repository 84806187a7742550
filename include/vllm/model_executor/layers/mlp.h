// Feed-forward blocks: the SwiGLU MLP and the sparse MoE block (docs/qwen35.md §4.3-4.4).
//
//   GatedMlp:  out = down( silu(gate(x)) * up(x) ); gate and up are one MergedProjection
//              writing [T, I | I], SiluMul reads its two column views into [T, I]
//   SparseMoe: p = softmax(x Wr^T); top-k experts, renormalised;
//              out = sum_j w_j expert_j(x) + sigmoid(x w_sg) * shared(x), the shared
//              expert passed to vt::MoeExperts with the routed ones (one op: a GPU
//              runs it inside the routed experts' launches at batch 1)
#pragma once

#include <cstdint>
#include <optional>

#include "vllm/model_executor/layers/merged_projection.h"
#include "vt/tensor.h"

namespace vllm {

struct MlpWeights {
  vt::Tensor gate_proj;  // [I, H]
  vt::Tensor up_proj;    // [I, H]
  vt::Tensor down_proj;  // [H, I]
};

class GatedMlp {
 public:
  // gate_proj and up_proj go to placement.device through one MergedProjection
  // (merged there when the placement's policy and their dtypes allow); down_proj
  // must already be on that device.
  GatedMlp(MlpWeights weights, const ProjectionPlacement& placement);
  // x [T, H] -> out [T, H] of x's dtype.
  void Forward(const vt::Tensor& x, const vt::Tensor& out) const;
  // The weights on the placement's device (gate and up rows of one matrix when merged).
  vt::Tensor gate_proj() const { return gate_up_proj_.Weight(kGate); }
  vt::Tensor up_proj() const { return gate_up_proj_.Weight(kUp); }
  const vt::Tensor& down_proj() const { return down_proj_; }

 private:
  enum GateUpProj : size_t { kGate, kUp };  // columns of gate_up_proj_'s output

  MergedProjection gate_up_proj_;
  vt::Tensor down_proj_;  // [H, I]
};

struct MoeWeights {
  vt::Tensor router;        // [E, H]
  vt::Tensor experts_gate;  // [E, I, H]
  vt::Tensor experts_up;    // [E, I, H]
  vt::Tensor experts_down;  // [E, H, I]
  std::optional<MlpWeights> shared_expert;
  vt::Tensor shared_expert_gate;  // [1, H] (defined with shared_expert)
};

class SparseMoe {
 public:
  // placement is the shared expert's (GatedMlp); the other weights must already be
  // on placement.device. Expert parallelism: the experts_* hold the router's experts
  // [expert_begin, expert_begin + their count) only; the others are other ranks'.
  SparseMoe(MoeWeights weights, int64_t num_experts_per_tok, bool renormalize, const ProjectionPlacement& placement,
            int64_t expert_begin = 0);
  void Forward(const vt::Tensor& x, const vt::Tensor& out) const;

 private:
  MoeWeights w_;  // router and shared_expert_gate moved into router_
  // The router [E, H] and, with a shared expert, its gate [1, H]: one MatMul of
  // [T, E + 1] where the weights concatenate (GPUs), part 0 the router logits.
  MergedProjection router_;
  std::optional<GatedMlp> shared_;
  int64_t top_k_;
  bool renormalize_;
  int64_t expert_begin_;
  int64_t num_experts_;  // the router's E; w_.experts_* may hold a slice of them
};

}  // namespace vllm
