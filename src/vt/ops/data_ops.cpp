// Validation and dispatch of the data-movement ops: Copy, Fill, Add, GatherRows.
#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

void Copy(const CopyArgs& args) {
  OpCheck check("Copy", {{"src", &args.src}, {"dst", &args.dst}});
  check.SameShape(args.dst, "dst", args.src, "src");
  if (IsQuantized(args.dst.dtype()))
    check.Fail(std::string("dst cannot be a block dtype (quantize on the host instead), got ") + args.dst.Describe());
  if (IsQuantized(args.src.dtype()) && !IsFloat(args.dst.dtype()))
    check.Fail("a quantized src dequantizes into a float dst only, got " + args.dst.Describe());
  if (args.src.numel() == 0 || args.dst.SameView(args.src)) return;
  check.NoOverlap(args.dst, "dst", args.src, "src", false);
  Dispatch<OpId::kCopy>(check.device().type, args);
}

void Fill(const FillArgs& args) {
  OpCheck check("Fill", {{"dst", &args.dst}});
  if (IsQuantized(args.dst.dtype())) check.Fail("dst cannot be a block dtype, got " + args.dst.Describe());
  if (args.dst.numel() == 0) return;
  Dispatch<OpId::kFill>(check.device().type, args);
}

void Add(const AddArgs& args) {
  OpCheck check("Add", {{"a", &args.a}, {"b", &args.b}, {"out", &args.out}});
  check.FloatDType(args.a, "a");
  check.DType(args.b, "b", {args.a.dtype()});
  check.DType(args.out, "out", {args.a.dtype()});
  check.SameShape(args.b, "b", args.a, "a");
  check.SameShape(args.out, "out", args.a, "a");
  check.NoOverlap(args.out, "out", args.a, "a", true);
  check.NoOverlap(args.out, "out", args.b, "b", true);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kAdd>(check.device().type, args);
}

void GatherRows(const GatherRowsArgs& args) {
  OpCheck check("GatherRows", {{"table", &args.table}, {"ids", &args.ids}, {"out", &args.out}});
  check.Rank(args.table, "table", 2);
  check.LastDimContiguous(args.table, "table");
  if (IsInteger(args.table.dtype())) check.Fail("table must be a float or block dtype, got " + args.table.Describe());
  check.Rank(args.ids, "ids", 1);
  check.IndexDType(args.ids, "ids");
  check.FloatDType(args.out, "out");
  check.Shape(args.out, "out", {args.ids.size(0), args.table.size(1)});
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.table, "table", false);
  if (args.out.numel() == 0) return;
  Dispatch<OpId::kGatherRows>(check.device().type, args);
}

void Synchronize(Device device) { GetDeviceBackend(device.type).Synchronize(device.index); }

}  // namespace vt
