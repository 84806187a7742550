// Contract tests of the gated delta rule ops, GdnRecurrent (token by token) and
// GdnChunkedPrefill (chunks of 64, WY form): each against a double-precision
// recurrent reference written here, against each other, and in pieces against whole
// sequences (the state carries over).
//
// Inputs are shaped like the model's: q and k L2-normalised (q also scaled by
// 1/sqrt(Dk)), g = -exp(A_log) * softplus(...) < 0, beta in (0, 1), random non-zero
// initial states in random slots.
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
using testing::ToDoubles;
using testing::WithPaddedRows;
using testing::WithTransposedStorage;

struct GdnShape {
  int64_t key_heads, value_heads, key_dim, value_dim;
  bool tiled;
};

std::string Describe(const GdnShape& s, DType dtype) {
  return "Hk " + std::to_string(s.key_heads) + " Hv " + std::to_string(s.value_heads) + " Dk " +
         std::to_string(s.key_dim) + " Dv " + std::to_string(s.value_dim) + (s.tiled ? " tiled " : " grouped ") +
         DTypeName(dtype);
}

// Host values of one batch, in f32 before they are rounded to the activation dtype.
struct GdnBatch {
  GdnShape shape;
  std::vector<int64_t> seq_lens;
  std::vector<int32_t> starts, slots;
  int64_t tokens = 0, num_slots = 0;
  std::vector<float> q, k, v, g, beta, states;
};

// Rows of `dim` values drawn from a normal distribution and scaled to L2 norm `norm`.
std::vector<float> NormalisedRows(int64_t rows, int64_t dim, double norm, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<float> out(static_cast<size_t>(rows * dim));
  std::vector<double> row(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (double& x : row) {
      x = normal(rng);
      sum += x * x;
    }
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = static_cast<float>(row[i] * norm / std::sqrt(sum + 1e-6));
  }
  return out;
}

GdnBatch MakeBatch(const GdnShape& shape, const std::vector<int64_t>& seq_lens, std::mt19937& rng) {
  GdnBatch batch{.shape = shape, .seq_lens = seq_lens};
  batch.starts = {0};
  for (int64_t len : seq_lens) batch.starts.push_back(batch.starts.back() + static_cast<int32_t>(len));
  batch.tokens = batch.starts.back();
  const int64_t num_seqs = static_cast<int64_t>(seq_lens.size());
  batch.num_slots = num_seqs + 2;
  std::vector<int32_t> all(static_cast<size_t>(batch.num_slots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  batch.slots.assign(all.begin(), all.begin() + num_seqs);

  const int64_t t = batch.tokens, hk = shape.key_heads, hv = shape.value_heads;
  batch.q = NormalisedRows(t * hk, shape.key_dim, 1.0 / std::sqrt(static_cast<double>(shape.key_dim)), rng);
  batch.k = NormalisedRows(t * hk, shape.key_dim, 1.0, rng);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  batch.v.resize(static_cast<size_t>(t * hv * shape.value_dim));
  for (float& x : batch.v) x = uniform(rng);
  // g = -exp(A_log) * softplus(x): per-token decays exp(g) from ~0.999 down to ~1e-6.
  std::uniform_real_distribution<double> a_log(-2.0, 1.5), pre(-4.0, 3.0), logit(-4.0, 4.0);
  for (int64_t i = 0; i < t * hv; ++i) {
    batch.g.push_back(static_cast<float>(-std::exp(a_log(rng)) * std::log1p(std::exp(pre(rng)))));
    batch.beta.push_back(static_cast<float>(1.0 / (1.0 + std::exp(-logit(rng)))));
  }
  batch.states.resize(static_cast<size_t>(batch.num_slots * hv * shape.key_dim * shape.value_dim));
  for (float& x : batch.states) x = 0.5f * uniform(rng);
  return batch;
}

int64_t KeyHeadOf(const GdnShape& s, int64_t value_head) {
  return s.tiled ? value_head % s.key_heads : value_head / (s.value_heads / s.key_heads);
}

// The gated delta rule token by token in double precision, reading the inputs as the
// op sees them (after rounding to the activation dtype). Updates `states`; returns
// out [T, Hv, Dv].
std::vector<double> ReferenceGdn(const GdnShape& s, const std::vector<double>& q, const std::vector<double>& k,
                                 const std::vector<double>& v, const std::vector<double>& g,
                                 const std::vector<double>& beta, std::vector<double>& states,
                                 const std::vector<int32_t>& starts, const std::vector<int32_t>& slots) {
  const int64_t hk = s.key_heads, hv = s.value_heads, dk = s.key_dim, dv = s.value_dim;
  std::vector<double> out(static_cast<size_t>(starts.back() * hv * dv));
  std::vector<double> u(static_cast<size_t>(dv));
  for (size_t b = 0; b < slots.size(); ++b) {
    for (int64_t h = 0; h < hv; ++h) {
      double* S = &states[static_cast<size_t>((slots[b] * hv + h) * dk * dv)];  // [Dk, Dv]
      const int64_t kh = KeyHeadOf(s, h);
      for (int64_t t = starts[b]; t < starts[b + 1]; ++t) {
        const double* qt = &q[(t * hk + kh) * dk];
        const double* kt = &k[(t * hk + kh) * dk];
        const double* vt = &v[(t * hv + h) * dv];
        const double decay = std::exp(g[t * hv + h]), bt = beta[t * hv + h];
        for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
        std::fill(u.begin(), u.end(), 0.0);
        for (int64_t a = 0; a < dk; ++a)
          for (int64_t c = 0; c < dv; ++c) u[c] += S[a * dv + c] * kt[a];
        for (int64_t c = 0; c < dv; ++c) u[c] = bt * (vt[c] - u[c]);  // delta
        for (int64_t a = 0; a < dk; ++a)
          for (int64_t c = 0; c < dv; ++c) S[a * dv + c] += kt[a] * u[c];
        double* ot = &out[(t * hv + h) * dv];
        for (int64_t a = 0; a < dk; ++a)
          for (int64_t c = 0; c < dv; ++c) ot[c] += S[a * dv + c] * qt[a];
      }
    }
  }
  return out;
}

// How q, k and v are laid out: contiguous; views into one fused row per token
// ([q | k | v], as the conv output is split in the model); or stored head-major
// ([heads, T, D] memory seen as [T, heads, D]).
enum class Layout { kContiguous, kFusedRows, kHeadMajor };

struct GdnTensors {
  Tensor q, k, v, g, beta, states, starts, slots;
};

GdnTensors ToDevice(const GdnBatch& batch, DType dtype, Device device, Layout layout = Layout::kContiguous) {
  const GdnShape& s = batch.shape;
  const int64_t t = batch.tokens, qk_width = s.key_heads * s.key_dim, v_width = s.value_heads * s.value_dim;
  auto cast = [&](const std::vector<float>& values, const Shape& shape) {
    Tensor out = Tensor::Empty(shape, dtype, device);
    out.CopyFrom(Tensor::FromVector(values, shape));
    return out;
  };
  GdnTensors out;
  if (layout == Layout::kFusedRows) {
    Tensor fused_rows = Tensor::Empty({t, 2 * qk_width + v_width}, dtype, device);
    const int64_t row = fused_rows.stride(0);
    out.q = fused_rows.AsStrided({t, s.key_heads, s.key_dim}, {row, s.key_dim, 1}, fused_rows.offset());
    out.k = fused_rows.AsStrided({t, s.key_heads, s.key_dim}, {row, s.key_dim, 1}, fused_rows.offset() + qk_width);
    out.v = fused_rows.AsStrided({t, s.value_heads, s.value_dim}, {row, s.value_dim, 1},
                                 fused_rows.offset() + 2 * qk_width);
    out.q.CopyFrom(Tensor::FromVector(batch.q, out.q.shape()));
    out.k.CopyFrom(Tensor::FromVector(batch.k, out.k.shape()));
    out.v.CopyFrom(Tensor::FromVector(batch.v, out.v.shape()));
  } else {
    out.q = cast(batch.q, {t, s.key_heads, s.key_dim});
    out.k = cast(batch.k, {t, s.key_heads, s.key_dim});
    out.v = cast(batch.v, {t, s.value_heads, s.value_dim});
    if (layout == Layout::kHeadMajor) {
      out.q = WithTransposedStorage(out.q, 0, 1);
      out.k = WithTransposedStorage(out.k, 0, 1);
      out.v = WithTransposedStorage(out.v, 0, 1);
    }
  }
  out.g = Tensor::FromVector(batch.g, {t, s.value_heads}).To(device);
  out.beta = Tensor::FromVector(batch.beta, {t, s.value_heads}).To(device);
  out.states =
      Tensor::FromVector(batch.states, {batch.num_slots, s.value_heads, s.key_dim, s.value_dim}).To(device);
  const int64_t num_seqs = static_cast<int64_t>(batch.slots.size());
  out.starts = Tensor::FromVector(batch.starts, {num_seqs + 1}).To(device);
  out.slots = Tensor::FromVector(batch.slots, {num_seqs}).To(device);
  return out;
}

using GdnOp = void (*)(const GdnArgs&);

// Runs `op` on fresh copies of the inputs' states; returns {out, final states}.
std::pair<Tensor, Tensor> RunOp(GdnOp op, const GdnTensors& in, const GdnShape& s, bool padded_out) {
  Tensor out = Tensor::Empty(in.v.shape(), in.v.dtype(), in.v.device());
  if (padded_out) out = WithPaddedRows(out, 3);
  Poison(out);
  Tensor states = in.states.To(in.states.device());
  op({.q = in.q,
      .k = in.k,
      .v = in.v,
      .g = in.g,
      .beta = in.beta,
      .states = states,
      .query_start_loc = in.starts,
      .state_slot_ids = in.slots,
      .out = out,
      .tiled_value_heads = s.tiled});
  return {out, states};
}

// Tolerances. The state is f32 in every case and follows from the same rounded
// inputs, so it gets an f32 tolerance; out gets its dtype's rounding on top.
// f32: each state element is a decayed sum of rank-one updates with |S| <~ 1, and the
// decays keep rounding errors from growing with length; the largest error measured
// over these cases, both ops and every ISA, is 2.4e-7 (of max(1, |ref|)). 5e-6 leaves
// a 20x margin for other accumulation orders (other devices), while a slip in the
// algebra (a missing decay, a wrong key head, a chunk-boundary error) is >= 1e-3.
constexpr double kStateTolerance = 5e-6;
double OutputTolerance(DType dtype) { return dtype == DType::kF32 ? kStateTolerance : DefaultTolerance(dtype); }

void CheckAgainstReference(const GdnBatch& batch, DType dtype, Layout layout, bool padded_out) {
  const GdnShape& s = batch.shape;
  const GdnTensors host = ToDevice(batch, dtype, kCpu);
  std::vector<double> ref_states = ToDoubles(host.states);
  const std::vector<double> ref = ReferenceGdn(s, ToDoubles(host.q), ToDoubles(host.k), ToDoubles(host.v),
                                               ToDoubles(host.g), ToDoubles(host.beta), ref_states, batch.starts,
                                               batch.slots);
  ForEachDeviceAndIsa([&](Device device) {
    GdnTensors in = ToDevice(batch, dtype, device, layout);
    auto [recurrent_out, recurrent_states] = RunOp(&GdnRecurrent, in, s, padded_out);
    auto [chunked_out, chunked_states] = RunOp(&GdnChunkedPrefill, in, s, padded_out);
    {
      SCOPED_TRACE("GdnRecurrent vs reference");
      EXPECT_TRUE(AllClose(ref, recurrent_out, OutputTolerance(dtype)));
      EXPECT_TRUE(AllClose(ref_states, recurrent_states, kStateTolerance));
    }
    {
      SCOPED_TRACE("GdnChunkedPrefill vs reference");
      EXPECT_TRUE(AllClose(ref, chunked_out, OutputTolerance(dtype)));
      EXPECT_TRUE(AllClose(ref_states, chunked_states, kStateTolerance));
    }
    {
      SCOPED_TRACE("GdnChunkedPrefill vs GdnRecurrent");
      EXPECT_TRUE(AllClose(ToDoubles(recurrent_out), chunked_out, OutputTolerance(dtype)));
      EXPECT_TRUE(AllClose(ToDoubles(recurrent_states), chunked_states, kStateTolerance));
    }
  });
}

// Sequence lengths around the chunk size, with an empty sequence in the batch.
const std::vector<int64_t> kChunkBoundaryLengths = {1, 7, 0, 63, 64, 65, 130, 200};

// Qwen3.5's head sizes (Dk = Dv = 128) with GQA ratios 1, 2 and 3 in both value-head
// orders, in f32.
TEST(GdnTest, RealHeadSizesMatchReference) {
  const std::vector<GdnShape> shapes = {
      {2, 2, 128, 128, false}, {2, 4, 128, 128, false}, {2, 4, 128, 128, true},
      {1, 3, 128, 128, false}, {2, 6, 128, 128, true},
  };
  std::mt19937 rng(1);
  for (const GdnShape& s : shapes) {
    SCOPED_TRACE(Describe(s, DType::kF32));
    CheckAgainstReference(MakeBatch(s, kChunkBoundaryLengths, rng), DType::kF32, Layout::kContiguous, false);
  }
}

// bf16 activations (the model's dtype), inputs as views into fused rows or stored
// head-major, out with padded rows.
TEST(GdnTest, Bf16ActivationsAndStridedViews) {
  std::mt19937 rng(2);
  const GdnShape s = {2, 4, 128, 128, true};
  SCOPED_TRACE(Describe(s, DType::kBF16));
  CheckAgainstReference(MakeBatch(s, kChunkBoundaryLengths, rng), DType::kBF16, Layout::kFusedRows, true);
  CheckAgainstReference(MakeBatch(s, {130, 1, 64}, rng), DType::kBF16, Layout::kHeadMajor, true);
}

// Small and odd head sizes (vector tails everywhere), f32, bf16 and f16.
TEST(GdnTest, OddHeadSizesMatchReference) {
  struct OddCase {
    GdnShape shape;
    DType dtype;
    bool strided;
  };
  const std::vector<OddCase> cases = {
      {{3, 6, 5, 7, false}, DType::kF32, false},   {{1, 3, 33, 17, true}, DType::kF32, true},
      {{2, 2, 16, 40, false}, DType::kBF16, true}, {{2, 4, 9, 24, true}, DType::kF16, false},
      {{1, 1, 1, 1, false}, DType::kF32, false},
  };
  std::mt19937 rng(3);
  for (const OddCase& oc : cases) {
    SCOPED_TRACE(Describe(oc.shape, oc.dtype));
    CheckAgainstReference(MakeBatch(oc.shape, {1, 64, 0, 65, 130, 9}, rng), oc.dtype,
                          oc.strided ? Layout::kFusedRows : Layout::kContiguous, oc.strided);
  }
}

// The rows of sequence `seq`'s tokens [begin, end) of a [T, heads, D] host array.
std::vector<float> SequenceRows(const std::vector<float>& all, const GdnBatch& batch, int64_t seq, int64_t begin,
                                int64_t end, int64_t row_width) {
  const int64_t first = batch.starts[seq];
  return std::vector<float>(all.begin() + (first + begin) * row_width, all.begin() + (first + end) * row_width);
}

// Runs a batch in steps: step i gives sequence b the next pieces[i][b] tokens (0 =
// not scheduled). Ops: `prefill` for steps with any sequence longer than one token,
// `decode` otherwise. Returns the outputs reassembled in the whole batch's row order
// and the final states.
std::pair<std::vector<double>, std::vector<double>> RunInPieces(const GdnBatch& whole,
                                                                const std::vector<std::vector<int64_t>>& pieces,
                                                                GdnOp prefill, GdnOp decode, DType dtype,
                                                                Device device) {
  const GdnShape& s = whole.shape;
  const int64_t qk_row = s.key_heads * s.key_dim, v_row = s.value_heads * s.value_dim;
  Tensor states = Tensor::FromVector(whole.states, {whole.num_slots, s.value_heads, s.key_dim, s.value_dim})
                      .To(device);
  std::vector<double> out(static_cast<size_t>(whole.tokens * v_row));
  std::vector<int64_t> done(whole.seq_lens.size(), 0);
  for (const std::vector<int64_t>& lens : pieces) {
    GdnBatch step{.shape = s, .num_slots = whole.num_slots, .states = whole.states};
    step.starts = {0};
    bool any_long = false;
    for (size_t b = 0; b < lens.size(); ++b) {
      if (lens[b] == 0) continue;
      any_long |= lens[b] > 1;
      const int64_t lo = done[b], hi = done[b] + lens[b];
      auto append = [&](std::vector<float>& dst, const std::vector<float>& src, int64_t width) {
        const std::vector<float> rows = SequenceRows(src, whole, static_cast<int64_t>(b), lo, hi, width);
        dst.insert(dst.end(), rows.begin(), rows.end());
      };
      append(step.q, whole.q, qk_row);
      append(step.k, whole.k, qk_row);
      append(step.v, whole.v, v_row);
      append(step.g, whole.g, s.value_heads);
      append(step.beta, whole.beta, s.value_heads);
      step.seq_lens.push_back(lens[b]);
      step.slots.push_back(whole.slots[b]);
      step.starts.push_back(step.starts.back() + static_cast<int32_t>(lens[b]));
    }
    step.tokens = step.starts.back();
    GdnTensors in = ToDevice(step, dtype, device);
    in.states = states;  // carried from step to step
    Tensor step_out = Tensor::Empty(in.v.shape(), dtype, device);
    Poison(step_out);
    (any_long ? prefill : decode)({.q = in.q,
                                   .k = in.k,
                                   .v = in.v,
                                   .g = in.g,
                                   .beta = in.beta,
                                   .states = states,
                                   .query_start_loc = in.starts,
                                   .state_slot_ids = in.slots,
                                   .out = step_out,
                                   .tiled_value_heads = s.tiled});
    const std::vector<double> step_values = ToDoubles(step_out);
    int64_t row = 0;
    for (size_t b = 0; b < lens.size(); ++b) {
      for (int64_t i = 0; i < lens[b]; ++i, ++row) {
        const int64_t whole_row = whole.starts[b] + done[b] + i;
        std::copy_n(step_values.begin() + row * v_row, v_row, out.begin() + whole_row * v_row);
      }
      done[b] += lens[b];
    }
  }
  return {out, ToDoubles(states)};
}

// A chunked prefill split into pieces (state carried), followed by decode steps,
// equals the whole sequences processed at once; likewise for the recurrent op alone.
TEST(GdnTest, PiecesEqualWholeSequences) {
  const GdnShape s = {2, 4, 128, 128, false};
  std::mt19937 rng(4);
  const GdnBatch whole = MakeBatch(s, {203, 66, 3}, rng);
  // Per step, tokens of each sequence; the last three steps are decode steps.
  const std::vector<std::vector<int64_t>> pieces = {{1, 30, 0}, {63, 0, 2}, {70, 34, 0}, {66, 0, 0},
                                                    {1, 1, 1},  {1, 0, 0},  {1, 1, 0}};
  ForEachDeviceAndIsa([&](Device device) {
    GdnTensors in = ToDevice(whole, DType::kF32, device);
    auto [whole_out, whole_states] = RunOp(&GdnRecurrent, in, s, false);
    const std::vector<double> ref_out = ToDoubles(whole_out), ref_states = ToDoubles(whole_states);
    for (GdnOp prefill : {&GdnChunkedPrefill, &GdnRecurrent}) {
      SCOPED_TRACE(prefill == &GdnChunkedPrefill ? "chunked prefill pieces" : "recurrent pieces");
      auto [out, states] = RunInPieces(whole, pieces, prefill, &GdnRecurrent, DType::kF32, device);
      EXPECT_TRUE(AllClose(ref_out, out, kStateTolerance));
      EXPECT_TRUE(AllClose(ref_states, states, kStateTolerance));
    }
  });
}

// Decode batches (one token per sequence, the engine's decode step) match the
// reference; slots outside the batch are untouched.
TEST(GdnTest, DecodeBatchMatchesReference) {
  const GdnShape s = {4, 8, 128, 128, true};
  std::mt19937 rng(5);
  const GdnBatch batch = MakeBatch(s, std::vector<int64_t>(5, 1), rng);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    CheckAgainstReference(batch, dtype, Layout::kContiguous, false);
  }
}

// A batch whose sequences are all empty (no tokens at all) leaves every state as it was.
TEST(GdnTest, EmptySequencesLeaveStatesUntouched) {
  const GdnShape s = {2, 4, 16, 16, false};
  std::mt19937 rng(7);
  const GdnBatch batch = MakeBatch(s, {0, 0}, rng);
  ForEachDeviceAndIsa([&](Device device) {
    const GdnTensors in = ToDevice(batch, DType::kF32, device);
    for (GdnOp op : {&GdnRecurrent, &GdnChunkedPrefill}) {
      auto [out, states] = RunOp(op, in, s, false);
      EXPECT_EQ(out.numel(), 0);
      EXPECT_TRUE(AllClose(ToDoubles(in.states), states, 0.0));
    }
  });
}

TEST(GdnTest, RejectsBadSequenceTables) {
  const GdnShape s = {1, 1, 4, 4, false};
  std::mt19937 rng(6);
  GdnBatch batch = MakeBatch(s, {2, 2}, rng);
  for (GdnOp op : {&GdnRecurrent, &GdnChunkedPrefill}) {
    for (const auto& [starts, slots] : std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>{
             {{0, 2, 5}, {0, 1}}, {{0, 3, 2}, {0, 1}}, {{0, 2, 4}, {0, 4}}, {{0, 2, 4}, {3, 3}}}) {
      batch.starts = starts;
      batch.slots = slots;
      GdnTensors in = ToDevice(batch, DType::kF32, kCpu);
      try {
        RunOp(op, in, s, false);
        ADD_FAILURE() << "accepted a bad sequence table";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(op == &GdnRecurrent ? "GdnRecurrent" : "GdnChunkedPrefill"), std::string::npos) << what;
        EXPECT_TRUE(what.find("query_start_loc") != std::string::npos || what.find("slot") != std::string::npos)
            << what;
      }
    }
  }
}

}  // namespace
}  // namespace vt
