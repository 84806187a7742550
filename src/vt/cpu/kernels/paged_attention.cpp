// CPU kernel for PagedAttention: causal GQA attention of a varlen batch (prefill
// chunks and decodes mixed) over paged K/V caches.
//
// q [T, Nq, D]; k_cache, v_cache [num_blocks, block_size, Nkv, D] views (any
// strides); block_tables [B, max_blocks] i32; seq_lens [B]; query_start_loc [B + 1];
// out [T, Nq, D]. Token i of sequence b sits at position
// p = seq_lens[b] - q_len_b + i and attends to positions 0..p; query head h reads
// kv head h / (Nq / Nkv). Position j of a sequence lives in cache block
// block_tables[b][j / block_size] at offset j % block_size.
//
// Work items are (sequence, tile of query tokens, kv heads[, context slice]). Each
// streams its visible context once through an online softmax in f32, segment by
// segment, and within a segment does every kv head it owns: K and V are read once
// for all the query heads (and tokens) that share them, and a cache block is read
// front to back (all heads of a slot are adjacent in the cache), which hardware
// prefetchers follow; software prefetches run a few segments ahead across blocks.
// Decode is bound by reading the cache, and the micro-kernels (paged_attention.h;
// AVX-512 / AVX2 / portable) keep the arithmetic below that bound. Items run on the
// thread pool, largest first, claimed dynamically. With too few items for the
// threads, long contexts are split into slices whose partial softmax states are
// merged per row, or, for short ones, the kv heads are split across items
// (paged_attention_plan.cpp decides).
//
// Host metadata is checked before any work: inconsistent query_start_loc, a
// sequence longer than max_seq_len or shorter than its query, or a block id outside
// the cache throws a vt::Error; nothing outside the addressed blocks is read.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "paged_attention.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::cpu {
namespace {

namespace pa = paged_attention;

struct SeqInfo {
  int64_t token_begin = 0;  // first row of q
  int64_t q_len = 0;
  int64_t seq_len = 0;  // context incl. the new tokens
};

[[noreturn]] void Fail(const std::string& what) { throw Error("vt::PagedAttention on cpu: " + what); }

std::vector<SeqInfo> ReadAndCheckMetadata(const PagedAttentionArgs& a) {
  const int64_t num_seqs = a.block_tables.size(0), num_blocks = a.k_cache.size(0);
  const int64_t block_size = a.k_cache.size(1);
  const int32_t* qsl = a.query_start_loc.data_ptr<int32_t>();
  const int32_t* seq_lens = a.seq_lens.data_ptr<int32_t>();
  const int32_t* tables = a.block_tables.data_ptr<int32_t>();
  if (qsl[0] < 0 || qsl[num_seqs] > a.q.size(0)) {
    Fail("query_start_loc must lie within the " + std::to_string(a.q.size(0)) + " query tokens, got [" +
         std::to_string(qsl[0]) + ", " + std::to_string(qsl[num_seqs]) + "]");
  }
  std::vector<SeqInfo> seqs(static_cast<size_t>(num_seqs));
  for (int64_t b = 0; b < num_seqs; ++b) {
    const std::string where = "sequence " + std::to_string(b) + ": ";
    SeqInfo& s = seqs[b];
    s.token_begin = qsl[b];
    s.q_len = qsl[b + 1] - qsl[b];
    s.seq_len = seq_lens[b];
    if (s.q_len < 0) Fail(where + "query_start_loc must not decrease");
    if (s.q_len > a.max_query_len) Fail(where + std::to_string(s.q_len) + " query tokens exceed max_query_len");
    if (s.seq_len < s.q_len || s.seq_len > a.max_seq_len) {
      Fail(where + "seq_len " + std::to_string(s.seq_len) + " must be in [query tokens " + std::to_string(s.q_len) +
           ", max_seq_len " + std::to_string(a.max_seq_len) + "]");
    }
    if (s.q_len == 0) continue;
    for (int64_t i = 0; i < (s.seq_len + block_size - 1) / block_size; ++i) {
      const int32_t block = tables[b * a.block_tables.stride(0) + i];
      if (block < 0 || block >= num_blocks) {
        Fail(where + "block_tables[" + std::to_string(b) + "][" + std::to_string(i) + "] = " + std::to_string(block) +
             " is outside the cache's " + std::to_string(num_blocks) + " blocks");
      }
    }
  }
  return seqs;
}

struct WorkItem {
  int64_t seq = 0;
  int64_t head_begin = 0, head_end = 0;    // kv heads
  int64_t token_begin = 0, token_end = 0;  // rows of q (absolute)
  int64_t kv_begin = 0, kv_end = 0;        // context positions of this item
  int64_t partial = -1;                    // partial-state slot, or -1: write out directly
  int64_t cost = 0;
};

// Items sharing one (sequence, token tile, kv heads) whose context was split.
struct MergeGroup {
  int64_t first_item = 0, num_items = 0;
};

struct Schedule {
  std::vector<WorkItem> items;
  std::vector<MergeGroup> merges;
  int64_t num_partials = 0;
};

Schedule MakeSchedule(const std::vector<SeqInfo>& seqs, int64_t num_kv_heads, int64_t group, const pa::Plan& plan) {
  Schedule s;
  for (int64_t b = 0; b < static_cast<int64_t>(seqs.size()); ++b) {
    const SeqInfo& seq = seqs[b];
    for (int64_t t0 = 0; t0 < seq.q_len; t0 += plan.tile_tokens) {
      const int64_t t1 = std::min(seq.q_len, t0 + plan.tile_tokens);
      const int64_t context = seq.seq_len - seq.q_len + t1;  // positions the tile's last token sees
      const int64_t slice = plan.kv_split_len > 0 ? plan.kv_split_len : context;
      const int64_t num_slices = (context + slice - 1) / slice;
      for (int64_t g0 = 0; g0 < num_kv_heads; g0 += plan.kv_heads_per_item) {
        const int64_t g1 = std::min(num_kv_heads, g0 + plan.kv_heads_per_item);
        if (num_slices > 1) s.merges.push_back({static_cast<int64_t>(s.items.size()), num_slices});
        for (int64_t k = 0; k < num_slices; ++k) {
          WorkItem item{b, g0, g1, seq.token_begin + t0, seq.token_begin + t1, k * slice, std::min(context, (k + 1) * slice)};
          item.partial = num_slices > 1 ? s.num_partials++ : -1;
          item.cost = (t1 - t0) * group * (g1 - g0) * (item.kv_end - item.kv_begin);
          s.items.push_back(item);
        }
      }
    }
  }
  return s;
}

// The caches and block tables as raw addresses and strides, read once per call so
// that the per-segment work does no tensor bookkeeping.
struct CacheAddressing {
  explicit CacheAddressing(const PagedAttentionArgs& a)
      : k(static_cast<const char*>(a.k_cache.data())), v(static_cast<const char*>(a.v_cache.data())),
        elem_bytes(BytesFor(a.k_cache.dtype(), 1)), block_size(a.k_cache.size(1)),
        k_strides{a.k_cache.stride(0), a.k_cache.stride(1), a.k_cache.stride(2)},
        v_strides{a.v_cache.stride(0), a.v_cache.stride(1), a.v_cache.stride(2)},
        row_bytes(elem_bytes * a.k_cache.size(3)), tables(a.block_tables.data_ptr<int32_t>()),
        table_stride(a.block_tables.stride(0)) {}
  const char* k;
  const char* v;
  int64_t elem_bytes, block_size;
  int64_t k_strides[3], v_strides[3];  // elements per block, slot and kv head
  int64_t row_bytes;
  const int32_t* tables;
  int64_t table_stride;
};

// Positions [position, position + len) of a sequence: one cache block, len <= kMaxSegment.
struct Span {
  int64_t position, block, offset;
  int len;
};

Span SpanAt(const CacheAddressing& c, int64_t seq, int64_t position, int64_t end) {
  const int64_t offset = position % c.block_size;
  const int64_t block = c.tables[seq * c.table_stride + position / c.block_size];
  const int len = static_cast<int>(std::min({end - position, c.block_size - offset, int64_t{pa::kMaxSegment}}));
  return {position, block, offset, len};
}

pa::KvSegment SegmentOf(const CacheAddressing& c, const Span& span, int64_t kv_head) {
  pa::KvSegment seg;
  seg.len = span.len;
  seg.k = c.k + c.elem_bytes * (span.block * c.k_strides[0] + span.offset * c.k_strides[1] + kv_head * c.k_strides[2]);
  seg.v = c.v + c.elem_bytes * (span.block * c.v_strides[0] + span.offset * c.v_strides[1] + kv_head * c.v_strides[2]);
  seg.k_step = c.k_strides[1];
  seg.v_step = c.v_strides[1];
  return seg;
}

// Asks for a span's K and V rows (heads [head_begin, head_end)) ahead of their use:
// spans sit in blocks scattered over the cache, where hardware prefetchers cannot
// run ahead. Into L2 (hint 2): the L1 is too small for a distance that hides DRAM
// latency.
void PrefetchSpan(const CacheAddressing& c, const Span& span, int64_t head_begin, int64_t head_end) {
  for (int64_t h = head_begin; h < head_end; ++h) {
    const pa::KvSegment seg = SegmentOf(c, span, h);
    for (int j = 0; j < span.len; ++j) {
      const char* k = static_cast<const char*>(seg.k) + j * seg.k_step * c.elem_bytes;
      const char* v = static_cast<const char*>(seg.v) + j * seg.v_step * c.elem_bytes;
      for (int64_t b = 0; b < c.row_bytes; b += 64) {
        __builtin_prefetch(k + b, 0, 2);
        __builtin_prefetch(v + b, 0, 2);
      }
    }
  }
}

// How far ahead of the span in use the prefetches run, in positions.
constexpr int64_t kPrefetchAhead = 32;

// The rows of q or out [T, heads, D] as raw addresses.
struct HeadRows {
  explicit HeadRows(const Tensor& t)
      : base(static_cast<char*>(t.data())), dtype(t.dtype()), elem_bytes(BytesFor(t.dtype(), 1)),
        token_stride(t.stride(0)), head_stride(t.stride(1)) {}
  char* At(int64_t token, int64_t head) const { return base + elem_bytes * (token * token_stride + head * head_stride); }
  char* base;
  DType dtype;
  int64_t elem_bytes, token_stride, head_stride;
};

// Everything a work item reads, and the partial-state buffers of split contexts.
// An item's rows are kept per kv head: head slot hi (kv head head_begin + hi) owns
// rows [hi * rows_per_head, hi * rows_per_head + tokens * group).
struct Context {
  const std::vector<SeqInfo>& seqs;
  const pa::MicroKernels& kernels;
  CacheAddressing cache;
  HeadRows q_rows, out_rows;
  float scale;
  int64_t group, head_dim, padded_dim;
  int64_t rows_per_head, row_capacity;  // tile_tokens * group; kv_heads_per_item * rows_per_head
  std::vector<float> partial_acc, partial_m, partial_l;  // [partials][row_capacity][padded_dim], [..][rows]
};

// Per-thread buffers, left uninitialised: every element an item reads it wrote first.
struct Scratch {
  explicit Scratch(const Context& c)
      : q_buffer(new float[c.row_capacity * c.padded_dim]), acc_buffer(new float[c.row_capacity * c.padded_dim]),
        state_buffer(new float[3 * c.row_capacity]), scores_buffer(new float[c.rows_per_head * pa::kMaxSegment]),
        q(q_buffer.get()), acc(acc_buffer.get()), m(state_buffer.get()), l(m + c.row_capacity),
        rescale(l + c.row_capacity), scores(scores_buffer.get()) {}
  std::unique_ptr<float[]> q_buffer, acc_buffer, state_buffer, scores_buffer;
  float* q;        // [row_capacity][padded_dim]
  float* acc;      // [row_capacity][padded_dim]
  float* m;        // [row_capacity]
  float* l;        // [row_capacity]
  float* rescale;  // [row_capacity]
  float* scores;   // [rows_per_head][kMaxSegment]
};

// Row r of head slot hi: token token_begin + r / group, query head (head_begin + hi) * group + r % group.
char* RowAddress(const HeadRows& rows, const Context& c, const WorkItem& item, int64_t hi, int64_t r) {
  return rows.At(item.token_begin + r / c.group, (item.head_begin + hi) * c.group + r % c.group);
}

void LoadQueries(const Context& c, const WorkItem& item, int64_t rows, Scratch& s) {
  for (int64_t hi = 0; hi < item.head_end - item.head_begin; ++hi) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = s.q + (hi * c.rows_per_head + r) * c.padded_dim;
      LoadRow(RowAddress(c.q_rows, c, item, hi, r), c.q_rows.dtype, c.head_dim, row);
      for (int64_t i = 0; i < c.head_dim; ++i) row[i] *= c.scale;
      std::fill(row + c.head_dim, row + c.padded_dim, 0.0f);
      if (c.kernels.pairs_split) pa::SplitPairs(row, c.padded_dim);
    }
  }
}

// Empty softmax states (m = -inf, l = 0, acc = 0) for the item's rows.
void ResetStates(const Context& c, const WorkItem& item, int64_t rows, Scratch& s) {
  for (int64_t hi = 0; hi < item.head_end - item.head_begin; ++hi) {
    const int64_t begin = hi * c.rows_per_head, end = begin + rows;
    std::fill(s.acc + begin * c.padded_dim, s.acc + end * c.padded_dim, 0.0f);
    std::fill(s.m + begin, s.m + end, -std::numeric_limits<float>::infinity());
    std::fill(s.l + begin, s.l + end, 0.0f);
  }
}

// One span for every kv head of the item: scores, online-softmax step, accumulate.
// Tokens before the span's first position see nothing in it: active rows are a suffix.
void ProcessSpan(const Context& c, const WorkItem& item, const Span& span, const Span& ahead, int64_t rows,
                 int64_t first_position, Scratch& s) {
  const int64_t first_row = std::max<int64_t>(0, span.position - first_position) * c.group;
  const int active = static_cast<int>(rows - first_row);
  for (int64_t hi = 0; hi < item.head_end - item.head_begin; ++hi) {
    PrefetchSpan(c.cache, ahead, item.head_begin + hi, item.head_begin + hi + 1);
    const pa::KvSegment seg = SegmentOf(c.cache, span, item.head_begin + hi);
    const int64_t base = hi * c.rows_per_head + first_row;
    c.kernels.scores(s.q + base * c.padded_dim, c.padded_dim, active, seg, c.head_dim, s.scores);
    for (int64_t r = 0; r < active; ++r) {
      const int64_t position = first_position + (first_row + r) / c.group;
      const int visible = static_cast<int>(std::min<int64_t>(span.len, position + 1 - span.position));
      s.rescale[base + r] =
          c.kernels.softmax_step(s.scores + r * pa::kMaxSegment, visible, &s.m[base + r], &s.l[base + r]);
    }
    c.kernels.accumulate(s.scores, s.rescale + base, active, seg, c.head_dim,
                         s.acc + base * c.padded_dim, c.padded_dim);
  }
}

void StoreOutputs(const Context& c, const WorkItem& item, int64_t rows, Scratch& s) {
  for (int64_t hi = 0; hi < item.head_end - item.head_begin; ++hi) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = hi * c.rows_per_head + r;
      float* acc = s.acc + row * c.padded_dim;
      const float inv_l = 1.0f / s.l[row];
      if (c.kernels.pairs_split) pa::JoinPairs(acc, c.padded_dim);
      for (int64_t i = 0; i < c.head_dim; ++i) acc[i] *= inv_l;
      StoreRow(acc, c.head_dim, RowAddress(c.out_rows, c, item, hi, r), c.out_rows.dtype);
    }
  }
}

void SavePartial(Context& c, const WorkItem& item, int64_t rows, const Scratch& s) {
  for (int64_t hi = 0; hi < item.head_end - item.head_begin; ++hi) {
    const int64_t from = hi * c.rows_per_head, to = item.partial * c.row_capacity + from;
    std::copy(s.acc + from * c.padded_dim, s.acc + (from + rows) * c.padded_dim, c.partial_acc.begin() + to * c.padded_dim);
    std::copy(s.m + from, s.m + from + rows, c.partial_m.begin() + to);
    std::copy(s.l + from, s.l + from + rows, c.partial_l.begin() + to);
  }
}

void RunItem(Context& c, const WorkItem& item, Scratch& s) {
  const SeqInfo& seq = c.seqs[item.seq];
  const int64_t rows = (item.token_end - item.token_begin) * c.group;
  const int64_t first_position = seq.seq_len - seq.q_len + (item.token_begin - seq.token_begin);
  LoadQueries(c, item, rows, s);
  ResetStates(c, item, rows, s);
  // The first kPrefetchAhead positions up front; then each span prefetches, head by
  // head, the span kPrefetchAhead positions later, interleaved with the arithmetic.
  for (int64_t j = item.kv_begin; j < std::min(item.kv_end, item.kv_begin + kPrefetchAhead);) {
    const Span span = SpanAt(c.cache, item.seq, j, item.kv_end);
    PrefetchSpan(c.cache, span, item.head_begin, item.head_end);
    j += span.len;
  }
  for (int64_t j = item.kv_begin; j < item.kv_end;) {
    const Span span = SpanAt(c.cache, item.seq, j, item.kv_end);
    const int64_t ahead_position = j + kPrefetchAhead;
    const Span ahead = ahead_position < item.kv_end ? SpanAt(c.cache, item.seq, ahead_position, item.kv_end) : Span{};
    ProcessSpan(c, item, span, ahead, rows, first_position, s);
    j += span.len;
  }
  if (item.partial < 0) {
    StoreOutputs(c, item, rows, s);
  } else {
    SavePartial(c, item, rows, s);
  }
}

// Combines the partial states of one split tile: weights e^(m_k - max m) per slice.
void MergeSlices(const Context& c, const Schedule& schedule, const MergeGroup& group, Scratch& s) {
  const WorkItem& first = schedule.items[group.first_item];
  const int64_t rows = (first.token_end - first.token_begin) * c.group;
  const int64_t used = (first.head_end - first.head_begin) * c.rows_per_head;
  for (int64_t row = 0; row < used; ++row) {
    if (row % c.rows_per_head >= rows) continue;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < group.num_items; ++k) {
      m = std::max(m, c.partial_m[schedule.items[group.first_item + k].partial * c.row_capacity + row]);
    }
    float l = 0;
    float* acc = s.acc + row * c.padded_dim;
    std::fill(acc, acc + c.padded_dim, 0.0f);
    for (int64_t k = 0; k < group.num_items; ++k) {
      const int64_t slot = schedule.items[group.first_item + k].partial * c.row_capacity + row;
      if (c.partial_l[slot] == 0.0f) continue;  // the row saw nothing in this slice
      const float w = std::exp(c.partial_m[slot] - m);
      l += w * c.partial_l[slot];
      const float* part = c.partial_acc.data() + slot * c.padded_dim;
      for (int64_t i = 0; i < c.padded_dim; ++i) acc[i] += w * part[i];  // padded_dim: rows may be pair-split
    }
    s.l[row] = l;
  }
  StoreOutputs(c, first, rows, s);
}

// Runs fn(index, scratch) for index in [0, count) on the pool, each thread claiming
// the next index as it finishes one.
template <typename Fn>
void RunDynamic(const Context& c, int64_t count, const Fn& fn) {
  if (count == 0) return;
  std::atomic<int64_t> next{0};
  ParallelFor(std::min<int64_t>(NumThreads(), count), 1, [&](int64_t, int64_t) {
    Scratch scratch(c);
    for (int64_t i; (i = next.fetch_add(1)) < count;) fn(i, scratch);
  });
}

const pa::MicroKernels& KernelsFor(Isa isa, DType cache_dtype) {
  switch (isa) {
    case Isa::kAvx512: return pa::MicroKernelsAvx512(cache_dtype);
    case Isa::kAvx2: return pa::MicroKernelsAvx2(cache_dtype);
    default: return pa::MicroKernelsPortable(cache_dtype);
  }
}

void PagedAttentionCpu(const PagedAttentionArgs& a) {
  const std::vector<SeqInfo> seqs = ReadAndCheckMetadata(a);
  pa::ProblemShape shape;
  shape.num_seqs = a.block_tables.size(0);
  shape.num_heads = a.q.size(1);
  shape.num_kv_heads = a.k_cache.size(2);
  shape.head_dim = a.q.size(2);
  shape.max_query_len = a.max_query_len;
  shape.max_seq_len = a.max_seq_len;
  shape.num_threads = NumThreads();
  shape.isa = ActiveIsa();
  const pa::Plan plan = pa::ChoosePlan(shape);
  reach::Hit(std::string("PagedAttentionCpu.") + IsaName(plan.isa));
  if (plan.kv_split_len > 0) reach::Hit("PagedAttentionCpu.split_kv");
  if (plan.kv_heads_per_item < shape.num_kv_heads) reach::Hit("PagedAttentionCpu.split_heads");

  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const Schedule schedule = MakeSchedule(seqs, shape.num_kv_heads, group, plan);
  // A tile never holds more tokens than the longest query.
  const int64_t rows_per_head = std::min(plan.tile_tokens, std::max<int64_t>(1, a.max_query_len)) * group;
  Context c{seqs, KernelsFor(plan.isa, a.k_cache.dtype()), CacheAddressing(a), HeadRows(a.q), HeadRows(a.out),
            a.scale, group, shape.head_dim,
            pa::PaddedHeadDim(shape.head_dim), rows_per_head, plan.kv_heads_per_item * rows_per_head, {}, {}, {}};
  c.partial_acc.resize(schedule.num_partials * c.row_capacity * c.padded_dim);
  c.partial_m.resize(schedule.num_partials * c.row_capacity);
  c.partial_l.resize(schedule.num_partials * c.row_capacity);

  std::vector<int64_t> order(schedule.items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return schedule.items[x].cost > schedule.items[y].cost; });
  RunDynamic(c, static_cast<int64_t>(order.size()),
             [&](int64_t i, Scratch& s) { RunItem(c, schedule.items[order[i]], s); });
  RunDynamic(c, static_cast<int64_t>(schedule.merges.size()),
             [&](int64_t i, Scratch& s) { MergeSlices(c, schedule, schedule.merges[i], s); });
}

}  // namespace

VT_REGISTER_KERNEL(PagedAttention, kCPU, PagedAttentionCpu);

}  // namespace vt::cpu
