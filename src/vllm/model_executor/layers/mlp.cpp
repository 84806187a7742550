#include "vllm/model_executor/layers/mlp.h"

#include <string>

#include "vt/error.h"
#include "vt/ops.h"

namespace vllm {

GatedMlp::GatedMlp(MlpWeights weights, const ProjectionPlacement& placement) {
  const vt::Tensor& g = weights.gate_proj;
  if (!g.defined() || g.ndim() != 2 || weights.up_proj.shape() != g.shape() || !weights.down_proj.defined() ||
      weights.down_proj.shape() != vt::Shape{g.size(1), g.size(0)}) {
    throw vt::Error("GatedMlp: expected gate_proj and up_proj [I, H] and down_proj [H, I], got gate_proj " +
                    g.Describe() + ", up_proj " + weights.up_proj.Describe() + ", down_proj " +
                    weights.down_proj.Describe());
  }
  down_proj_ = std::move(weights.down_proj);
  gate_up_proj_ = MergedProjection(
      "GatedMlp", {{"gate_proj", std::move(weights.gate_proj)}, {"up_proj", std::move(weights.up_proj)}}, placement);
}

void GatedMlp::Forward(const vt::Tensor& x, const vt::Tensor& out) const {
  const int64_t T = x.size(0), I = down_proj_.size(1);
  vt::Tensor gate_up = vt::Tensor::Empty({T, 2 * I}, x.dtype(), x.device());  // [T, I | I]
  gate_up_proj_.Forward(x, gate_up);
  // silu(gate) * up goes to a fresh contiguous tensor, so down_proj reads dense rows
  // as it did before the merge.
  vt::Tensor act = vt::Tensor::Empty({T, I}, x.dtype(), x.device());  // [T, I]
  vt::SiluMul({.gate = gate_up_proj_.Columns(gate_up, kGate), .up = gate_up_proj_.Columns(gate_up, kUp), .out = act});
  vt::MatMul({.x = act, .w = down_proj_, .out = out});
}

SparseMoe::SparseMoe(MoeWeights weights, int64_t num_experts_per_tok, bool renormalize,
                     const ProjectionPlacement& placement, int64_t expert_begin)
    : w_(std::move(weights)), top_k_(num_experts_per_tok), renormalize_(renormalize), expert_begin_(expert_begin) {
  const int64_t E = w_.router.defined() ? w_.router.size(0) : 0;
  num_experts_ = E;
  if (E < 1 || w_.experts_gate.ndim() != 3 || expert_begin_ < 0 || expert_begin_ + w_.experts_gate.size(0) > E ||
      top_k_ < 1 || top_k_ > E) {
    throw vt::Error("SparseMoe: router " + w_.router.Describe() + " and experts " + w_.experts_gate.Describe() +
                    " from expert " + std::to_string(expert_begin_) + " disagree, or top-k " + std::to_string(top_k_) +
                    " is out of range");
  }
  std::vector<ProjectionPart> router_parts = {{"gate", std::move(w_.router)}};
  if (w_.shared_expert) {
    shared_.emplace(*std::move(w_.shared_expert), placement);
    w_.shared_expert.reset();
    if (!w_.shared_expert_gate.defined()) throw vt::Error("SparseMoe: shared expert without its gate");
    router_parts.push_back({"shared_expert_gate", std::move(w_.shared_expert_gate)});
  }
  router_ = MergedProjection("SparseMoe", std::move(router_parts), placement);
}

void SparseMoe::Forward(const vt::Tensor& x, const vt::Tensor& out) const {
  const int64_t T = x.size(0);
  const vt::Device dev = x.device();
  vt::Tensor logits = vt::Tensor::Empty({T, router_.out_features()}, x.dtype(), dev);  // [T, E | 1]
  router_.Forward(x, logits);
  const vt::Tensor router_logits = router_.Columns(logits, 0);  // [T, E], rows strided by E (+ 1)
  vt::Tensor weights = vt::Tensor::Empty({T, top_k_}, vt::DType::kF32, dev);
  vt::Tensor ids = vt::Tensor::Empty({T, top_k_}, vt::DType::kI32, dev);
  vt::MoeRouter({.logits = router_logits, .topk_weights = weights, .topk_ids = ids, .renormalize = renormalize_});
  vt::MoeExpertsArgs experts{.x = x,
                             .w_gate = w_.experts_gate,
                             .w_up = w_.experts_up,
                             .w_down = w_.experts_down,
                             .topk_weights = weights,
                             .topk_ids = ids,
                             .out = out};
  if (w_.experts_gate.size(0) != num_experts_) {  // expert parallelism: this rank's slice
    experts.expert_begin = expert_begin_;
    experts.num_experts = num_experts_;
  }
  if (shared_) {
    experts.shared_w_gate = shared_->gate_proj();
    experts.shared_w_up = shared_->up_proj();
    experts.shared_w_down = shared_->down_proj();
    experts.shared_gate_logits = router_.Columns(logits, 1);  // [T, 1]
  }
  vt::MoeExperts(experts);
}

}  // namespace vllm
