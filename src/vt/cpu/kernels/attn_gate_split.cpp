// CPU kernel for AttnGateSplit: the q projection of a gated attention layer holds,
// per token, the query and the output gate of each head interleaved:
//
//   qg[t] = | q_h0 (D) | g_h0 (D) | q_h1 (D) | g_h1 (D) | ...      [T, H * 2 * D]
//   query[t, h, :] = q_h                                          [T, H, D]
//   gate[t, h * D : (h + 1) * D] = g_h                            [T, H * D]
//
// qg, query and gate may have strided rows (unit stride in the last dim; qg is then
// a column view of a merged projection), so each head is two row copies (memcpy:
// all three share one dtype).
#include <algorithm>
#include <cstring>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

void AttnGateSplitCpu(const AttnGateSplitArgs& a) {
  const DType dtype = a.qg.dtype();
  const int64_t tokens = a.qg.size(0), d = a.head_dim, heads = a.qg.size(1) / (2 * d);
  const int64_t elem = BytesFor(dtype, 1);
  const size_t row_bytes = static_cast<size_t>(elem * d);
  const char* qg = static_cast<const char*>(a.qg.data());
  char* query = static_cast<char*>(a.query.data());
  char* gate = static_cast<char*>(a.gate.data());
  const int64_t qg_stride = a.qg.stride(0), gate_stride = a.gate.stride(0);
  const int64_t query_strides[2] = {a.query.stride(0), a.query.stride(1)};
  ParallelFor(tokens, std::max<int64_t>(1, 4096 / (heads * d)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const char* src = qg + elem * (t * qg_stride + h * 2 * d);
        std::memcpy(query + elem * (t * query_strides[0] + h * query_strides[1]), src, row_bytes);
        std::memcpy(gate + elem * (t * gate_stride + h * d), src + row_bytes, row_bytes);
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(AttnGateSplit, kCPU, AttnGateSplitCpu);

}  // namespace vt::cpu
