// Validation and dispatch of the sampling helpers: LogSoftmax, Argmax.
#include <string>

#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

void LogSoftmax(const LogSoftmaxArgs& args) {
  OpCheck check("LogSoftmax", {{"x", &args.x}, {"out", &args.out}});
  check.MinRank(args.x, "x", 1);
  check.FloatDType(args.x, "x");
  check.LastDimContiguous(args.x, "x");
  check.DType(args.out, "out", {DType::kF32});
  check.SameShape(args.out, "out", args.x, "x");
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.x, "x", args.x.dtype() == DType::kF32);
  if (!(args.x.size(-1) > 0)) check.Fail("x's last dim must not be empty, got " + args.x.Describe());
  if (args.x.numel() == 0) return;
  Dispatch<OpId::kLogSoftmax>(check.device().type, args);
}

void Argmax(const ArgmaxArgs& args) {
  OpCheck check("Argmax", {{"x", &args.x}, {"out", &args.out}});
  check.Rank(args.x, "x", 2);
  check.FloatDType(args.x, "x");
  check.LastDimContiguous(args.x, "x");
  if (!(args.x.size(1) > 0)) check.Fail("x's last dim must not be empty, got " + args.x.Describe());
  check.DType(args.out, "out", {DType::kI32});
  check.Shape(args.out, "out", {args.x.size(0)});
  check.Contiguous(args.out, "out");
  if (args.allowed.defined()) {
    const OpCheck mask("Argmax", {{"x", &args.x}, {"allowed", &args.allowed}});  // same device
    mask.DType(args.allowed, "allowed", {DType::kI32});
    mask.Rank(args.allowed, "allowed", 2);
    mask.Contiguous(args.allowed, "allowed");
    if (args.allowed.size(0) != args.x.size(0) || args.allowed.size(1) * 32 < args.x.size(1)) {
      mask.Fail("allowed must be [" + std::to_string(args.x.size(0)) + ", >= " +
                 std::to_string((args.x.size(1) + 31) / 32) + "] (a bit per index of x " + args.x.Describe() +
                 "), got " + args.allowed.Describe());
    }
  }
  if (args.x.size(0) == 0) return;
  Dispatch<OpId::kArgmax>(check.device().type, args);
}

}  // namespace vt
