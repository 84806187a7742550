// Kernel choice of the CPU PagedAttention (see paged_attention.h): which
// micro-kernels, how many query tokens per work item, and whether to split long
// contexts across work items. A pure function of the problem's shape, unit-tested
// at each boundary. Every head_dim the op accepts (1..256) has a path: AVX-512
// masks any tail, AVX2 takes multiples of 8, portable takes everything.
#include <algorithm>

#include "paged_attention.h"

namespace vt::cpu::paged_attention {

namespace {

Isa ChooseIsa(Isa allowed, int64_t head_dim) {
  if (allowed == Isa::kAvx512) return Isa::kAvx512;
  if (allowed == Isa::kAvx2 && head_dim % 8 == 0) return Isa::kAvx2;
  return Isa::kPortable;
}

}  // namespace

Plan ChoosePlan(const ProblemShape& shape) {
  Plan plan;
  plan.isa = ChooseIsa(shape.isa, shape.head_dim);
  const int64_t group = std::max<int64_t>(1, shape.num_heads / std::max<int64_t>(1, shape.num_kv_heads));
  plan.tile_tokens = std::max<int64_t>(1, kTargetRows / group);
  // Split contexts only when the (sequence, kv head, token tile) items cannot give
  // every thread two of them and a context is long enough for two slices.
  const int64_t tiles_per_seq = std::max<int64_t>(1, (shape.max_query_len + plan.tile_tokens - 1) / plan.tile_tokens);
  const int64_t items = shape.num_seqs * shape.num_kv_heads * tiles_per_seq;
  const int64_t wanted = 2 * static_cast<int64_t>(std::max(1, shape.num_threads));
  if (items < wanted && shape.max_seq_len >= 2 * kMinSplitLen) {
    const int64_t splits = std::min((wanted + items - 1) / items, shape.max_seq_len / kMinSplitLen);
    const int64_t len = (shape.max_seq_len + splits - 1) / splits;
    plan.kv_split_len = (len + kMaxSegment - 1) / kMaxSegment * kMaxSegment;
  }
  return plan;
}

}  // namespace vt::cpu::paged_attention
