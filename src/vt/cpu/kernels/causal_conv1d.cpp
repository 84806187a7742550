// CPU kernels of CausalConv1d (varlen prefill) and CausalConv1dUpdate (decode): the
// depthwise causal conv + SiLU in front of a Gated DeltaNet layer.
//
//   x [T, C] raw inputs (rows strided), weight [C, K], conv_states [slots, C, K-1] f32
//   y[t, c] = act(sum_j w[c, j] * xin[c, t - (K-1) + j]),  w[c, K-1] on the current token
//
// where inputs before a sequence's first token come from its slot's state (oldest
// first); afterwards the state holds the sequence's last K-1 raw inputs (for a
// sequence shorter than K-1, older state shifts in). The decode op is the same with
// one token per sequence.
//
// Layout: y_t depends on inputs only (x_{t-K+1..t}), not on earlier outputs, so work
// items are tiles of 64 tokens of one sequence, each over all channels: token rows
// are read front to back (a channel block per item would touch a new page for every
// token); channels are split only when there are fewer tiles than threads. A tile
// keeps the K-1 previous inputs in an f32 ring [K-1][C]; each token is then a
// channel-contiguous row operation of K FMAs and a SiLU per element
// (ConvToken*; AVX2 evaluates exp 8 lanes at a time, most of the arithmetic). The
// inputs before each sequence come from a snapshot of its state taken before the
// tiles run, so the tile that ends a sequence can write the new state while others
// still start. Weights are transposed once per call to f32 [K][C].
#include <algorithm>
#include <cmath>

#include "../cpu_features.h"
#include "../cpu_util.h"
#include "../thread_pool.h"
#include "gdn_kernels.h"
#include "vt/ops.h"

namespace vt::cpu::gdn {

void ConvTokenPortable(const ConvTokenArgs& a) {
  const int64_t history = a.kernel - 1;
  for (int64_t c = 0; c < a.n; ++c) {
    const float x = LoadFloat(a.x, a.dtype, c);
    float acc = a.weights[history][c] * x;
    for (int64_t j = 0; j < history; ++j) acc += a.weights[j][c] * a.window[j][c];
    a.newest[c] = x;
    StoreFloat(a.out, a.dtype, c, a.silu ? acc / (1.0f + std::exp(-acc)) : acc);
  }
}

namespace {

constexpr int64_t kTokenTile = 64;

struct ConvProblem {
  const Tensor& x;
  const Tensor& out;
  const Tensor& conv_states;
  const std::vector<float>& weights;  // [K][C]
  int64_t kernel;
  bool silu;
};

// Each sequence's K-1 inputs before its first token, from its state: [B][K-1][C].
std::vector<float> InitialWindows(const ConvProblem& p, const std::vector<SequenceSpan>& seqs) {
  const int64_t channels = p.x.size(1), history = p.kernel - 1;
  std::vector<float> windows(seqs.size() * static_cast<size_t>(history * channels));
  for (size_t b = 0; b < seqs.size(); ++b) {
    const float* state = p.conv_states.data_ptr<float>() + seqs[b].slot * channels * history;  // [C, K-1]
    float* window = windows.data() + b * history * channels;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t j = 0; j < history; ++j) window[j * channels + c] = state[c * history + j];
  }
  return windows;
}

// Tokens [t_begin, t_end) of one sequence, channels [c0, c1).
struct ConvItem {
  int64_t seq, t_begin, t_end, c0, c1;
};

// One item. `initial` [K-1][C] holds the inputs before the sequence; `ring`
// [K-1][c1 - c0] is scratch, row (oldest + j) % (K-1) the j-th oldest input.
void ConvTile(const ConvProblem& p, const SequenceSpan& seq, const float* initial, const ConvItem& item,
              float* ring) {
  const int64_t channels = p.x.size(1), history = p.kernel - 1, n = item.c1 - item.c0;
  for (int64_t j = 0; j < history; ++j) {
    const int64_t position = item.t_begin - history + j;
    if (position >= seq.begin) {
      LoadRow(ElementAddress(p.x.data(), p.x.dtype(), position * p.x.stride(0) + item.c0), p.x.dtype(), n,
              ring + j * n);
    } else {
      std::copy_n(initial + (position - seq.begin + history) * channels + item.c0, n, ring + j * n);
    }
  }
  const auto token_fn = ActiveIsa() >= Isa::kAvx2 ? &ConvTokenAvx2 : &ConvTokenPortable;
  std::vector<const float*> weights(static_cast<size_t>(p.kernel)), window(static_cast<size_t>(history));
  for (int64_t j = 0; j < p.kernel; ++j) weights[j] = p.weights.data() + j * channels + item.c0;
  int64_t oldest = 0;
  for (int64_t t = item.t_begin; t < item.t_end; ++t) {
    for (int64_t j = 0; j < history; ++j) window[j] = ring + ((oldest + j) % history) * n;
    token_fn({.x = ElementAddress(p.x.data(), p.x.dtype(), t * p.x.stride(0) + item.c0),
              .out = ElementAddress(p.out.data(), p.out.dtype(), t * p.out.stride(0) + item.c0),
              .dtype = p.x.dtype(),
              .n = n,
              .kernel = p.kernel,
              .weights = weights.data(),
              .window = window.data(),
              .newest = ring + oldest * n,
              .silu = p.silu});
    oldest = (oldest + 1) % history;
  }
  if (item.t_end == seq.end) {  // the sequence's last K-1 raw inputs become its state
    float* state = p.conv_states.data_ptr<float>() + (seq.slot * channels + item.c0) * history;  // [n, K-1]
    for (int64_t c = 0; c < n; ++c)
      for (int64_t j = 0; j < history; ++j) state[c * history + j] = ring[((oldest + j) % history) * n + c];
  }
}

// Items: 64-token tiles of each sequence, each over all channels unless there are
// fewer tiles than threads (short prefills, decode steps); then channels are split
// too, in parts of at least 512.
std::vector<ConvItem> ConvItems(const std::vector<SequenceSpan>& seqs, int64_t channels, int64_t tile) {
  int64_t num_tiles = 0;
  for (const SequenceSpan& seq : seqs) num_tiles += (seq.end - seq.begin + tile - 1) / tile;
  const int64_t parts = std::clamp<int64_t>((NumThreads() + num_tiles - 1) / std::max<int64_t>(1, num_tiles), 1,
                                            (channels + 511) / 512);
  const int64_t part = (channels + parts - 1) / parts;
  std::vector<ConvItem> items;
  for (size_t b = 0; b < seqs.size(); ++b) {
    for (int64_t t = seqs[b].begin; t < seqs[b].end; t += tile) {
      for (int64_t c0 = 0; c0 < channels; c0 += part) {
        const int64_t t_end = std::min(seqs[b].end, t + tile);
        items.push_back({static_cast<int64_t>(b), t, t_end, c0, std::min(channels, c0 + part)});
      }
    }
  }
  return items;
}

void RunConv(const ConvProblem& p, const std::vector<SequenceSpan>& seqs) {
  const int64_t channels = p.x.size(1), history = p.kernel - 1;
  const int64_t tile = std::max(kTokenTile, history);  // only a sequence's first tile reads `initial`
  const std::vector<float> initial = InitialWindows(p, seqs);
  const std::vector<ConvItem> items = ConvItems(seqs, channels, tile);
  ParallelFor(static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> ring(static_cast<size_t>(history * channels));
    for (int64_t i = begin; i < end; ++i) {
      const ConvItem& item = items[i];
      ConvTile(p, seqs[item.seq], initial.data() + item.seq * history * channels, item, ring.data());
    }
  });
}

// weight [C, K] (any float dtype, contiguous) -> f32 [K][C].
std::vector<float> TransposedWeights(const Tensor& weight) {
  const int64_t channels = weight.size(0), kernel = weight.size(1);
  std::vector<float> rows(static_cast<size_t>(channels * kernel)), out(rows.size());
  LoadRow(weight.data(), weight.dtype(), channels * kernel, rows.data());
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < kernel; ++j) out[j * channels + c] = rows[c * kernel + j];
  return out;
}

void CausalConv1dCpu(const CausalConv1dArgs& args) {
  const std::vector<SequenceSpan> seqs = ReadSequences("CausalConv1d", args.query_start_loc, args.state_slot_ids,
                                                       args.x.size(0), args.conv_states.size(0));
  const std::vector<float> weights = TransposedWeights(args.weight);
  RunConv({args.x, args.out, args.conv_states, weights, args.weight.size(1), args.apply_silu}, seqs);
}

void CausalConv1dUpdateCpu(const CausalConv1dUpdateArgs& args) {
  const std::vector<SequenceSpan> seqs =
      ReadDecodeSlots("CausalConv1dUpdate", args.state_slot_ids, args.conv_states.size(0));
  const std::vector<float> weights = TransposedWeights(args.weight);
  RunConv({args.x, args.out, args.conv_states, weights, args.weight.size(1), args.apply_silu},
          seqs);
}

}  // namespace

VT_REGISTER_KERNEL(CausalConv1d, kCPU, CausalConv1dCpu);
VT_REGISTER_KERNEL(CausalConv1dUpdate, kCPU, CausalConv1dUpdateCpu);

}  // namespace vt::cpu::gdn
