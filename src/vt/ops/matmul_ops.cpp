// Validation and dispatch of MatMul (dense and quantized weights).
#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

void MatMul(const MatMulArgs& args) {
  OpCheck check("MatMul", {{"x", &args.x}, {"w", &args.w}, {"out", &args.out}});
  check.Rank(args.x, "x", 2);
  check.Rank(args.w, "w", 2);
  check.FloatDType(args.x, "x");
  check.WeightDType(args.w, "w");
  check.Size(args.w, "w", 1, args.x.size(1), "K, the inner size of x");
  check.DType(args.out, "out", {args.x.dtype(), DType::kF32});
  check.Shape(args.out, "out", {args.x.size(0), args.w.size(0)});
  check.LastDimContiguous(args.x, "x");
  check.LastDimContiguous(args.w, "w");
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.x, "x", false);
  check.NoOverlap(args.out, "out", args.w, "w", false);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kMatMul>(check.device().type, args);
}

}  // namespace vt
