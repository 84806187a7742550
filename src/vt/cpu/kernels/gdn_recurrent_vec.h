// The vectorised GdnRecurrent head kernel (see gdn_recurrent.cpp for the math),
// written against `Vec` (gdn_vec.h) and compiled by gdn_recurrent_avx2.cpp and
// gdn_recurrent_avx512.cpp.
//
// The columns of a head's state S [Dk, Dv] evolve independently, so the kernel walks
// S in strips of kRecurrentVecs vectors of columns and runs every staged token over
// one strip before moving on (a strip of 128 rows is 16 KiB with AVX2, 64 KiB with
// AVX-512: it stays in L1 / L2 across tokens).
// Per token and strip:
//
//     read pass     acc_k = S^T k_t, acc_q = S^T q_t        (for t = 0 only)
//     token         delta = beta (v - decay acc_k);  out = decay acc_q + (k.q) delta
//     update pass   S = decay S + k_t delta^T, and in the same pass
//                   acc_k = S^T k_{t+1}, acc_q = S^T q_{t+1}  (the next read pass)
//
// so each state element costs 1 load, 1 store, 1 multiply and 3 FMAs per token.
#pragma once

#include "gdn_kernels.h"
#include "gdn_vec.h"

namespace vt::cpu::gdn {
namespace {

// Columns [c0, c0 + kVecs * kLanes) of the state; with kPartial the last vector has
// only `last_lanes` columns.
template <int kVecs, bool kPartial>
class RecurrentStrip {
 public:
  using Reg = Vec::Reg;

  RecurrentStrip(const RecurrentHeadArgs& a, int64_t c0, int last_lanes)
      : a_(a), c0_(c0), last_lanes_(last_lanes), strip_(a.state + c0), key_dim_(a.key_dim), row_stride_(a.value_dim) {}

  void Run() {
    Reg acc_k[kVecs], acc_q[kVecs], delta[kVecs];
    ReadPass(a_.k, a_.q, acc_k, acc_q);
    for (int64_t t = 0; t < a_.tokens; ++t) {
      const Reg decay = Vec::Set(a_.decay[t]), beta = Vec::Set(a_.beta[t]), qk = Vec::Set(a_.qk[t]);
      const float* v = a_.v + t * a_.value_dim + c0_;
      float* out = a_.out + t * a_.value_dim + c0_;
      for (int i = 0; i < kVecs; ++i) {
        delta[i] = Vec::Mul(beta, Vec::Sub(Load(v, i), Vec::Mul(decay, acc_k[i])));
        Store(out, i, Vec::Fma(decay, acc_q[i], Vec::Mul(qk, delta[i])));
      }
      const float* k = a_.k + t * a_.key_dim;
      if (t + 1 < a_.tokens) {
        UpdateAndReadPass(decay, k, delta, a_.k + (t + 1) * a_.key_dim, a_.q + (t + 1) * a_.key_dim, acc_k, acc_q);
      } else {
        UpdatePass(decay, k, delta);
      }
    }
  }

 private:
  Reg Load(const float* p, int i) const {
    if (kPartial && i == kVecs - 1) return Vec::LoadPartial(p + i * Vec::kLanes, last_lanes_);
    return Vec::Load(p + i * Vec::kLanes);
  }
  void Store(float* p, int i, Reg v) const {
    if (kPartial && i == kVecs - 1) {
      Vec::StorePartial(p + i * Vec::kLanes, v, last_lanes_);
    } else {
      Vec::Store(p + i * Vec::kLanes, v);
    }
  }
  // Copies of the addressing fields: the vector stores may alias anything, so fields
  // read through a_ would be reloaded after every store.
  float* Row(int64_t r) const { return strip_ + r * row_stride_; }

  // The first read of the strip. The first strip also asks for the rest of each row:
  // the strips after it would otherwise read the state from memory in short pieces
  // a row apart, a pattern the hardware prefetchers follow poorly (decode reads every
  // state element once, so it runs at the speed of this stream).
  void ReadPass(const float* k, const float* q, Reg* acc_k, Reg* acc_q) const {
    const int64_t strip_bytes = kVecs * Vec::kLanes * 4;
    const int64_t tail_bytes = c0_ == 0 ? row_stride_ * 4 - strip_bytes : 0;
    for (int i = 0; i < kVecs; ++i) acc_k[i] = acc_q[i] = Vec::Zero();
    for (int64_t r = 0; r < key_dim_; ++r) {
      const char* tail = reinterpret_cast<const char*>(Row(r)) + strip_bytes;
      for (int64_t byte = 0; byte < tail_bytes; byte += 64) __builtin_prefetch(tail + byte);
      const Reg kr = Vec::Set(k[r]), qr = Vec::Set(q[r]);
      for (int i = 0; i < kVecs; ++i) {
        const Reg s = Load(Row(r), i);
        acc_k[i] = Vec::Fma(kr, s, acc_k[i]);
        acc_q[i] = Vec::Fma(qr, s, acc_q[i]);
      }
    }
  }

  void UpdateAndReadPass(Reg decay, const float* k, const Reg* delta, const float* next_k, const float* next_q,
                         Reg* acc_k, Reg* acc_q) const {
    for (int i = 0; i < kVecs; ++i) acc_k[i] = acc_q[i] = Vec::Zero();
    for (int64_t r = 0; r < key_dim_; ++r) {
      const Reg kr = Vec::Set(k[r]), next_kr = Vec::Set(next_k[r]), next_qr = Vec::Set(next_q[r]);
      float* row = Row(r);
      for (int i = 0; i < kVecs; ++i) {
        const Reg s = Vec::Fma(kr, delta[i], Vec::Mul(decay, Load(row, i)));
        Store(row, i, s);
        acc_k[i] = Vec::Fma(next_kr, s, acc_k[i]);
        acc_q[i] = Vec::Fma(next_qr, s, acc_q[i]);
      }
    }
  }

  void UpdatePass(Reg decay, const float* k, const Reg* delta) const {
    for (int64_t r = 0; r < key_dim_; ++r) {
      const Reg kr = Vec::Set(k[r]);
      float* row = Row(r);
      for (int i = 0; i < kVecs; ++i) Store(row, i, Vec::Fma(kr, delta[i], Vec::Mul(decay, Load(row, i))));
    }
  }

  const RecurrentHeadArgs& a_;
  const int64_t c0_;
  const int last_lanes_;
  float* const strip_;
  const int64_t key_dim_, row_stride_;
};

inline void RecurrentHeadVectorised(const RecurrentHeadArgs& a) {
  constexpr int64_t kStrip = Vec::kRecurrentVecs * Vec::kLanes;
  int64_t c = 0;
  for (; c + kStrip <= a.value_dim; c += kStrip) RecurrentStrip<Vec::kRecurrentVecs, false>(a, c, Vec::kLanes).Run();
  for (; c + Vec::kLanes <= a.value_dim; c += Vec::kLanes) RecurrentStrip<1, false>(a, c, Vec::kLanes).Run();
  if (c < a.value_dim) RecurrentStrip<1, true>(a, c, static_cast<int>(a.value_dim - c)).Run();
}

}  // namespace
}  // namespace vt::cpu::gdn
