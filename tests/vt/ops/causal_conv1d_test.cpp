// Contract tests of CausalConv1d (varlen prefill over per-sequence conv state) and
// CausalConv1dUpdate (one decode token per sequence) against a double-precision
// reference that keeps its own copy of the conv states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::DefaultTolerance;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::WithPaddedRows;

// Output tolerance: a K-term f32 dot product plus an f32 silu is within a few ulp of
// the double result (1e-5 covers it); for bf16/f16 outputs the final rounding
// dominates (DefaultTolerance).
double OutputTolerance(DType dtype) { return dtype == DType::kF32 ? 1e-5 : DefaultTolerance(dtype); }

std::vector<int32_t> StartLocations(const std::vector<int64_t>& seq_lens) {
  std::vector<int32_t> starts = {0};
  for (int64_t len : seq_lens) starts.push_back(starts.back() + static_cast<int32_t>(len));
  return starts;
}

// `count` distinct slots out of [0, num_slots), in random order.
std::vector<int32_t> RandomSlots(int64_t count, int64_t num_slots, std::mt19937& rng) {
  std::vector<int32_t> slots(static_cast<size_t>(num_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(count));
  return slots;
}

double Silu(double x) { return x / (1.0 + std::exp(-x)); }

// x [T, C], weight [C, K], states [num_slots, C, K-1] (updated); returns out [T, C].
std::vector<double> ReferenceConv(const std::vector<double>& x, int64_t channels, const std::vector<double>& weight,
                                  int64_t kernel, std::vector<double>& states, const std::vector<int32_t>& starts,
                                  const std::vector<int32_t>& slots, bool silu) {
  std::vector<double> out(x.size());
  const int64_t history = kernel - 1;
  for (size_t b = 0; b < slots.size(); ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      double* state = &states[(slots[b] * channels + c) * history];
      std::vector<double> window(state, state + history);  // oldest first
      for (int64_t t = starts[b]; t < starts[b + 1]; ++t) {
        const double current = x[t * channels + c];
        double acc = weight[c * kernel + history] * current;
        for (int64_t j = 0; j < history; ++j) acc += weight[c * kernel + j] * window[j];
        out[t * channels + c] = silu ? Silu(acc) : acc;
        window.erase(window.begin());
        window.push_back(current);
      }
      std::copy(window.begin(), window.end(), state);
    }
  }
  return out;
}

struct ConvCase {
  int64_t channels;
  int64_t kernel;
  std::vector<int64_t> seq_lens;
  DType dtype;
  DType weight_dtype;
  bool silu;
  bool strided;  // x and out with padded rows
};

void RunConvCase(const ConvCase& cc, Device device, std::mt19937& rng) {
  const int64_t tokens = std::accumulate(cc.seq_lens.begin(), cc.seq_lens.end(), int64_t{0});
  const int64_t num_seqs = static_cast<int64_t>(cc.seq_lens.size());
  const int64_t num_slots = num_seqs + 3;
  Tensor x = RandomTensor({tokens, cc.channels}, cc.dtype, device, rng, -2.0f, 2.0f);
  Tensor weight = RandomTensor({cc.channels, cc.kernel}, cc.weight_dtype, device, rng);
  Tensor states = RandomTensor({num_slots, cc.channels, cc.kernel - 1}, DType::kF32, device, rng, -2.0f, 2.0f);
  const std::vector<int32_t> starts = StartLocations(cc.seq_lens);
  const std::vector<int32_t> slots = RandomSlots(num_seqs, num_slots, rng);
  Tensor out = Tensor::Empty({tokens, cc.channels}, cc.dtype, device);
  if (cc.strided) {
    x = WithPaddedRows(x, 5);
    out = WithPaddedRows(out, 3);
  }
  Poison(out);
  std::vector<double> ref_states = ToDoubles(states);
  const std::vector<double> ref = ReferenceConv(ToDoubles(x), cc.channels, ToDoubles(weight), cc.kernel, ref_states,
                                                starts, slots, cc.silu);
  CausalConv1d({.x = x,
                .weight = weight,
                .conv_states = states,
                .query_start_loc = Tensor::FromVector(starts, {num_seqs + 1}).To(device),
                .state_slot_ids = Tensor::FromVector(slots, {num_seqs}).To(device),
                .out = out,
                .apply_silu = cc.silu});
  EXPECT_TRUE(AllClose(ref, out, OutputTolerance(cc.dtype)));
  // The state holds raw inputs, which f32 stores exactly; slots outside the batch
  // keep their values.
  EXPECT_TRUE(AllClose(ref_states, states, 0.0));
}

TEST(CausalConv1dTest, MatchesReference) {
  const std::vector<ConvCase> cases = {
      // Qwen3.5's kernel width 4; lengths 0, 1 and 2 are shorter than the history.
      {37, 4, {5, 0, 1, 2, 3, 17}, DType::kF32, DType::kF32, true, false},
      {37, 4, {5, 0, 1, 2, 3, 17}, DType::kF32, DType::kF32, true, true},
      {70, 4, {9, 1, 33}, DType::kBF16, DType::kBF16, true, true},
      {70, 4, {9, 1, 33}, DType::kBF16, DType::kF32, false, false},
      {19, 4, {4, 6}, DType::kF16, DType::kF16, true, true},
      // Other widths: 2 (one history column) and 3.
      {23, 2, {1, 8, 0, 3}, DType::kF32, DType::kF32, true, true},
      {41, 3, {2, 11}, DType::kBF16, DType::kBF16, true, false},
      // A realistic channel count (Qwen3.5-0.8B conv_dim 6144 scaled down) with long rows.
      {1024, 4, {40, 3}, DType::kBF16, DType::kBF16, true, true},
      // Sequences spanning several 64-token tiles (each tile starts from the inputs
      // before it), among short ones.
      {45, 4, {2, 150, 64, 65, 1}, DType::kF32, DType::kF32, true, true},
      {33, 2, {129, 3}, DType::kBF16, DType::kBF16, true, false},
      // One short sequence over many channels: the channels are split between threads.
      {1100, 4, {5}, DType::kBF16, DType::kBF16, true, true},
      // No tokens at all: every state stays as it was.
      {16, 4, {0, 0}, DType::kF32, DType::kF32, true, false},
  };
  std::mt19937 rng(11);
  ForEachDeviceAndIsa([&](Device device) {
    for (const ConvCase& cc : cases) {
      SCOPED_TRACE("channels " + std::to_string(cc.channels) + " kernel " + std::to_string(cc.kernel) + " dtype " +
                   DTypeName(cc.dtype) + " weight " + DTypeName(cc.weight_dtype) + (cc.silu ? " silu" : "") +
                   (cc.strided ? " strided" : ""));
      RunConvCase(cc, device, rng);
    }
  });
}

// Feeds two sequences to CausalConv1d in pieces (some shorter than the K-1 history,
// some empty) and checks that outputs and final states equal one call over the
// whole sequences: the state carries a chunk over to the next.
TEST(CausalConv1dTest, PiecesEqualWholeSequences) {
  const int64_t channels = 29, kernel = 4;
  // Per step, tokens of each sequence; the last step spans three 64-token tiles.
  const std::vector<std::vector<int64_t>> steps = {{1, 2}, {2, 0}, {1, 1}, {12, 6}, {140, 70}};
  const std::vector<int64_t> totals = {156, 79};
  const std::vector<int32_t> slots = {3, 0};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(dtype));
      std::mt19937 rng(5);
      Tensor weight = RandomTensor({channels, kernel}, dtype, device, rng);
      Tensor initial = RandomTensor({4, channels, kernel - 1}, DType::kF32, device, rng);
      std::vector<Tensor> xs = {RandomTensor({totals[0], channels}, dtype, device, rng),
                                RandomTensor({totals[1], channels}, dtype, device, rng)};
      Tensor slot_ids = Tensor::FromVector(slots, {2}).To(device);

      // Whole sequences at once: rows [seq 0 | seq 1].
      Tensor whole_x = Tensor::Empty({totals[0] + totals[1], channels}, dtype, device);
      whole_x.Slice(0, 0, totals[0]).CopyFrom(xs[0]);
      whole_x.Slice(0, totals[0], totals[0] + totals[1]).CopyFrom(xs[1]);
      Tensor whole_out = Tensor::Empty(whole_x.shape(), dtype, device);
      Tensor whole_states = initial.To(device);
      CausalConv1d({.x = whole_x,
                    .weight = weight,
                    .conv_states = whole_states,
                    .query_start_loc = Tensor::FromVector(StartLocations(totals), {3}).To(device),
                    .state_slot_ids = slot_ids,
                    .out = whole_out,
                    .apply_silu = true});

      Tensor piece_states = initial.To(device);
      std::vector<int64_t> done = {0, 0};
      for (const std::vector<int64_t>& lens : steps) {
        Tensor x = Tensor::Empty({lens[0] + lens[1], channels}, dtype, device);
        for (int s = 0; s < 2; ++s) {
          const int64_t row = s == 0 ? 0 : lens[0];
          x.Slice(0, row, row + lens[s]).CopyFrom(xs[s].Slice(0, done[s], done[s] + lens[s]));
        }
        Tensor out = Tensor::Empty(x.shape(), dtype, device);
        Poison(out);
        CausalConv1d({.x = x,
                      .weight = weight,
                      .conv_states = piece_states,
                      .query_start_loc = Tensor::FromVector(StartLocations(lens), {3}).To(device),
                      .state_slot_ids = slot_ids,
                      .out = out,
                      .apply_silu = true});
        for (int s = 0; s < 2; ++s) {
          const int64_t row = s == 0 ? 0 : lens[0];
          const int64_t whole_row = (s == 0 ? 0 : totals[0]) + done[s];
          // Each output element sees the same window values in the same order, so
          // the pieces reproduce the whole-sequence result exactly.
          EXPECT_TRUE(AllClose(ToDoubles(whole_out.Slice(0, whole_row, whole_row + lens[s])),
                               out.Slice(0, row, row + lens[s]), 0.0));
          done[s] += lens[s];
        }
      }
      EXPECT_TRUE(AllClose(ToDoubles(whole_states), piece_states, 0.0));
    }
  });
}

TEST(CausalConv1dUpdateTest, MatchesReference) {
  struct UpdateCase {
    int64_t batch, channels, kernel;
    DType dtype;
    bool strided;
  };
  const std::vector<UpdateCase> cases = {
      {5, 37, 4, DType::kF32, false}, {3, 70, 4, DType::kBF16, true}, {4, 19, 2, DType::kF16, true},
      {1, 6144, 4, DType::kBF16, false},  // Qwen3.5-0.8B's conv_dim, batch 1
  };
  std::mt19937 rng(17);
  ForEachDeviceAndIsa([&](Device device) {
    for (const UpdateCase& uc : cases) {
      SCOPED_TRACE("batch " + std::to_string(uc.batch) + " channels " + std::to_string(uc.channels) + " kernel " +
                   std::to_string(uc.kernel) + " " + DTypeName(uc.dtype));
      const int64_t num_slots = uc.batch + 2;
      Tensor x = RandomTensor({uc.batch, uc.channels}, uc.dtype, device, rng, -2.0f, 2.0f);
      Tensor weight = RandomTensor({uc.channels, uc.kernel}, uc.dtype, device, rng);
      Tensor states = RandomTensor({num_slots, uc.channels, uc.kernel - 1}, DType::kF32, device, rng);
      const std::vector<int32_t> slots = RandomSlots(uc.batch, num_slots, rng);
      Tensor out = Tensor::Empty(x.shape(), uc.dtype, device);
      if (uc.strided) {
        x = WithPaddedRows(x, 2);
        out = WithPaddedRows(out, 7);
      }
      Poison(out);
      std::vector<double> ref_states = ToDoubles(states);
      const std::vector<double> ref =
          ReferenceConv(ToDoubles(x), uc.channels, ToDoubles(weight), uc.kernel, ref_states,
                        StartLocations(std::vector<int64_t>(static_cast<size_t>(uc.batch), 1)), slots, true);
      CausalConv1dUpdate({.x = x,
                          .weight = weight,
                          .conv_states = states,
                          .state_slot_ids = Tensor::FromVector(slots, {uc.batch}).To(device),
                          .out = out,
                          .apply_silu = true});
      EXPECT_TRUE(AllClose(ref, out, OutputTolerance(uc.dtype)));
      EXPECT_TRUE(AllClose(ref_states, states, 0.0));
    }
  });
}

// The decode step in place (out is x) is allowed: each element is read before it is
// written.
TEST(CausalConv1dUpdateTest, InPlace) {
  std::mt19937 rng(23);
  ForEachDeviceAndIsa([&](Device device) {
    Tensor x = RandomTensor({3, 45}, DType::kF32, device, rng);
    Tensor weight = RandomTensor({45, 4}, DType::kF32, device, rng);
    Tensor states = RandomTensor({3, 45, 3}, DType::kF32, device, rng);
    const std::vector<int32_t> slots = {2, 0, 1};
    std::vector<double> ref_states = ToDoubles(states);
    const std::vector<double> ref =
        ReferenceConv(ToDoubles(x), 45, ToDoubles(weight), 4, ref_states, {0, 1, 2, 3}, slots, false);
    CausalConv1dUpdate({.x = x,
                        .weight = weight,
                        .conv_states = states,
                        .state_slot_ids = Tensor::FromVector(slots, {3}).To(device),
                        .out = x,
                        .apply_silu = false});
    EXPECT_TRUE(AllClose(ref, x, 1e-5));
    EXPECT_TRUE(AllClose(ref_states, states, 0.0));
  });
}

// Sequence tables that would make the kernel read or write out of bounds are refused
// with an error naming the op.
TEST(CausalConv1dTest, RejectsBadSequenceTables) {
  Tensor x = Tensor::Zeros({4, 8}, DType::kF32);
  Tensor weight = Tensor::Zeros({8, 4}, DType::kF32);
  Tensor states = Tensor::Zeros({2, 8, 3}, DType::kF32);
  Tensor out = Tensor::Empty({4, 8}, DType::kF32);
  auto run = [&](std::vector<int32_t> starts, std::vector<int32_t> slots) {
    const int64_t n = static_cast<int64_t>(slots.size());
    CausalConv1d({.x = x,
                  .weight = weight,
                  .conv_states = states,
                  .query_start_loc = Tensor::FromVector(starts, {n + 1}),
                  .state_slot_ids = Tensor::FromVector(slots, {n}),
                  .out = out,
                  .apply_silu = true});
  };
  EXPECT_NO_THROW(run({0, 2, 4}, {1, 0}));
  for (const auto& [starts, slots] : std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>{
           {{0, 5}, {0}},           // past the last token
           {{0, 3, 2}, {0, 1}},     // decreasing
           {{0, 2, 4}, {0, 2}},     // slot out of range
           {{0, 2, 4}, {1, 1}},     // one slot for two sequences
           {{-1, 2}, {0}}}) {       // negative start
    try {
      run(starts, slots);
      ADD_FAILURE() << "accepted a bad sequence table";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("CausalConv1d"), std::string::npos) << what;
      EXPECT_TRUE(what.find("query_start_loc") != std::string::npos || what.find("slot") != std::string::npos)
          << what;
    }
  }
  try {
    CausalConv1dUpdate({.x = x, .weight = weight, .conv_states = states,
                        .state_slot_ids = Tensor::FromVector(std::vector<int32_t>{0, 1, 2, 0}, {4}), .out = out,
                        .apply_silu = true});
    ADD_FAILURE() << "accepted slot 2 of 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CausalConv1dUpdate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("slot"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vt
