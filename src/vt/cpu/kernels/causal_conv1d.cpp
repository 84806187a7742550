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
// Layout: work items are (sequence, block of 512 channels). Per item the K-1 history
// rows live in a small f32 ring [K-1][block] (the state's [C, K-1] layout transposed
// once per item), so each token is a channel-contiguous row operation: K vector FMAs
// and a SiLU per element (ConvToken*; AVX2 evaluates exp 8 lanes at a time, which is
// most of the arithmetic). Weights are transposed once per call to f32 [K][C].
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

constexpr int64_t kChannelBlock = 512;

struct ConvProblem {
  const Tensor& x;
  const Tensor& out;
  const Tensor& conv_states;
  const std::vector<float>& weights;  // [K][C]
  int64_t kernel;
  bool silu;
};

// One sequence, channels [c0, c0 + n): the history ring in `ring` ([K-1][n]; row
// (oldest + j) % (K-1) is the j-th oldest input).
void ConvSequenceBlock(const ConvProblem& p, const SequenceSpan& seq, int64_t c0, int64_t n, float* ring) {
  const int64_t channels = p.x.size(1), history = p.kernel - 1;
  float* state = p.conv_states.data_ptr<float>() + (seq.slot * channels + c0) * history;  // [n, K-1]
  for (int64_t c = 0; c < n; ++c)
    for (int64_t j = 0; j < history; ++j) ring[j * n + c] = state[c * history + j];
  const auto token_fn = ActiveIsa() >= Isa::kAvx2 ? &ConvTokenAvx2 : &ConvTokenPortable;
  std::vector<const float*> weights(static_cast<size_t>(p.kernel)), window(static_cast<size_t>(history));
  for (int64_t j = 0; j < p.kernel; ++j) weights[j] = p.weights.data() + j * channels + c0;
  int64_t oldest = 0;
  for (int64_t t = seq.begin; t < seq.end; ++t) {
    for (int64_t j = 0; j < history; ++j) window[j] = ring + ((oldest + j) % history) * n;
    token_fn({.x = ElementAddress(p.x.data(), p.x.dtype(), t * p.x.stride(0) + c0),
              .out = ElementAddress(p.out.data(), p.out.dtype(), t * p.out.stride(0) + c0),
              .dtype = p.x.dtype(),
              .n = n,
              .kernel = p.kernel,
              .weights = weights.data(),
              .window = window.data(),
              .newest = ring + oldest * n,
              .silu = p.silu});
    oldest = (oldest + 1) % history;
  }
  for (int64_t c = 0; c < n; ++c)
    for (int64_t j = 0; j < history; ++j) state[c * history + j] = ring[((oldest + j) % history) * n + c];
}

void RunConv(const ConvProblem& p, const std::vector<SequenceSpan>& seqs) {
  const int64_t channels = p.x.size(1);
  const int64_t num_blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  ParallelFor(static_cast<int64_t>(seqs.size()) * num_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> ring(static_cast<size_t>((p.kernel - 1) * kChannelBlock));
    for (int64_t item = begin; item < end; ++item) {
      const SequenceSpan& seq = seqs[item / num_blocks];
      if (seq.begin == seq.end) continue;
      const int64_t c0 = (item % num_blocks) * kChannelBlock;
      ConvSequenceBlock(p, seq, c0, std::min(kChannelBlock, channels - c0), ring.data());
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
