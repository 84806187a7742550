// Sequence tables, f32 row staging and the denormal mode shared by the Gated
// DeltaNet CPU kernels (gdn_kernels.h).
#include <algorithm>
#include <string>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "../cpu_util.h"
#include "gdn_kernels.h"
#include "vt/error.h"

namespace vt::cpu::gdn {
namespace {

[[noreturn]] void Fail(const char* op, const std::string& what) {
  throw Error(std::string("vt::") + op + " on cpu: " + what);
}

// Slots must be in range, and a slot written by two sequences of one batch would be a
// data race with an order-dependent result.
void CheckSlots(const char* op, const std::vector<SequenceSpan>& spans, int64_t num_slots) {
  std::vector<int64_t> owner(static_cast<size_t>(num_slots), -1);
  for (size_t b = 0; b < spans.size(); ++b) {
    const int64_t slot = spans[b].slot;
    if (slot < 0 || slot >= num_slots) {
      Fail(op, "state_slot_ids[" + std::to_string(b) + "] = " + std::to_string(slot) + " is outside the " +
                   std::to_string(num_slots) + " state slots");
    }
    if (spans[b].begin == spans[b].end) continue;
    if (owner[static_cast<size_t>(slot)] >= 0) {
      Fail(op, "state slot " + std::to_string(slot) + " is used by sequences " +
                   std::to_string(owner[static_cast<size_t>(slot)]) + " and " + std::to_string(b) +
                   " of one batch; each running sequence needs its own slot");
    }
    owner[static_cast<size_t>(slot)] = static_cast<int64_t>(b);
  }
}

}  // namespace

std::vector<SequenceSpan> ReadSequences(const char* op, const Tensor& query_start_loc, const Tensor& slot_ids,
                                        int64_t num_tokens, int64_t num_slots) {
  const auto* starts = query_start_loc.data_ptr<int32_t>();
  const auto* slots = slot_ids.data_ptr<int32_t>();
  const int64_t num_seqs = slot_ids.size(0);
  std::vector<SequenceSpan> spans;
  spans.reserve(static_cast<size_t>(num_seqs));
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t begin = starts[b], end = starts[b + 1];
    if (begin < 0 || end < begin || end > num_tokens) {
      Fail(op, "query_start_loc[" + std::to_string(b) + ".." + std::to_string(b + 1) + "] = " +
                   std::to_string(begin) + ".." + std::to_string(end) + " is not an increasing range within the " +
                   std::to_string(num_tokens) + " tokens");
    }
    spans.push_back({begin, end, slots[b]});
  }
  CheckSlots(op, spans, num_slots);
  return spans;
}

std::vector<SequenceSpan> ReadDecodeSlots(const char* op, const Tensor& slot_ids, int64_t num_slots) {
  const auto* slots = slot_ids.data_ptr<int32_t>();
  std::vector<SequenceSpan> spans;
  for (int64_t b = 0; b < slot_ids.size(0); ++b) spans.push_back({b, b + 1, slots[b]});
  CheckSlots(op, spans, num_slots);
  return spans;
}

int64_t LongestSequence(const std::vector<SequenceSpan>& seqs) {
  int64_t longest = 0;
  for (const SequenceSpan& seq : seqs) longest = std::max(longest, seq.end - seq.begin);
  return longest;
}

void LoadHeadRows(const Tensor& x, int64_t head, int64_t begin, int64_t count, float* dst, int64_t ld) {
  const int64_t dim = x.size(2), elem_bytes = BytesFor(x.dtype(), 1);
  const int64_t row_bytes = x.stride(0) * elem_bytes;
  const char* row = static_cast<const char*>(x.data()) + (begin * x.stride(0) + head * x.stride(1)) * elem_bytes;
  for (int64_t i = 0; i < count; ++i, row += row_bytes) LoadRow(row, x.dtype(), dim, dst + i * ld);
}

void StoreHeadRows(const float* src, int64_t ld, const Tensor& out, int64_t head, int64_t begin, int64_t count) {
  const int64_t dim = out.size(2), elem_bytes = BytesFor(out.dtype(), 1);
  const int64_t row_bytes = out.stride(0) * elem_bytes;
  char* row = static_cast<char*>(out.data()) + (begin * out.stride(0) + head * out.stride(1)) * elem_bytes;
  for (int64_t i = 0; i < count; ++i, row += row_bytes) StoreRow(src + i * ld, dim, row, out.dtype());
}

void PrefetchHeadRows(const Tensor& x, int64_t head, int64_t begin, int64_t count) {
  const int64_t elem_bytes = BytesFor(x.dtype(), 1), row_bytes = x.size(2) * elem_bytes;
  const int64_t row_stride_bytes = x.stride(0) * elem_bytes;
  const char* row = static_cast<const char*>(x.data()) + (begin * x.stride(0) + head * x.stride(1)) * elem_bytes;
  for (int64_t i = 0; i < count; ++i, row += row_stride_bytes) {
    for (int64_t byte = 0; byte < row_bytes; byte += 64) __builtin_prefetch(row + byte, 0, 3);
  }
}

int64_t KeyHeadOf(int64_t value_head, int64_t key_heads, int64_t value_heads, bool tiled_value_heads) {
  return tiled_value_heads ? value_head % key_heads : value_head / (value_heads / key_heads);
}

#if defined(__x86_64__)
// MXCSR bits: flush-to-zero (15) and denormals-are-zero (6).
FlushDenormalsScope::FlushDenormalsScope() : saved_mode_(_mm_getcsr()) { _mm_setcsr(saved_mode_ | 0x8040u); }
FlushDenormalsScope::~FlushDenormalsScope() { _mm_setcsr(saved_mode_); }
#else
FlushDenormalsScope::FlushDenormalsScope() : saved_mode_(0) {}
FlushDenormalsScope::~FlushDenormalsScope() {}
#endif

}  // namespace vt::cpu::gdn
