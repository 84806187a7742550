// MoeExperts contract: out[t] = sum_j w[t,j] * down_e(silu(gate_e x_t) * up_e x_t),
// e = ids[t,j], against a double-precision reference from the dequantized expert
// weights. Separate and fused gate_up expert tensors, float and block dtypes, k
// distinct random experts per token with some experts receiving no tokens, decode
// (1 token) and prefill sizes; out-of-range ids throw. The optional shared expert
// (every token, weight sigmoid(logit)) in the same formats, with an intermediate size
// equal to and unlike the routed experts'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/quant.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

Tensor OnDevice(const Tensor& t, Device device) { return device == t.device() ? t : t.To(device); }

// [E, rows, cols] of `dtype`, values uniform in [-scale, scale).
Tensor RandomExperts(int64_t experts, int64_t rows, int64_t cols, DType dtype, float scale, std::mt19937& rng) {
  const Shape shape = {experts, rows, cols};
  Tensor values = testing::RandomTensor(shape, DType::kF32, kCpu, rng, -scale, scale);
  if (!IsQuantized(dtype)) {
    Tensor out = Tensor::Empty(shape, dtype);
    out.CopyFrom(values);
    return out;
  }
  Tensor out = Tensor::Empty(shape, dtype);
  for (int64_t r = 0; r < experts * rows; ++r) {
    QuantizeRow(values.data_ptr<float>() + r * cols, cols, static_cast<char*>(out.data()) + r * BytesFor(dtype, cols),
                dtype);
  }
  return out;
}

struct Routing {
  Tensor weights, ids;  // [T, k] f32, i32
};

// k distinct experts per token drawn from `allowed`, positive weights summing to 1.
Routing RandomRouting(int64_t tokens, int64_t k, const std::vector<int32_t>& allowed, std::mt19937& rng) {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::uniform_real_distribution<float> dist(0.1f, 1.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> pool = allowed;
    std::shuffle(pool.begin(), pool.end(), rng);
    float total = 0;
    std::vector<float> w(static_cast<size_t>(k));
    for (float& v : w) total += v = dist(rng);
    for (int64_t j = 0; j < k; ++j) {
      ids.push_back(pool[j]);
      weights.push_back(w[j] / total);
    }
  }
  return {Tensor::FromVector(weights, {tokens, k}), Tensor::FromVector(ids, {tokens, k})};
}

// The shared expert: gate / up [Is, H] (rows of one [2Is, H] matrix when `merged`),
// down [H, Is], and the gate logits [T, 1] as a strided column of a [T, 3] tensor.
struct SharedExpert {
  Tensor merged, w_gate, w_up, w_down, logits;
};

// silu(gate x) * up x of one expert's row i, in double.
double GatedActivation(const std::vector<double>& x, const std::vector<double>& gate, const std::vector<double>& up,
                       int64_t row, int64_t hidden) {
  double g = 0, u = 0;
  for (int64_t h = 0; h < hidden; ++h) {
    g += x[h] * gate[row * hidden + h];
    u += x[h] * up[row * hidden + h];
  }
  return g / (1 + std::exp(-g)) * u;
}

std::vector<double> Reference(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                              const Routing& routing, const SharedExpert* shared = nullptr) {
  const int64_t tokens = x.size(0), hidden = x.size(1), inter = w_gate.size(1), k = routing.ids.size(1);
  const std::vector<double> xv = testing::ToDoubles(x), gate = testing::ToDoubles(w_gate),
                            up = testing::ToDoubles(w_up), down = testing::ToDoubles(w_down),
                            weights = testing::ToDoubles(routing.weights);
  const std::vector<int64_t> ids = testing::ToInts(routing.ids);
  std::vector<double> out(static_cast<size_t>(tokens * hidden), 0.0), act(static_cast<size_t>(inter));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[t * k + j];
      const std::vector<double> x_row(xv.begin() + t * hidden, xv.begin() + (t + 1) * hidden);
      for (int64_t i = 0; i < inter; ++i) act[i] = GatedActivation(x_row, gate, up, e * inter + i, hidden);
      for (int64_t h = 0; h < hidden; ++h) {
        double d = 0;
        for (int64_t i = 0; i < inter; ++i) d += act[i] * down[(e * hidden + h) * inter + i];
        out[t * hidden + h] += weights[t * k + j] * d;
      }
    }
  }
  if (shared == nullptr) return out;
  const int64_t shared_inter = shared->w_gate.size(0);
  const std::vector<double> s_gate = testing::ToDoubles(shared->w_gate), s_up = testing::ToDoubles(shared->w_up),
                            s_down = testing::ToDoubles(shared->w_down), logits = testing::ToDoubles(shared->logits);
  std::vector<double> s_act(static_cast<size_t>(shared_inter));
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<double> x_row(xv.begin() + t * hidden, xv.begin() + (t + 1) * hidden);
    for (int64_t i = 0; i < shared_inter; ++i) s_act[i] = GatedActivation(x_row, s_gate, s_up, i, hidden);
    const double weight = 1 / (1 + std::exp(-logits[t]));
    for (int64_t h = 0; h < hidden; ++h) {
      double d = 0;
      for (int64_t i = 0; i < shared_inter; ++i) d += s_act[i] * s_down[h * shared_inter + i];
      out[t * hidden + h] += weight * d;
    }
  }
  return out;
}

// Relative to the largest |out| (AllClose), on top of out's rounding:
//  - block weights: the kernel may quantize x and the SiLU product to 8 bits before
//    each projection (each off by <= 0.4% of its block's largest value, independent
//    errors), two stages in a row: 2e-2.
//  - bf16 weights with f32 x: x split into two bf16 terms (2^-17 per product), twice: 2e-4.
//  - f32 weights: f32 accumulation through two projections and the SiLU: 1e-4.
double Tolerance(DType x_dtype, DType w_dtype) {
  const double out_rounding = testing::DefaultTolerance(x_dtype);
  if (IsQuantized(w_dtype)) return 2e-2 + out_rounding;
  if (w_dtype == DType::kBF16) return 2e-4 + out_rounding;
  return 1e-4 + out_rounding;
}

constexpr int64_t kExperts = 8, kHidden = 256, kInter = 256;

// Expert weights of one dtype, either as separate gate / up tensors or as slices of
// one fused gate_up [E, 2I, H] tensor (`fused` defined).
struct Experts {
  Tensor fused, w_gate, w_up, w_down;
};

// Scales keep gate/up outputs O(1) so the SiLU sees both signs and its curve.
Experts RandomExpertSet(DType dtype, bool fused_gate_up, std::mt19937& rng, int64_t hidden = kHidden,
                        int64_t inter = kInter) {
  Experts e;
  if (fused_gate_up) {
    e.fused = RandomExperts(kExperts, 2 * inter, hidden, dtype, 0.12f, rng);
    e.w_gate = e.fused.Slice(1, 0, inter);
    e.w_up = e.fused.Slice(1, inter, 2 * inter);
  } else {
    e.w_gate = RandomExperts(kExperts, inter, hidden, dtype, 0.12f, rng);
    e.w_up = RandomExperts(kExperts, inter, hidden, dtype, 0.12f, rng);
  }
  e.w_down = RandomExperts(kExperts, hidden, inter, dtype, 0.12f, rng);
  return e;
}

// A shared expert of `inter` rows for `tokens` tokens, logits of x's dtype in [-3, 3).
SharedExpert RandomSharedExpert(DType dtype, DType logit_dtype, bool merged, int64_t tokens, int64_t hidden,
                                int64_t inter, std::mt19937& rng) {
  SharedExpert s;
  if (merged) {
    s.merged = RandomExperts(1, 2 * inter, hidden, dtype, 0.12f, rng).Select(0, 0);
    s.w_gate = s.merged.Slice(0, 0, inter);
    s.w_up = s.merged.Slice(0, inter, 2 * inter);
  } else {
    s.w_gate = RandomExperts(1, inter, hidden, dtype, 0.12f, rng).Select(0, 0);
    s.w_up = RandomExperts(1, inter, hidden, dtype, 0.12f, rng).Select(0, 0);
  }
  s.w_down = RandomExperts(1, hidden, inter, dtype, 0.12f, rng).Select(0, 0);
  s.logits = testing::RandomTensor({tokens, 3}, logit_dtype, kCpu, rng, -3.0f, 3.0f).Slice(1, 1, 2);
  return s;
}

void CheckMoe(DType x_dtype, const Experts& experts, int64_t tokens, int64_t k, std::mt19937& rng,
              const SharedExpert* shared = nullptr) {
  const DType w_dtype = experts.w_down.dtype();
  const int64_t hidden = experts.w_down.size(1), inter = experts.w_down.size(2);
  SCOPED_TRACE(std::string("x ") + DTypeName(x_dtype) + " w " + DTypeName(w_dtype) + " T=" + std::to_string(tokens) +
               " k=" + std::to_string(k) + " H=" + std::to_string(hidden) + (experts.fused.defined() ? " fused" : ""));
  const Tensor x = testing::WithPaddedRows(testing::RandomTensor({tokens, hidden}, x_dtype, kCpu, rng), 4);
  // Experts 2 and 5 never receive a token.
  const Routing routing = RandomRouting(tokens, k, {0, 1, 3, 4, 6, 7}, rng);
  const std::vector<double> ref = Reference(x, experts.w_gate, experts.w_up, experts.w_down, routing, shared);
  testing::ForEachDeviceAndIsa([&](Device device) {
    auto on = [&](const Tensor& t) { return OnDevice(t, device); };
    // The fused layout moves to the device as one tensor, then is sliced there.
    const bool fused = experts.fused.defined();
    const Tensor gate = fused ? on(experts.fused).Slice(1, 0, inter) : on(experts.w_gate);
    const Tensor up = fused ? on(experts.fused).Slice(1, inter, 2 * inter) : on(experts.w_up);
    const Tensor out = testing::WithPaddedRows(Tensor::Zeros({tokens, hidden}, x_dtype, device), 3);
    testing::Poison(out);
    MoeExpertsArgs args{.x = on(x),
                        .w_gate = gate,
                        .w_up = up,
                        .w_down = on(experts.w_down),
                        .topk_weights = on(routing.weights),
                        .topk_ids = on(routing.ids),
                        .out = out};
    if (shared != nullptr) {
      const int64_t s_inter = shared->w_gate.size(0);
      const bool merged = shared->merged.defined();
      args.shared_w_gate = merged ? on(shared->merged).Slice(0, 0, s_inter) : on(shared->w_gate);
      args.shared_w_up = merged ? on(shared->merged).Slice(0, s_inter, 2 * s_inter) : on(shared->w_up);
      args.shared_w_down = on(shared->w_down);
      args.shared_gate_logits = on(shared->logits);
    }
    MoeExperts(args);
    EXPECT_TRUE(testing::AllClose(ref, out, Tolerance(x_dtype, w_dtype)));
  });
}

TEST(MoeExpertsTest, FloatExperts) {
  std::mt19937 rng(1);
  for (DType w_dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (bool fused : {false, true}) {
      const Experts experts = RandomExpertSet(w_dtype, fused, rng);
      for (int64_t tokens : {1, 5, 37}) CheckMoe(DType::kF32, experts, tokens, 2, rng);
      CheckMoe(DType::kBF16, experts, 9, 3, rng);
    }
  }
}

TEST(MoeExpertsTest, QuantizedExperts) {
  std::mt19937 rng(2);
  for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const bool fused = w_dtype != DType::kQ5_K;  // Q5_K covers separate gate / up tensors
    const Experts experts = RandomExpertSet(w_dtype, fused, rng);
    for (int64_t tokens : {1, 5, 37}) CheckMoe(DType::kF32, experts, tokens, 3, rng);
    CheckMoe(DType::kBF16, experts, 6, 2, rng);
  }
}

class ForcedMoeVariant {
 public:
  explicit ForcedMoeVariant(const char* variant) { tuning::SetVariant("gpu.moe_experts", variant); }
  ~ForcedMoeVariant() { tuning::SetVariant("gpu.moe_experts", ""); }
};

// The grouped tensor-core kernels (CUDA: src/vt/gpu/moe_grouped.cu), forced for every
// batch through vt::tuning, and the per-pair kernels forced where the default would
// group: 1 to 130 tokens (tiles cut within an expert, experts 2 and 5 without
// pairs), every weight dtype the grouped kernels decode, f32 and bf16 x. Q8_0, Q4_0,
// Q4_K and Q5_K take the int8 tiles, in 16-pair tiles at 37 tokens (74 pairs, 9 an
// expert) and 64-pair tiles at 130 (390 pairs, 49 an expert: both sides of
// kQmmaLargeTilePairs = 16); Q6_K and float weights the bf16 tiles. On a CUDA device
// each call checks which kernels ran.
TEST(MoeExpertsTest, GroupedAndPerPairKernelsMatchTheReference) {
  std::mt19937 rng(5);
  bool cuda = false;
  for (Device d : testing::GpuTestDevices()) cuda = cuda || d.type == DeviceType::kCUDA;
  for (const char* variant : {"grouped", "per_pair"}) {
    const ForcedMoeVariant forced(variant);
    for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kBF16,
                          DType::kF16}) {
      const bool blocks = IsQuantized(w_dtype);
      const Experts experts = RandomExpertSet(w_dtype, w_dtype != DType::kQ5_K, rng);
      for (int64_t tokens : {1, 37, 130}) {
        reach::Reset();
        CheckMoe(blocks ? DType::kF32 : DType::kBF16, experts, tokens, tokens == 130 ? 3 : 2, rng);
        if (cuda) {
          const bool grouped = std::string(variant) == "grouped";
          EXPECT_EQ(reach::Count("MoeExpertsGpu.grouped") > 0, grouped) << variant << " " << DTypeName(w_dtype);
          EXPECT_EQ(reach::Count("MoeExpertsGpu.per_pair") > 0, !grouped) << variant << " " << DTypeName(w_dtype);
          const bool int8 = grouped && w_dtype != DType::kQ6_K && blocks;
          EXPECT_EQ(reach::Count("MoeExpertsGpu.grouped_int8") > 0, int8) << variant << " " << DTypeName(w_dtype);
          EXPECT_EQ(reach::Count("MoeExpertsGpu.grouped_bf16") > 0, grouped && !int8)
              << variant << " " << DTypeName(w_dtype);
        }
      }
    }
  }
  // Float weights with f32 x stay on the per-pair kernels (products in f32).
  const ForcedMoeVariant forced("grouped");
  reach::Reset();
  CheckMoe(DType::kF32, RandomExpertSet(DType::kBF16, false, rng), 130, 2, rng);
  if (cuda) {
    EXPECT_EQ(reach::Count("MoeExpertsGpu.grouped"), 0u);
    EXPECT_GT(reach::Count("MoeExpertsGpu.per_pair"), 0u);
  }
}

// The per-pair kernels with int8 lanes quantize each token's x row inside the
// hidden kernel's blocks when it fits in 24 KB of shared memory (H <= 19,660) and
// in a launch before otherwise (moe.cu); both routes, f32 and bf16 x.
TEST(MoeExpertsTest, PerPairQuantizesXInSharedMemoryOrBefore) {
  std::mt19937 rng(6);
  bool cuda_or_rocm = !testing::GpuTestDevices().empty();
  for (int64_t hidden : {int64_t{256}, int64_t{20480}}) {
    const Experts experts = RandomExpertSet(DType::kQ8_0, true, rng, hidden, 32);
    for (DType x_dtype : {DType::kF32, DType::kBF16}) {
      reach::Reset();
      CheckMoe(x_dtype, experts, 3, 2, rng);
      if (cuda_or_rocm) {
        const char* route = hidden == 256 ? "MoeExpertsGpu.per_pair.x_shared" : "MoeExpertsGpu.per_pair.x_separate";
        EXPECT_GT(reach::Count(route), 0u) << route;
      }
    }
  }
}

// One token (batch-1 decode) of the formats the staged int8 GEMV reads takes it on
// CUDA (matmul_quant_staged.cu: the gate|up rows of the chosen experts, then their
// down rows as one long row): H and I of one and two 256-value stages, 2 and 6
// experts a token (a pass of 4 and 12 parts), fused and separate gate|up, f32 and
// bf16 x. Q6_K keeps the per-pair kernels. On CUDA each call checks which ran.
TEST(MoeExpertsTest, OneTokenTakesTheStagedExpertRows) {
  std::mt19937 rng(8);
  bool cuda = false;
  for (Device d : testing::GpuTestDevices()) cuda = cuda || d.type == DeviceType::kCUDA;
  for (DType w_dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (int64_t hidden : {int64_t{256}, int64_t{512}}) {
      const int64_t inter = hidden == 256 ? 512 : 256;
      const Experts experts = RandomExpertSet(w_dtype, hidden == 256, rng, hidden, inter);
      for (int64_t k : {int64_t{2}, int64_t{6}}) {
        reach::Reset();
        CheckMoe(k == 2 ? DType::kBF16 : DType::kF32, experts, 1, k, rng);
        if (cuda) {
          EXPECT_EQ(reach::Count("MoeExpertsGpu.staged") > 0, w_dtype != DType::kQ6_K) << DTypeName(w_dtype);
        }
      }
    }
  }
}

// The shared expert, every token weighted by sigmoid of its strided logit column:
// float and block formats, merged and separate gate|up, Is equal to I (one token of
// a staged format folds it into the staged passes on CUDA as pair k) and unlike it
// (the generic ops after the routed kernels), 1, 5 and 37 tokens. On CUDA each call
// checks which route ran.
TEST(MoeExpertsTest, SharedExpertIsAddedWithItsSigmoidWeight) {
  std::mt19937 rng(10);
  bool cuda = false;
  for (Device d : testing::GpuTestDevices()) cuda = cuda || d.type == DeviceType::kCUDA;
  for (DType w_dtype : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const Experts experts = RandomExpertSet(w_dtype, true, rng, 256, 256);
    for (int64_t shared_inter : {int64_t{256}, int64_t{512}}) {
      for (int64_t tokens : {1, 5, 37}) {
        const DType x_dtype = tokens == 5 ? DType::kBF16 : DType::kF32;
        const bool merged = tokens != 37;
        const SharedExpert shared =
            RandomSharedExpert(w_dtype, x_dtype, merged, tokens, 256, shared_inter, rng);
        SCOPED_TRACE("shared Is=" + std::to_string(shared_inter) + (merged ? " merged" : " separate"));
        reach::Reset();
        CheckMoe(x_dtype, experts, tokens, 3, rng, &shared);
        if (cuda) {
          const bool staged = tokens == 1 && (w_dtype == DType::kQ8_0 || w_dtype == DType::kQ4_K);
          const bool folded = staged && shared_inter == 256;
          EXPECT_EQ(reach::Count("MoeExpertsGpu.staged.shared_folded") > 0, folded) << DTypeName(w_dtype);
          EXPECT_EQ(reach::Count("MoeExpertsGpu.shared_separate") > 0, !folded) << DTypeName(w_dtype);
        }
      }
    }
  }
}

TEST(MoeExpertsTest, IncompleteOrMisshapedSharedExpertIsRejectedByName) {
  std::mt19937 rng(11);
  const Experts experts = RandomExpertSet(DType::kF32, false, rng);
  const Routing routing = RandomRouting(2, 2, {0, 1, 2, 3}, rng);
  const SharedExpert shared = RandomSharedExpert(DType::kF32, DType::kF32, false, 2, kHidden, 64, rng);
  const auto expect_error = [&](MoeExpertsArgs args, const std::string& needle) {
    try {
      MoeExperts(args);
      ADD_FAILURE() << "accepted; expected an error naming " << needle;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MoeExperts"), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
  };
  const MoeExpertsArgs base{.x = Tensor::Zeros({2, kHidden}, DType::kF32),
                            .w_gate = experts.w_gate,
                            .w_up = experts.w_up,
                            .w_down = experts.w_down,
                            .topk_weights = routing.weights,
                            .topk_ids = routing.ids,
                            .out = Tensor::Zeros({2, kHidden}, DType::kF32),
                            .shared_w_gate = shared.w_gate,
                            .shared_w_up = shared.w_up,
                            .shared_w_down = shared.w_down,
                            .shared_gate_logits = shared.logits};
  MoeExpertsArgs missing = base;
  missing.shared_w_up = Tensor();
  expect_error(missing, "shared_w_up");
  MoeExpertsArgs wrong_down = base;
  wrong_down.shared_w_down = shared.w_gate;  // [Is, H] where [H, Is] is due
  expect_error(wrong_down, "shared_w_down");
  MoeExpertsArgs wrong_logits = base;
  wrong_logits.shared_gate_logits = Tensor::Zeros({2, 2}, DType::kF32);
  expect_error(wrong_logits, "shared_gate_logits");
}

// A bad id met by the staged route (one token) is reported as the per-pair kernels' is.
TEST(MoeExpertsTest, OutOfRangeExpertIdOfOneTokenThrows) {
  std::mt19937 rng(9);
  const Experts experts = RandomExpertSet(DType::kQ8_0, false, rng);
  testing::ForEachDeviceAndIsa([&](Device device) {
    auto on = [&](const Tensor& t) { return OnDevice(t, device); };
    const Tensor ids = Tensor::FromVector(std::vector<int32_t>{3, 8}, {1, 2});
    const Tensor weights = Tensor::FromVector(std::vector<float>{0.5f, 0.5f}, {1, 2});
    try {
      MoeExperts({.x = Tensor::Zeros({1, kHidden}, DType::kF32, device),
                  .w_gate = on(experts.w_gate),
                  .w_up = on(experts.w_up),
                  .w_down = on(experts.w_down),
                  .topk_weights = on(weights),
                  .topk_ids = on(ids),
                  .out = Tensor::Zeros({1, kHidden}, DType::kF32, device)});
      Synchronize(device);
      ADD_FAILURE() << "expert id 8 of 8 experts was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MoeExperts"), std::string::npos) << what;
      EXPECT_NE(what.find("topk_ids[0, 1] = 8"), std::string::npos) << what;
    }
  });
}

TEST(MoeExpertsTest, OutOfRangeExpertIdThrows) {
  std::mt19937 rng(3);
  const Tensor w_gate = RandomExperts(4, 32, 64, DType::kF32, 0.1f, rng);
  const Tensor w_up = RandomExperts(4, 32, 64, DType::kF32, 0.1f, rng);
  const Tensor w_down = RandomExperts(4, 64, 32, DType::kF32, 0.1f, rng);
  testing::ForEachDeviceAndIsa([&](Device device) {
    auto on = [&](const Tensor& t) { return OnDevice(t, device); };
    const Tensor ids = Tensor::FromVector(std::vector<int32_t>{0, 1, 2, 4}, {2, 2});
    const Tensor weights = Tensor::FromVector(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}, {2, 2});
    try {
      MoeExperts({.x = Tensor::Zeros({2, 64}, DType::kF32, device),
                  .w_gate = on(w_gate),
                  .w_up = on(w_up),
                  .w_down = on(w_down),
                  .topk_weights = on(weights),
                  .topk_ids = on(ids),
                  .out = Tensor::Zeros({2, 64}, DType::kF32, device)});
      Synchronize(device);  // a GPU kernel's bad id is reported at the next wait (gpu_runtime.h)
      ADD_FAILURE() << "expert id 4 of 4 experts was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MoeExperts"), std::string::npos) << what;
      EXPECT_NE(what.find("topk_ids[1, 1] = 4"), std::string::npos) << what;
    }
  });
}

// Expert parallelism: w_* hold a slice [expert_begin, expert_begin + E) of the
// model's num_experts; a token's pairs routed outside the slice add nothing, so the
// slices' outputs sum to the whole set's (the all-reduce after the FFN does that
// sum). Uneven slices, Q8_0 and f32 weights, decode and prefill sizes; on GPUs a
// slice is refused by name (tensor and expert parallelism run on the CPU).
TEST(MoeExpertsTest, ExpertSlicesSumToTheWholeSet) {
  std::mt19937 rng(11);
  for (DType w_dtype : {DType::kF32, DType::kQ8_0}) {
    const Experts experts = RandomExpertSet(w_dtype, true, rng);
    for (int64_t tokens : {1, 23}) {
      SCOPED_TRACE(std::string(DTypeName(w_dtype)) + " T=" + std::to_string(tokens));
      const Tensor x = testing::RandomTensor({tokens, kHidden}, DType::kF32, kCpu, rng);
      const Routing routing = RandomRouting(tokens, 3, {0, 1, 2, 3, 4, 5, 6, 7}, rng);
      const std::vector<double> ref = Reference(x, experts.w_gate, experts.w_up, experts.w_down, routing, nullptr);
      testing::ForEachDeviceAndIsa([&](Device device) {
        auto on = [&](const Tensor& t) { return OnDevice(t, device); };
        std::vector<float> sum(static_cast<size_t>(tokens * kHidden), 0.0f);
        for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, 8}}) {
          const Tensor out = Tensor::Zeros({tokens, kHidden}, DType::kF32, device);
          const MoeExpertsArgs args{.x = on(x),
                                    .w_gate = on(experts.w_gate.Slice(0, begin, end)),
                                    .w_up = on(experts.w_up.Slice(0, begin, end)),
                                    .w_down = on(experts.w_down.Slice(0, begin, end)),
                                    .topk_weights = on(routing.weights),
                                    .topk_ids = on(routing.ids),
                                    .out = out,
                                    .expert_begin = begin,
                                    .num_experts = kExperts};
          if (device.type != DeviceType::kCPU) {
            try {
              MoeExperts(args);
              ADD_FAILURE() << "a slice of the experts was accepted on " << device.ToString();
            } catch (const Error& e) {
              EXPECT_NE(std::string(e.what()).find("expert parallelism"), std::string::npos) << e.what();
            }
            return;
          }
          MoeExperts(args);
          const std::vector<float> part = out.ToFloatVector();
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
        if (device.type == DeviceType::kCPU) {
          EXPECT_TRUE(testing::AllClose(ref, Tensor::FromVector(sum, {tokens, kHidden}),
                                        Tolerance(DType::kF32, w_dtype)));
        }
      });
    }
  }
}

// A slice outside num_experts, an expert_begin without num_experts, and an id past
// num_experts (inside the slice's range or not) are refused naming what is wrong.
TEST(MoeExpertsTest, BadExpertSlicesAndIdsPastTheModelsExpertsAreRefused) {
  std::mt19937 rng(12);
  const Experts experts = RandomExpertSet(DType::kF32, false, rng);
  const Tensor x = Tensor::Zeros({1, kHidden}, DType::kF32);
  const Tensor weights = Tensor::FromVector(std::vector<float>{0.5f, 0.5f}, {1, 2});
  auto run = [&](std::vector<int32_t> ids, int64_t begin, int64_t num_experts) {
    MoeExperts({.x = x,
                .w_gate = experts.w_gate.Slice(0, 0, 4),
                .w_up = experts.w_up.Slice(0, 0, 4),
                .w_down = experts.w_down.Slice(0, 0, 4),
                .topk_weights = weights,
                .topk_ids = Tensor::FromVector(ids, {1, 2}),
                .out = Tensor::Zeros({1, kHidden}, DType::kF32),
                .expert_begin = begin,
                .num_experts = num_experts});
  };
  auto expect_error = [&](const char* what_contains, auto&& call) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error with '" << what_contains << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what_contains), std::string::npos) << e.what();
    }
  };
  expect_error("local experts [6, 10) of w_gate are not within num_experts 8", [&] { run({0, 1}, 6, 8); });
  expect_error("expert_begin 4 needs num_experts", [&] { run({0, 1}, 4, 0); });
  expect_error("topk_ids[0, 1] = 8", [&] { run({0, 8}, 4, 8); });
  expect_error("topk_ids[0, 0] = -1", [&] { run({-1, 5}, 4, 8); });
  EXPECT_NO_THROW(run({0, 7}, 4, 8));  // expert 0 is another rank's: skipped
}

TEST(MoeExpertsTest, Q8_KExpertsAreRejectedByName) {
  std::mt19937 rng(4);
  const Experts experts = RandomExpertSet(DType::kQ8_K, true, rng);
  const Routing routing = RandomRouting(2, 2, {0, 1, 2, 3}, rng);
  testing::ForEachDeviceAndIsa([&](Device device) {
    auto on = [&](const Tensor& t) { return OnDevice(t, device); };
    try {
      MoeExperts({.x = Tensor::Zeros({2, kHidden}, DType::kF32, device),
                  .w_gate = on(experts.fused).Slice(1, 0, kInter),
                  .w_up = on(experts.fused).Slice(1, kInter, 2 * kInter),
                  .w_down = on(experts.w_down),
                  .topk_weights = on(routing.weights),
                  .topk_ids = on(routing.ids),
                  .out = Tensor::Zeros({2, kHidden}, DType::kF32, device)});
      ADD_FAILURE() << "q8_k experts were accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MoeExperts"), std::string::npos) << what;
      EXPECT_NE(what.find("q8_k"), std::string::npos) << what;
    }
  });
}

}  // namespace
}  // namespace vt
