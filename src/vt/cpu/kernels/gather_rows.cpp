// GatherRows on the CPU: out[t] = table[ids[t]] (embedding lookup, last-token
// gather).
//
// Contract (vt/op_args.h, checked by vt::GatherRows): table [V, H] any float or GGUF
// block dtype with unit stride in H (any row stride), ids [T] i32/i64 (any stride),
// out [T, H] float (any row stride). Block rows dequantize through vt::DequantizeRow;
// float rows are copied (same dtype) or converted. Every id is checked against V
// before any row is written, so a bad id leaves out untouched.
//
// Memory-bound: one row read and one written per token; rows are split over threads.
#include <string>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"
#include "vt/quant.h"

namespace vt::cpu {
namespace {

std::vector<int64_t> CheckedIds(const GatherRowsArgs& a) {
  const int64_t num = a.ids.size(0), vocab = a.table.size(0);
  std::vector<int64_t> ids(static_cast<size_t>(num));
  for (int64_t t = 0; t < num; ++t) {
    ids[t] = LoadIndex(a.ids.data(), a.ids.dtype(), t * a.ids.stride(0));
    if (ids[t] < 0 || ids[t] >= vocab) {
      throw Error("vt::GatherRows on cpu: ids[" + std::to_string(t) + "] = " + std::to_string(ids[t]) +
                  " is out of range for a table of " + std::to_string(vocab) + " rows (" + a.table.Describe() + ")");
    }
  }
  return ids;
}

void GatherRowsCpu(const GatherRowsArgs& a) {
  const std::vector<int64_t> ids = CheckedIds(a);
  const DType src_dtype = a.table.dtype(), dst_dtype = a.out.dtype();
  const int64_t h = a.table.size(1);
  const int64_t row_bytes = BytesFor(src_dtype, h);
  ParallelFor(static_cast<int64_t>(ids.size()), std::max<int64_t>(1, 65536 / std::max<int64_t>(row_bytes, 1)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> row(static_cast<size_t>(h));
                for (int64_t t = begin; t < end; ++t) {
                  const char* src = ElementAddress(a.table.data(), src_dtype, ids[t] * a.table.stride(0));
                  char* dst = ElementAddress(a.out.data(), dst_dtype, t * a.out.stride(0));
                  if (src_dtype == dst_dtype) {
                    std::memcpy(dst, src, static_cast<size_t>(row_bytes));
                    continue;
                  }
                  if (IsQuantized(src_dtype)) {
                    DequantizeRow(src, src_dtype, h, row.data());
                  } else {
                    LoadRow(src, src_dtype, h, row.data());
                  }
                  StoreRow(row.data(), h, dst, dst_dtype);
                }
              });
}

}  // namespace

VT_REGISTER_KERNEL(GatherRows, kCPU, GatherRowsCpu);

}  // namespace vt::cpu
