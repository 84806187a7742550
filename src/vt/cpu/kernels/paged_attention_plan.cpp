// Kernel choice of the CPU PagedAttention (see paged_attention.h): which
// micro-kernels, how many query tokens and kv heads per work item, and whether to
// split long contexts across work items. A pure function of the problem's shape, unit-tested
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
  const int64_t num_kv_heads = std::max<int64_t>(1, shape.num_kv_heads);
  const int64_t group = std::max<int64_t>(1, shape.num_heads / num_kv_heads);
  plan.tile_tokens = std::max<int64_t>(1, kTargetRows / group);
  plan.kv_heads_per_item = num_kv_heads;
  // Every thread should get two (sequence, token tile) items; if it cannot, split
  // long contexts into slices, or else split the kv heads.
  const int64_t tiles_per_seq = std::max<int64_t>(1, (shape.max_query_len + plan.tile_tokens - 1) / plan.tile_tokens);
  const int64_t items = std::max<int64_t>(1, shape.num_seqs * tiles_per_seq);
  const int64_t wanted = 2 * static_cast<int64_t>(std::max(1, shape.num_threads));
  if (items >= wanted) return plan;
  const int64_t parts = (wanted + items - 1) / items;
  if (shape.max_seq_len >= 2 * kMinSplitLen) {
    const int64_t splits = std::min(parts, shape.max_seq_len / kMinSplitLen);
    const int64_t len = (shape.max_seq_len + splits - 1) / splits;
    plan.kv_split_len = (len + kMaxSegment - 1) / kMaxSegment * kMaxSegment;
  } else {
    const int64_t head_groups = std::min(num_kv_heads, parts);
    plan.kv_heads_per_item = (num_kv_heads + head_groups - 1) / head_groups;
  }
  return plan;
}

}  // namespace vt::cpu::paged_attention
