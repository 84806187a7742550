// CPU kernel of GdnChunkedPrefill: the gated delta rule over a varlen batch in chunks
// of C = 64 tokens (the WY form of docs/qwen35.md §3.3), equal to GdnRecurrent up to
// rounding; sequences of fewer than kChunkedMinTokens tokens take the token
// recurrence (gdn_recurrent.cpp) instead. Shapes as GdnRecurrent: q, k [T, Hk, Dk]; v, out [T, Hv, Dv]; g, beta
// [T, Hv] f32; states [slots, Hv, Dk, Dv] f32 (initial state in, final state out).
//
// Per (sequence, value head) and chunk of n <= 64 tokens, with S the state entering
// the chunk, Γ_ij = exp(g_{j+1} + ... + g_i) for j <= i (0 above the diagonal) and
// e_i = exp(g_0 + ... + g_i):
//
//   M    = (I + L)^-1,  L_ij = beta_i (k_i.k_j) Γ_ij for j < i   [n, n] unit lower
//   U    = M (beta ⊙ V)                    [n, Dv]
//   W    = M (beta e ⊙ K)                  [n, Dk]
//   Vnew = U - W S                         [n, Dv]
//   O    = (e ⊙ Q) S + ((Q K^T) ⊙ Γ) Vnew  [n, Dv]
//   S    = e_{n-1} S + (Γ_{n-1,·} ⊙ K)^T Vnew
//
// Γ comes from sums of the chunk's own log-decays, never from differences of a
// running cumulative sum: the latter loses ~|G| * 2^-24 in the exponent once the
// decays add up to hundreds. Every exponent is <= 0, so nothing overflows.
//
// Why it is fast: per token and head the work is about the recurrent form's (3 Dk Dv
// multiply-adds for W S, Q S and K^T Vnew, plus ~5 * 32 * D for the in-chunk
// triangles, against ~4 Dk Dv), but as dense [64 x 128] x [128 x 128]-sized products
// that run from registers (gdn_chunked_vec.h micro-tiles) instead of a load and a
// store per state element per token. Buffers are f32 with rows padded to 16 floats, so the vector
// products need no tails. Work items are (sequence, value head); a worker runs its
// heads chunk-major, value heads of one key head back to back so they share K K^T
// and Q K^T (GQA), and fetches the next head's rows while the current one computes.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../cpu_features.h"
#include "../thread_pool.h"
#include "gdn_kernels.h"
#include "vt/ops.h"

namespace vt::cpu::gdn {
namespace {

constexpr int64_t kChunk = 64;

int64_t PadTo16(int64_t x) { return (x + 15) / 16 * 16; }

void MatMulPortable(const ChunkMatMulArgs& p) {
  for (int64_t i = 0; i < p.m; ++i) {
    float* c = p.c + i * p.ldc;
    const int64_t n = p.c_lower_triangular ? std::min(p.n, i + 1) : p.n;
    for (int64_t j = 0; j < n; ++j) c[j] = p.c_scale == 0.0f ? 0.0f : p.c_scale * c[j];
    const int64_t k_end = p.a_lower_triangular ? std::min(p.k, i + 1) : p.k;
    for (int64_t kk = 0; kk < k_end; ++kk) {
      const float a = p.ab_scale * p.a[i * p.a_row_stride + kk * p.a_col_stride];
      const float* b = p.b + kk * p.ldb;
      for (int64_t j = 0; j < n; ++j) c[j] += a * b[j];
    }
  }
}

void ExpInPlacePortable(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

const ChunkKernels& Kernels() {
  switch (ActiveIsa()) {
    case Isa::kAvx512: return ChunkKernelsAvx512();
    case Isa::kAvx2: return ChunkKernelsAvx2();
    default: return ChunkKernelsPortable();
  }
}

// f32 working buffers of one worker, for chunks of up to `rows` (<= 64) tokens. Rows
// of Dk / Dv values are padded to kp / vp (multiples of 16) and the padding stays 0;
// [rows, 64] matrices have rows of 64.
struct ChunkBuffers {
  ChunkBuffers(int64_t dk, int64_t dv, int64_t rows)
      : kp(PadTo16(dk)), vp(PadTo16(dv)), q(rows * kp), k(rows * kp), kt(kp * kChunk), qe(rows * kp),
        kb(rows * kp), w(rows * kp), v(rows * vp), u(rows * vp), o(rows * vp), kk(rows * kChunk),
        qk(rows * kChunk), decay(rows * kChunk), lower(rows * kChunk), m(rows * kChunk), p(rows * kChunk),
        e(kChunk) {}
  int64_t kp, vp;
  // Key-head rows of the chunk and their products, shared by the value heads that
  // read the same key head: q, k, qe, kb, w [rows, kp]; kt [kp, 64]; kk = K K^T and
  // qk = Q K^T [rows, 64] (lower triangles).
  std::vector<float> q, k, kt, qe, kb, w;
  std::vector<float> v, u, o;  // [rows, vp]
  std::vector<float> kk, qk, decay, lower, m, p;  // [rows, 64]
  std::vector<float> e;  // [64]
};

// One (sequence, value head) pair and where its rows and state live.
struct HeadTask {
  const GdnChunkedPrefillArgs& args;
  const ChunkKernels& kern;
  ChunkBuffers& buf;
  int64_t head, key_head;
  float* state;  // [Dk, vp]
};

// q, k, k^T of the key head and the products K K^T, Q K^T (lower triangles).
void LoadKeyRows(const HeadTask& t, int64_t t0, int64_t n) {
  ChunkBuffers& b = t.buf;
  const int64_t dk = t.args.q.size(2);
  LoadHeadRows(t.args.q, t.key_head, t0, n, b.q.data(), b.kp);
  LoadHeadRows(t.args.k, t.key_head, t0, n, b.k.data(), b.kp);
  for (int64_t d = 0; d < dk; ++d) {
    float* column = b.kt.data() + d * kChunk;
    for (int64_t i = 0; i < n; ++i) column[i] = b.k[i * b.kp + d];
    std::fill(column + n, column + kChunk, 0.0f);
  }
  t.kern.matmul({n, kChunk, dk, b.k.data(), b.kp, 1, b.kt.data(), kChunk, b.kk.data(), kChunk, 0, 1, false, true});
  t.kern.matmul({n, kChunk, dk, b.q.data(), b.kp, 1, b.kt.data(), kChunk, b.qk.data(), kChunk, 0, 1, false, true});
}

// decay[i][j] = Γ_ij and e[i] = exp(g_0 + ... + g_i), from the chunk's log-decays.
void ComputeDecays(const HeadTask& t, int64_t t0, int64_t n) {
  ChunkBuffers& b = t.buf;
  const int64_t value_heads = t.args.g.size(1);
  const float* g = t.args.g.data_ptr<float>() + t0 * value_heads + t.head;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  float cumulative = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i * value_heads];
    float* row = b.decay.data() + i * kChunk;
    for (int64_t j = 0; j < i; ++j) row[j] = row[j - kChunk] + gi;  // row i-1 plus g_i
    row[i] = 0.0f;
    std::fill(row + i + 1, row + kChunk, kMinusInf);
    b.e[i] = cumulative += gi;
  }
  std::fill(b.e.begin() + n, b.e.end(), kMinusInf);
  t.kern.exp_in_place(b.decay.data(), n * kChunk);
  t.kern.exp_in_place(b.e.data(), kChunk);
}

// M = (I + L)^-1 row by row: M_i = e_i - sum_{j<i} L_ij M_j. Row i has non-zeros in
// columns <= i only, so it is computed over the first PadTo16(i) columns.
void InvertUnitLower(const HeadTask& t, int64_t t0, int64_t n) {
  ChunkBuffers& b = t.buf;
  const int64_t value_heads = t.args.g.size(1);
  const float* beta = t.args.beta.data_ptr<float>() + t0 * value_heads + t.head;
  for (int64_t i = 0; i < n; ++i) {
    const float* kk = b.kk.data() + i * kChunk;
    const float* decay = b.decay.data() + i * kChunk;
    float* row = b.lower.data() + i * kChunk;
    for (int64_t j = 0; j < i; ++j) row[j] = beta[i * value_heads] * kk[j] * decay[j];
  }
  for (int64_t i = 0; i < n; ++i) {
    float* m_row = b.m.data() + i * kChunk;
    const int64_t width = PadTo16(i);
    if (i > 0) {
      t.kern.matmul({1, width, i, b.lower.data() + i * kChunk, kChunk, 1, b.m.data(), kChunk, m_row, kChunk, 0, -1,
                     false, false});
    }
    std::fill(m_row + width, m_row + kChunk, 0.0f);
    m_row[i] = 1.0f;
  }
}

// The value head's operands: p = (Q K^T) ⊙ Γ (0 above the diagonal), v <- beta v,
// qe = e q, kb = beta e k.
void PrepareRows(const HeadTask& t, int64_t t0, int64_t n) {
  ChunkBuffers& b = t.buf;
  const int64_t value_heads = t.args.g.size(1);
  const float* beta = t.args.beta.data_ptr<float>() + t0 * value_heads + t.head;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) b.p[i * kChunk + j] = b.qk[i * kChunk + j] * b.decay[i * kChunk + j];
    std::fill(b.p.begin() + i * kChunk + i + 1, b.p.begin() + (i + 1) * kChunk, 0.0f);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float bi = beta[i * value_heads], ei = b.e[i];
    for (int64_t d = 0; d < b.vp; ++d) b.v[i * b.vp + d] *= bi;
    for (int64_t d = 0; d < b.kp; ++d) {
      b.qe[i * b.kp + d] = ei * b.q[i * b.kp + d];
      b.kb[i * b.kp + d] = bi * ei * b.k[i * b.kp + d];
    }
  }
}

// The products of one chunk; afterwards o holds the chunk's outputs and the state
// has moved past the chunk.
void ApplyChunk(const HeadTask& t, int64_t n) {
  ChunkBuffers& b = t.buf;
  const int64_t dk = t.args.q.size(2), kp = b.kp, vp = b.vp;
  const ChunkKernels& k = t.kern;
  float* u = b.u.data();  // U, then Vnew
  k.matmul({n, vp, n, b.m.data(), kChunk, 1, b.v.data(), vp, u, vp, 0, 1, true, false});            // U = M Vb
  k.matmul({n, kp, n, b.m.data(), kChunk, 1, b.kb.data(), kp, b.w.data(), kp, 0, 1, true, false});  // W = M Kb
  k.matmul({n, vp, dk, b.w.data(), kp, 1, t.state, vp, u, vp, 1, -1, false, false});                // Vnew = U - W S
  k.matmul({n, vp, dk, b.qe.data(), kp, 1, t.state, vp, b.o.data(), vp, 0, 1, false, false});       // O = (e Q) S
  k.matmul({n, vp, n, b.p.data(), kChunk, 1, u, vp, b.o.data(), vp, 1, 1, true, false});            // O += P Vnew
  const float* decay_to_end = b.decay.data() + (n - 1) * kChunk;                                     // Γ_{n-1, i}
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < kp; ++d) b.kb[i * kp + d] = decay_to_end[i] * b.k[i * kp + d];
  k.matmul({dk, vp, n, b.kb.data(), 1, kp, u, vp, t.state, vp, b.e[n - 1], 1, false, false});       // S update
}

// One chunk of one head; the key-head rows and products are reused when the previous
// head of this chunk read the same key head. While it computes, the rows of the next
// (head, chunk) the worker will run, `next` at tokens [next_t0, next_t0 + next_n),
// are fetched into cache.
void RunChunk(const HeadTask& t, int64_t t0, int64_t n, bool key_rows_loaded, const HeadTask& next,
              int64_t next_t0, int64_t next_n) {
  if (!key_rows_loaded) LoadKeyRows(t, t0, n);
  LoadHeadRows(t.args.v, t.head, t0, n, t.buf.v.data(), t.buf.vp);
  if (next.key_head != t.key_head || next_t0 != t0) {
    PrefetchHeadRows(t.args.q, next.key_head, next_t0, next_n);
    PrefetchHeadRows(t.args.k, next.key_head, next_t0, next_n);
  }
  PrefetchHeadRows(t.args.v, next.head, next_t0, next_n);
  ComputeDecays(t, t0, n);
  InvertUnitLower(t, t0, n);
  PrepareRows(t, t0, n);
  ApplyChunk(t, n);
  StoreHeadRows(t.buf.o.data(), t.buf.vp, t.args.out, t.head, t0, n);
}

// Value heads `heads` (ordered by key head) of one sequence, chunk-major: at each
// chunk all of them read their rows of the same tokens, so the pages and cache
// lines of a token row, fetched for the first head, serve the others (one head's
// rows alone are a whole token row apart, a new page each), and heads of one key
// head share its products. Each head's state is a [Dk, vp] matrix: in place when
// Dv is a multiple of 16, else a padded copy.
void RunSequenceHeads(const GdnChunkedPrefillArgs& args, const ChunkKernels& kern, ChunkBuffers& buf,
                      const SequenceSpan& seq, const int64_t* heads, int64_t num_heads) {
  const int64_t key_heads = args.q.size(1), dk = args.q.size(2);
  const int64_t value_heads = args.v.size(1), dv = args.v.size(2);
  const bool padded = dv != buf.vp;
  std::vector<float> padded_states(padded ? static_cast<size_t>(num_heads * dk * buf.vp) : 0);
  std::vector<HeadTask> tasks;
  for (int64_t i = 0; i < num_heads; ++i) {
    float* state = args.states.data_ptr<float>() + (seq.slot * value_heads + heads[i]) * dk * dv;
    float* matrix = padded ? padded_states.data() + i * dk * buf.vp : state;
    if (padded) {
      for (int64_t r = 0; r < dk; ++r) std::copy_n(state + r * dv, dv, matrix + r * buf.vp);
    }
    tasks.push_back(
        {args, kern, buf, heads[i], KeyHeadOf(heads[i], key_heads, value_heads, args.tiled_value_heads), matrix});
  }
  for (int64_t t0 = seq.begin; t0 < seq.end; t0 += kChunk) {
    const int64_t n = std::min(kChunk, seq.end - t0);
    for (size_t i = 0; i < tasks.size(); ++i) {
      const bool key_rows_loaded = i > 0 && tasks[i - 1].key_head == tasks[i].key_head;
      const bool last = i + 1 == tasks.size();
      const int64_t next_t0 = last ? t0 + n : t0;
      RunChunk(tasks[i], t0, n, key_rows_loaded, tasks[last ? 0 : i + 1], next_t0,
               std::min(kChunk, seq.end - next_t0));
    }
  }
  if (padded) {
    for (const HeadTask& task : tasks) {
      float* state = args.states.data_ptr<float>() + (seq.slot * value_heads + task.head) * dk * dv;
      for (int64_t r = 0; r < dk; ++r) std::copy_n(task.state + r * buf.vp, dv, state + r * dv);
    }
  }
}

// Value heads sorted by the key head they read (stable), so heads sharing a key head
// are neighbours in both the grouped and the tiled order.
std::vector<int64_t> HeadsByKeyHead(const GdnChunkedPrefillArgs& args) {
  const int64_t key_heads = args.q.size(1), value_heads = args.v.size(1);
  std::vector<int64_t> heads(static_cast<size_t>(value_heads));
  for (int64_t h = 0; h < value_heads; ++h) heads[h] = h;
  std::stable_sort(heads.begin(), heads.end(), [&](int64_t a, int64_t b) {
    return KeyHeadOf(a, key_heads, value_heads, args.tiled_value_heads) <
           KeyHeadOf(b, key_heads, value_heads, args.tiled_value_heads);
  });
  return heads;
}

void GdnChunkedPrefillCpu(const GdnChunkedPrefillArgs& args) {
  std::vector<SequenceSpan> seqs = ReadSequences("GdnChunkedPrefill", args.query_start_loc, args.state_slot_ids,
                                                 args.q.size(0), args.states.size(0));
  // Short sequences (decode rows of a mixed step, MTP verification) run the token
  // recurrence, the same function of the inputs (kChunkedMinTokens says why).
  std::vector<SequenceSpan> short_seqs;
  std::erase_if(seqs, [&](const SequenceSpan& s) {
    const bool is_short = s.end - s.begin < kChunkedMinTokens;
    if (is_short) short_seqs.push_back(s);
    return is_short;
  });
  if (!short_seqs.empty()) RunRecurrentSequences(args, short_seqs);
  if (seqs.empty()) return;
  const int64_t value_heads = args.v.size(1);
  const std::vector<int64_t> heads = HeadsByKeyHead(args);
  const ChunkKernels& kern = Kernels();
  // Items are (sequence, position in `heads`); a worker's range is split into runs
  // of one sequence, and the grain keeps runs long (all heads / threads).
  const int64_t grain = std::max<int64_t>(1, value_heads / NumThreads());
  ParallelFor(static_cast<int64_t>(seqs.size()) * value_heads, grain, [&](int64_t begin, int64_t end) {
    FlushDenormalsScope flush_denormals;
    ChunkBuffers buf(args.q.size(2), args.v.size(2), std::min(kChunk, LongestSequence(seqs)));
    for (int64_t item = begin; item < end;) {
      const int64_t first = item % value_heads, count = std::min(value_heads - first, end - item);
      const SequenceSpan& seq = seqs[item / value_heads];
      if (seq.begin < seq.end) RunSequenceHeads(args, kern, buf, seq, heads.data() + first, count);
      item += count;
    }
  });
}

}  // namespace

const ChunkKernels& ChunkKernelsPortable() {
  static const ChunkKernels kernels = {&MatMulPortable, &ExpInPlacePortable};
  return kernels;
}

VT_REGISTER_KERNEL(GdnChunkedPrefill, kCPU, GdnChunkedPrefillCpu);

}  // namespace vt::cpu::gdn
