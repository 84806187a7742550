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
// Work items are (sequence, kv head, tile of query tokens[, context slice]); each
// streams its visible context once through an online softmax in f32, so K and V
// are read once per kv head for all the query heads (and tokens) that share it:
// decode is bound by reading the cache, and the micro-kernels (paged_attention.h;
// AVX-512 / AVX2 / portable) keep the arithmetic below that bound. Items run on the
// thread pool, largest first, claimed dynamically. With too few items for the
// threads, long contexts are split into slices whose partial softmax states are
// merged per row (paged_attention_plan.cpp decides).
//
// Host metadata is checked before any work: inconsistent query_start_loc, a
// sequence longer than max_seq_len or shorter than its query, or a block id outside
// the cache throws a vt::Error; nothing outside the addressed blocks is read.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
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
  int64_t seq = 0, kv_head = 0;
  int64_t token_begin = 0, token_end = 0;  // rows of q (absolute)
  int64_t kv_begin = 0, kv_end = 0;        // context positions of this item
  int64_t partial = -1;                    // partial-state slot, or -1: write out directly
  int64_t cost = 0;
};

// Items sharing one (sequence, kv head, token tile) whose context was split.
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
      for (int64_t g = 0; g < num_kv_heads; ++g) {
        if (num_slices > 1) s.merges.push_back({static_cast<int64_t>(s.items.size()), num_slices});
        for (int64_t k = 0; k < num_slices; ++k) {
          WorkItem item{b, g, seq.token_begin + t0, seq.token_begin + t1, k * slice, std::min(context, (k + 1) * slice)};
          item.partial = num_slices > 1 ? s.num_partials++ : -1;
          item.cost = (t1 - t0) * group * (item.kv_end - item.kv_begin);
          s.items.push_back(item);
        }
      }
    }
  }
  return s;
}

// Everything a work item reads, and the partial-state buffers of split contexts.
struct Context {
  const PagedAttentionArgs& a;
  const std::vector<SeqInfo>& seqs;
  const pa::MicroKernels& kernels;
  int64_t group, head_dim, padded_dim, rows_per_item;
  std::vector<float> partial_acc, partial_m, partial_l;  // [partials][rows_per_item][padded_dim], [..][rows]
};

struct Scratch {
  explicit Scratch(const Context& c)
      : q(c.rows_per_item * c.padded_dim), acc(c.rows_per_item * c.padded_dim), m(c.rows_per_item),
        l(c.rows_per_item), rescale(c.rows_per_item), scores(c.rows_per_item * pa::kMaxSegment) {}
  std::vector<float> q, acc, m, l, rescale, scores;
};

// Row r of an item = (token token_begin + r / group, head kv_head * group + r % group).
int64_t QueryHead(const Context& c, const WorkItem& item, int64_t r) { return item.kv_head * c.group + r % c.group; }

void LoadQueries(const Context& c, const WorkItem& item, int64_t rows, Scratch& s) {
  const Tensor& q = c.a.q;
  std::fill(s.q.begin(), s.q.begin() + rows * c.padded_dim, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t token = item.token_begin + r / c.group;
    float* row = s.q.data() + r * c.padded_dim;
    LoadRow(ElementAddress(q.data(), q.dtype(), token * q.stride(0) + QueryHead(c, item, r) * q.stride(1)), q.dtype(),
            c.head_dim, row);
    for (int64_t i = 0; i < c.head_dim; ++i) row[i] *= c.a.scale;
  }
}

// The positions [j, j + len) of one kv head that lie in one cache block, len <= kMaxSegment.
pa::KvSegment SegmentAt(const Context& c, const WorkItem& item, int64_t j, int64_t end) {
  const Tensor& kc = c.a.k_cache;
  const Tensor& vc = c.a.v_cache;
  const int64_t block_size = kc.size(1), offset = j % block_size;
  const int32_t block =
      c.a.block_tables.data_ptr<int32_t>()[item.seq * c.a.block_tables.stride(0) + j / block_size];
  pa::KvSegment seg;
  seg.len = static_cast<int>(std::min({end - j, block_size - offset, int64_t{pa::kMaxSegment}}));
  seg.k = ElementAddress(kc.data(), kc.dtype(), block * kc.stride(0) + offset * kc.stride(1) + item.kv_head * kc.stride(2));
  seg.v = ElementAddress(vc.data(), vc.dtype(), block * vc.stride(0) + offset * vc.stride(1) + item.kv_head * vc.stride(2));
  seg.k_step = kc.stride(1);
  seg.v_step = vc.stride(1);
  return seg;
}

void StoreOutputs(const Context& c, const WorkItem& item, int64_t rows, Scratch& s) {
  const Tensor& out = c.a.out;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t token = item.token_begin + r / c.group;
    float* acc = s.acc.data() + r * c.padded_dim;
    const float inv_l = 1.0f / s.l[r];
    for (int64_t i = 0; i < c.head_dim; ++i) acc[i] *= inv_l;
    StoreRow(acc, c.head_dim, ElementAddress(out.data(), out.dtype(), token * out.stride(0) + QueryHead(c, item, r) * out.stride(1)),
             out.dtype());
  }
}

void SavePartial(Context& c, const WorkItem& item, int64_t rows, const Scratch& s) {
  const int64_t base = item.partial * c.rows_per_item;
  std::copy(s.acc.begin(), s.acc.begin() + rows * c.padded_dim, c.partial_acc.begin() + base * c.padded_dim);
  std::copy(s.m.begin(), s.m.begin() + rows, c.partial_m.begin() + base);
  std::copy(s.l.begin(), s.l.begin() + rows, c.partial_l.begin() + base);
}

void RunItem(Context& c, const WorkItem& item, Scratch& s) {
  const SeqInfo& seq = c.seqs[item.seq];
  const int64_t tokens = item.token_end - item.token_begin, rows = tokens * c.group;
  const int64_t first_position = seq.seq_len - seq.q_len + (item.token_begin - seq.token_begin);
  LoadQueries(c, item, rows, s);
  std::fill(s.acc.begin(), s.acc.begin() + rows * c.padded_dim, 0.0f);
  std::fill(s.m.begin(), s.m.begin() + rows, -std::numeric_limits<float>::infinity());
  std::fill(s.l.begin(), s.l.begin() + rows, 0.0f);
  for (int64_t j = item.kv_begin; j < item.kv_end;) {
    const pa::KvSegment seg = SegmentAt(c, item, j, item.kv_end);
    // Tokens before position j see nothing here: the active rows are a suffix.
    const int64_t first_row = std::max<int64_t>(0, j - first_position) * c.group;
    const int active = static_cast<int>(rows - first_row);
    c.kernels.scores(s.q.data() + first_row * c.padded_dim, c.padded_dim, active, seg, c.head_dim,
                     s.scores.data() + first_row * pa::kMaxSegment);
    for (int64_t r = first_row; r < rows; ++r) {
      const int64_t position = first_position + r / c.group;
      const int visible = static_cast<int>(std::min<int64_t>(seg.len, position + 1 - j));
      s.rescale[r] = c.kernels.softmax_step(s.scores.data() + r * pa::kMaxSegment, visible, &s.m[r], &s.l[r]);
    }
    c.kernels.accumulate(s.scores.data() + first_row * pa::kMaxSegment, s.rescale.data() + first_row, active, seg,
                         c.head_dim, s.acc.data() + first_row * c.padded_dim, c.padded_dim);
    j += seg.len;
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
  for (int64_t r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < group.num_items; ++k) {
      m = std::max(m, c.partial_m[schedule.items[group.first_item + k].partial * c.rows_per_item + r]);
    }
    float l = 0;
    float* acc = s.acc.data() + r * c.padded_dim;
    std::fill(acc, acc + c.padded_dim, 0.0f);
    for (int64_t k = 0; k < group.num_items; ++k) {
      const int64_t slot = schedule.items[group.first_item + k].partial * c.rows_per_item + r;
      if (c.partial_l[slot] == 0.0f) continue;  // the row saw nothing in this slice
      const float w = std::exp(c.partial_m[slot] - m);
      l += w * c.partial_l[slot];
      const float* part = c.partial_acc.data() + slot * c.padded_dim;
      for (int64_t i = 0; i < c.head_dim; ++i) acc[i] += w * part[i];
    }
    s.l[r] = l;
  }
  StoreOutputs(c, first, rows, s);
}

// Runs fn(index, scratch) for indices in `order` on the pool, each thread claiming
// the next index as it finishes one.
template <typename Fn>
void RunDynamic(const Context& c, int64_t count, const Fn& fn) {
  std::atomic<int64_t> next{0};
  ParallelFor(NumThreads(), 1, [&](int64_t, int64_t) {
    Scratch scratch(c);
    for (int64_t i; (i = next.fetch_add(1)) < count;) fn(i, scratch);
  });
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

  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const Schedule schedule = MakeSchedule(seqs, shape.num_kv_heads, group, plan);
  const pa::MicroKernels& kernels = plan.isa == Isa::kAvx512 ? pa::MicroKernelsAvx512(a.k_cache.dtype())
                                    : plan.isa == Isa::kAvx2 ? pa::MicroKernelsAvx2(a.k_cache.dtype())
                                                             : pa::MicroKernelsPortable(a.k_cache.dtype());
  Context c{a, seqs, kernels, group, shape.head_dim, pa::PaddedHeadDim(shape.head_dim), plan.tile_tokens * group, {}, {}, {}};
  c.partial_acc.resize(schedule.num_partials * c.rows_per_item * c.padded_dim);
  c.partial_m.resize(schedule.num_partials * c.rows_per_item);
  c.partial_l.resize(schedule.num_partials * c.rows_per_item);

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
