// Validation and dispatch of norms and pointwise activations: RmsNorm,
// AddRmsNorm, GatedRmsNorm, L2Norm, SiluMul, SigmoidMul.
#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

namespace {

// x [rows..., D] float with a contiguous last dim; out like x, same dtype.
void CheckRowwise(const OpCheck& check, const Tensor& x, const char* x_name, const Tensor& out) {
  check.MinRank(x, x_name, 1);
  check.FloatDType(x, x_name);
  check.LastDimContiguous(x, x_name);
  check.DType(out, "out", {x.dtype()});
  check.SameShape(out, "out", x, x_name);
  check.LastDimContiguous(out, "out");
}

void CheckNormWeight(const OpCheck& check, const Tensor& weight, int64_t dim) {
  check.FloatDType(weight, "weight");
  check.Shape(weight, "weight", {dim});
}

}  // namespace

void RmsNorm(const RmsNormArgs& args) {
  OpCheck check("RmsNorm", {{"x", &args.x}, {"weight", &args.weight}, {"out", &args.out}});
  CheckRowwise(check, args.x, "x", args.out);
  CheckNormWeight(check, args.weight, args.x.size(-1));
  if (!(args.eps >= 0)) check.Fail("eps must be >= 0, got " + std::to_string(args.eps));
  check.NoOverlap(args.out, "out", args.x, "x", true);
  check.NoOverlap(args.out, "out", args.weight, "weight", false);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kRmsNorm>(check.device().type, args);
}

void AddRmsNorm(const AddRmsNormArgs& args) {
  OpCheck check("AddRmsNorm",
                {{"x", &args.x}, {"residual", &args.residual}, {"weight", &args.weight}, {"out", &args.out}});
  CheckRowwise(check, args.x, "x", args.out);
  check.DType(args.residual, "residual", {args.x.dtype()});
  check.SameShape(args.residual, "residual", args.x, "x");
  check.LastDimContiguous(args.residual, "residual");
  CheckNormWeight(check, args.weight, args.x.size(-1));
  check.NoOverlap(args.out, "out", args.x, "x", true);
  check.NoOverlap(args.residual, "residual", args.x, "x", false);
  check.NoOverlap(args.out, "out", args.residual, "residual", false);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kAddRmsNorm>(check.device().type, args);
}

void GatedRmsNorm(const GatedRmsNormArgs& args) {
  OpCheck check("GatedRmsNorm", {{"x", &args.x}, {"z", &args.z}, {"weight", &args.weight}, {"out", &args.out}});
  CheckRowwise(check, args.x, "x", args.out);
  check.DType(args.z, "z", {args.x.dtype()});
  check.SameShape(args.z, "z", args.x, "x");
  check.LastDimContiguous(args.z, "z");
  CheckNormWeight(check, args.weight, args.x.size(-1));
  check.NoOverlap(args.out, "out", args.x, "x", true);
  check.NoOverlap(args.out, "out", args.z, "z", true);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kGatedRmsNorm>(check.device().type, args);
}

void L2Norm(const L2NormArgs& args) {
  OpCheck check("L2Norm", {{"x", &args.x}, {"out", &args.out}});
  CheckRowwise(check, args.x, "x", args.out);
  check.NoOverlap(args.out, "out", args.x, "x", true);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kL2Norm>(check.device().type, args);
}

void SiluMul(const SiluMulArgs& args) {
  OpCheck check("SiluMul", {{"gate", &args.gate}, {"up", &args.up}, {"out", &args.out}});
  CheckRowwise(check, args.gate, "gate", args.out);
  check.DType(args.up, "up", {args.gate.dtype()});
  check.SameShape(args.up, "up", args.gate, "gate");
  check.LastDimContiguous(args.up, "up");
  check.NoOverlap(args.out, "out", args.gate, "gate", true);
  check.NoOverlap(args.out, "out", args.up, "up", true);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kSiluMul>(check.device().type, args);
}

void SigmoidMul(const SigmoidMulArgs& args) {
  OpCheck check("SigmoidMul", {{"x", &args.x}, {"gate", &args.gate}, {"out", &args.out}});
  CheckRowwise(check, args.x, "x", args.out);
  check.FloatDType(args.gate, "gate");
  check.Rank(args.gate, "gate", args.x.ndim());
  for (int d = 0; d + 1 < args.x.ndim(); ++d) check.Size(args.gate, "gate", d, args.x.size(d), "a row dim of x");
  if (!(args.gate.size(-1) == args.x.size(-1) || args.gate.size(-1) == 1))
    check.Fail("gate's last dim must be x's (" + std::to_string(args.x.size(-1)) + ") or 1, got " +
               args.gate.Describe());
  check.LastDimContiguous(args.gate, "gate");
  check.NoOverlap(args.out, "out", args.x, "x", true);
  check.NoOverlap(args.out, "out", args.gate, "gate", args.gate.size(-1) == args.x.size(-1));
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kSigmoidMul>(check.device().type, args);
}

}  // namespace vt
