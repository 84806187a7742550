// Validation and dispatch of the mixture-of-experts ops: MoeRouter, MoeExperts.
#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

void MoeRouter(const MoeRouterArgs& args) {
  OpCheck check("MoeRouter",
                {{"logits", &args.logits}, {"topk_weights", &args.topk_weights}, {"topk_ids", &args.topk_ids}});
  check.Rank(args.logits, "logits", 2);
  check.FloatDType(args.logits, "logits");
  check.LastDimContiguous(args.logits, "logits");
  check.Rank(args.topk_weights, "topk_weights", 2);
  check.DType(args.topk_weights, "topk_weights", {DType::kF32});
  check.Contiguous(args.topk_weights, "topk_weights");
  const int64_t tokens = args.logits.size(0), experts = args.logits.size(1), k = args.topk_weights.size(1);
  check.Size(args.topk_weights, "topk_weights", 0, tokens, "tokens of logits");
  if (!(k >= 1 && k <= experts))
    check.Fail("top-k " + std::to_string(k) + " must be in [1, experts " + std::to_string(experts) + "]");
  check.DType(args.topk_ids, "topk_ids", {DType::kI32});
  check.Shape(args.topk_ids, "topk_ids", {tokens, k});
  check.Contiguous(args.topk_ids, "topk_ids");
  if (tokens == 0) return;
  Dispatch<OpId::kMoeRouter>(check.device().type, args);
}

void MoeExperts(const MoeExpertsArgs& args) {
  OpCheck check("MoeExperts", {{"x", &args.x},
                               {"w_gate", &args.w_gate},
                               {"w_up", &args.w_up},
                               {"w_down", &args.w_down},
                               {"topk_weights", &args.topk_weights},
                               {"topk_ids", &args.topk_ids},
                               {"out", &args.out}});
  check.Rank(args.x, "x", 2);
  check.FloatDType(args.x, "x");
  check.LastDimContiguous(args.x, "x");
  const int64_t tokens = args.x.size(0), hidden = args.x.size(1);
  check.Rank(args.w_gate, "w_gate", 3);
  check.WeightDType(args.w_gate, "w_gate");
  check.LastDimContiguous(args.w_gate, "w_gate");
  const int64_t experts = args.w_gate.size(0), inter = args.w_gate.size(1);
  check.Size(args.w_gate, "w_gate", 2, hidden, "hidden size of x");
  check.DType(args.w_up, "w_up", {args.w_gate.dtype()});
  check.SameShape(args.w_up, "w_up", args.w_gate, "w_gate");
  check.LastDimContiguous(args.w_up, "w_up");
  check.WeightDType(args.w_down, "w_down");
  check.Shape(args.w_down, "w_down", {experts, hidden, inter});
  check.LastDimContiguous(args.w_down, "w_down");
  check.Rank(args.topk_weights, "topk_weights", 2);
  check.DType(args.topk_weights, "topk_weights", {DType::kF32});
  check.Contiguous(args.topk_weights, "topk_weights");
  check.Size(args.topk_weights, "topk_weights", 0, tokens, "tokens of x");
  check.DType(args.topk_ids, "topk_ids", {DType::kI32});
  check.SameShape(args.topk_ids, "topk_ids", args.topk_weights, "topk_weights");
  check.Contiguous(args.topk_ids, "topk_ids");
  check.DType(args.out, "out", {args.x.dtype()});
  check.SameShape(args.out, "out", args.x, "x");
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.x, "x", false);
  if (args.num_experts != 0 && (args.expert_begin < 0 || args.expert_begin + experts > args.num_experts)) {
    check.Fail("the local experts [" + std::to_string(args.expert_begin) + ", " +
               std::to_string(args.expert_begin + experts) + ") of w_gate are not within num_experts " +
               std::to_string(args.num_experts));
  }
  if (args.num_experts == 0 && args.expert_begin != 0) {
    check.Fail("expert_begin " + std::to_string(args.expert_begin) + " needs num_experts (the model's expert count)");
  }
  if (args.shared_w_gate.defined() || args.shared_w_up.defined() || args.shared_w_down.defined() ||
      args.shared_gate_logits.defined()) {
    // All four or none; the constructor names an undefined one and a device mismatch.
    const OpCheck shared("MoeExperts", {{"x", &args.x},
                                        {"shared_w_gate", &args.shared_w_gate},
                                        {"shared_w_up", &args.shared_w_up},
                                        {"shared_w_down", &args.shared_w_down},
                                        {"shared_gate_logits", &args.shared_gate_logits}});
    shared.Rank(args.shared_w_gate, "shared_w_gate", 2);
    shared.WeightDType(args.shared_w_gate, "shared_w_gate");
    shared.Size(args.shared_w_gate, "shared_w_gate", 1, hidden, "hidden size of x");
    shared.LastDimContiguous(args.shared_w_gate, "shared_w_gate");
    shared.DType(args.shared_w_up, "shared_w_up", {args.shared_w_gate.dtype()});
    shared.SameShape(args.shared_w_up, "shared_w_up", args.shared_w_gate, "shared_w_gate");
    shared.LastDimContiguous(args.shared_w_up, "shared_w_up");
    shared.WeightDType(args.shared_w_down, "shared_w_down");
    shared.Shape(args.shared_w_down, "shared_w_down", {hidden, args.shared_w_gate.size(0)});
    shared.LastDimContiguous(args.shared_w_down, "shared_w_down");
    shared.FloatDType(args.shared_gate_logits, "shared_gate_logits");
    shared.Shape(args.shared_gate_logits, "shared_gate_logits", {tokens, 1});
  }
  if (tokens == 0) return;
  Dispatch<OpId::kMoeExperts>(check.device().type, args);
}

}  // namespace vt
