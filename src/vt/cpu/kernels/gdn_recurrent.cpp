// CPU kernel of GdnRecurrent: the gated delta rule token by token over a varlen batch
// (the decode step, and the reference form of prefill).
//
//   q, k [T, Hk, Dk]; v, out [T, Hv, Dv]; g, beta [T, Hv] f32;
//   states [slots, Hv, Dk, Dv] f32, read as each sequence's initial state and
//   written with its final state. Value head j reads key head j / (Hv/Hk), or
//   j % Hk with tiled_value_heads. Per token, with S = the head's [Dk, Dv] state:
//     S = exp(g) S;  delta = beta (v - S^T k);  S += k delta^T;  o = S^T q
//
// Work items are (sequence, value head); each stages up to 64 tokens of its q, k, v
// rows as f32 and runs a head kernel over them. The head kernel never forms the
// decayed state separately: with S the state before the token,
//     u = exp(g) S^T k,  delta = beta (v - u),  o = exp(g) S^T q + (k.q) delta,
//     S_new = exp(g) S + k delta^T,
// so a token is one read pass (S^T k and S^T q together) and one update pass. The
// vector kernels (gdn_recurrent_vec.h) go further: columns of S evolve independently,
// so they keep a strip of columns in cache (32 with AVX2, whole rows with AVX-512) for
// all staged tokens and fold the next token's read pass into this token's update
// pass: per state element and token 1 load, 1 store, 1 multiply and 3 FMAs. A decode
// step streams each state through memory once, in row order.
#include <algorithm>
#include <cmath>

#include "../cpu_features.h"
#include "../thread_pool.h"
#include "gdn_kernels.h"
#include "vt/ops.h"

namespace vt::cpu::gdn {

void RecurrentHeadPortable(const RecurrentHeadArgs& a) {
  const int64_t dk = a.key_dim, dv = a.value_dim;
  std::vector<float> u(static_cast<size_t>(dv)), o(static_cast<size_t>(dv));
  for (int64_t t = 0; t < a.tokens; ++t) {
    const float* q = a.q + t * dk;
    const float* k = a.k + t * dk;
    std::fill(u.begin(), u.end(), 0.0f);
    std::fill(o.begin(), o.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const float* row = a.state + i * dv;
      for (int64_t c = 0; c < dv; ++c) {
        u[c] += k[i] * row[c];
        o[c] += q[i] * row[c];
      }
    }
    const float decay = a.decay[t], beta = a.beta[t], qk = a.qk[t];
    float* out = a.out + t * dv;
    for (int64_t c = 0; c < dv; ++c) {
      u[c] = beta * (a.v[t * dv + c] - decay * u[c]);  // delta
      out[c] = decay * o[c] + qk * u[c];
    }
    for (int64_t i = 0; i < dk; ++i) {
      float* row = a.state + i * dv;
      for (int64_t c = 0; c < dv; ++c) row[c] = decay * row[c] + k[i] * u[c];
    }
  }
}

namespace {

constexpr int64_t kTokenBlock = 64;

// f32 staging of one (sequence, value head) pair's rows, up to `rows` (<= kTokenBlock)
// tokens at a time.
struct HeadStaging {
  HeadStaging(int64_t dk, int64_t dv, int64_t rows)
      : q(rows * dk), k(rows * dk), v(rows * dv), out(rows * dv), decay(rows), beta(rows), qk(rows) {}
  std::vector<float> q, k, v, out, decay, beta, qk;
};

void RunSequenceHead(const GdnRecurrentArgs& args, const SequenceSpan& seq, int64_t head, HeadStaging& st) {
  const int64_t key_heads = args.q.size(1), dk = args.q.size(2);
  const int64_t value_heads = args.v.size(1), dv = args.v.size(2);
  const int64_t key_head = KeyHeadOf(head, key_heads, value_heads, args.tiled_value_heads);
  const float* g = args.g.data_ptr<float>();
  const float* beta = args.beta.data_ptr<float>();
  float* state = args.states.data_ptr<float>() + (seq.slot * value_heads + head) * dk * dv;
  const auto head_fn = ActiveIsa() == Isa::kAvx512 ? &RecurrentHeadAvx512
                       : ActiveIsa() == Isa::kAvx2 ? &RecurrentHeadAvx2
                                                   : &RecurrentHeadPortable;
  for (int64_t t0 = seq.begin; t0 < seq.end; t0 += kTokenBlock) {
    const int64_t n = std::min(kTokenBlock, seq.end - t0);
    LoadHeadRows(args.q, key_head, t0, n, st.q.data(), dk);
    LoadHeadRows(args.k, key_head, t0, n, st.k.data(), dk);
    LoadHeadRows(args.v, head, t0, n, st.v.data(), dv);
    for (int64_t i = 0; i < n; ++i) {
      st.decay[i] = std::exp(g[(t0 + i) * value_heads + head]);
      st.beta[i] = beta[(t0 + i) * value_heads + head];
      float qk = 0.0f;
      for (int64_t d = 0; d < dk; ++d) qk += st.q[i * dk + d] * st.k[i * dk + d];
      st.qk[i] = qk;
    }
    head_fn({.state = state,
             .key_dim = dk,
             .value_dim = dv,
             .tokens = n,
             .q = st.q.data(),
             .k = st.k.data(),
             .v = st.v.data(),
             .decay = st.decay.data(),
             .beta = st.beta.data(),
             .qk = st.qk.data(),
             .out = st.out.data()});
    StoreHeadRows(st.out.data(), dv, args.out, head, t0, n);
  }
}

void GdnRecurrentCpu(const GdnRecurrentArgs& args) {
  RunRecurrentSequences(args, ReadSequences("GdnRecurrent", args.query_start_loc, args.state_slot_ids,
                                            args.q.size(0), args.states.size(0)));
}

}  // namespace

void RunRecurrentSequences(const GdnArgs& args, const std::vector<SequenceSpan>& seqs) {
  const int64_t value_heads = args.v.size(1);
  ParallelFor(static_cast<int64_t>(seqs.size()) * value_heads, 1, [&](int64_t begin, int64_t end) {
    FlushDenormalsScope flush_denormals;
    HeadStaging staging(args.q.size(2), args.v.size(2), std::min(kTokenBlock, LongestSequence(seqs)));
    for (int64_t item = begin; item < end; ++item) {
      const SequenceSpan& seq = seqs[item / value_heads];
      if (seq.begin < seq.end) RunSequenceHead(args, seq, item % value_heads, staging);
    }
  });
}

VT_REGISTER_KERNEL(GdnRecurrent, kCPU, GdnRecurrentCpu);

}  // namespace vt::cpu::gdn
