// Validation and dispatch of the sampling helpers: LogSoftmax, Argmax, Sample, Penalties,
// TopLogprobs.
#include <algorithm>
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

namespace {

// x [R, V] float with a non-empty last dim, an [R] i32 `out` (named out_name), and the
// optional bitmask `allowed` [R, >= ceil(V / 32)] i32: what Argmax, Sample and
// TopLogprobs share.
void CheckRowsOfLogits(const char* op, const OpCheck& check, const Tensor& x, const Tensor& out, const Tensor& allowed,
                       const char* out_name = "out") {
  check.Rank(x, "x", 2);
  check.FloatDType(x, "x");
  check.LastDimContiguous(x, "x");
  if (!(x.size(1) > 0)) check.Fail("x's last dim must not be empty, got " + x.Describe());
  check.DType(out, out_name, {DType::kI32});
  check.Shape(out, out_name, {x.size(0)});
  check.Contiguous(out, out_name);
  if (!allowed.defined()) return;
  const OpCheck mask(op, {{"x", &x}, {"allowed", &allowed}});  // same device
  mask.DType(allowed, "allowed", {DType::kI32});
  mask.Rank(allowed, "allowed", 2);
  mask.Contiguous(allowed, "allowed");
  if (allowed.size(0) != x.size(0) || allowed.size(1) * 32 < x.size(1)) {
    mask.Fail("allowed must be [" + std::to_string(x.size(0)) + ", >= " + std::to_string((x.size(1) + 31) / 32) +
              "] (a bit per index of x " + x.Describe() + "), got " + allowed.Describe());
  }
}

}  // namespace

void Argmax(const ArgmaxArgs& args) {
  OpCheck check("Argmax", {{"x", &args.x}, {"out", &args.out}});
  CheckRowsOfLogits("Argmax", check, args.x, args.out, args.allowed);
  if (args.x.size(0) == 0) return;
  Dispatch<OpId::kArgmax>(check.device().type, args);
}

void Sample(const SampleArgs& args) {
  OpCheck check("Sample", {{"x", &args.x}, {"params", &args.params}, {"out", &args.out}});
  CheckRowsOfLogits("Sample", check, args.x, args.out, args.allowed);
  check.DType(args.params, "params", {DType::kI32});
  check.Shape(args.params, "params", {args.x.size(0), kSampleRowWords});
  check.Contiguous(args.params, "params");
  if (args.x.size(0) == 0) return;
  Dispatch<OpId::kSample>(check.device().type, args);
}

void Penalties(const PenaltiesArgs& args) {
  OpCheck check("Penalties", {{"x", &args.x},
                              {"token_ids", &args.token_ids},
                              {"output_begin", &args.output_begin},
                              {"params", &args.params}});
  check.Rank(args.x, "x", 2);
  check.DType(args.x, "x", {DType::kF32});
  check.LastDimContiguous(args.x, "x");
  const int64_t rows = args.x.size(0);
  check.Rank(args.token_ids, "token_ids", 2);
  check.DType(args.token_ids, "token_ids", {DType::kI32});
  check.Size(args.token_ids, "token_ids", 0, rows, "rows of x");
  check.Contiguous(args.token_ids, "token_ids");
  check.DType(args.output_begin, "output_begin", {DType::kI32});
  check.Shape(args.output_begin, "output_begin", {rows});
  check.Contiguous(args.output_begin, "output_begin");
  check.DType(args.params, "params", {DType::kF32});
  check.Shape(args.params, "params", {rows, 3});
  check.Contiguous(args.params, "params");
  if (rows == 0 || args.token_ids.size(1) == 0) return;
  Dispatch<OpId::kPenalties>(check.device().type, args);
}

void TopLogprobs(const TopLogprobsArgs& args) {
  OpCheck check("TopLogprobs", {{"x", &args.x}, {"token", &args.token}, {"ids", &args.ids}, {"values", &args.values}});
  CheckRowsOfLogits("TopLogprobs", check, args.x, args.token, args.allowed, "token");
  const int64_t rows = args.x.size(0), vocab = args.x.size(1);
  check.DType(args.ids, "ids", {DType::kI32});
  check.Rank(args.ids, "ids", 2);
  check.Size(args.ids, "ids", 0, rows, "rows of x");
  check.Contiguous(args.ids, "ids");
  check.DType(args.values, "values", {DType::kF32});
  check.SameShape(args.values, "values", args.ids, "ids");
  check.Contiguous(args.values, "values");
  const int64_t k = args.ids.size(1) - 1;
  if (k < 0 || k > std::min(vocab, kMaxTopLogprobs)) {
    check.Fail("ids and values must have 1 + k columns, 0 <= k <= min(V = " + std::to_string(vocab) +
               ", kMaxTopLogprobs = " + std::to_string(kMaxTopLogprobs) + "), got " + args.ids.Describe());
  }
  if (rows == 0) return;
  Dispatch<OpId::kTopLogprobs>(check.device().type, args);
}

}  // namespace vt
