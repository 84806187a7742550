// Contract test of GdnDecode (one decode step of a GDN layer, fused) on every device:
// against a double-precision reference of its definition (conv step + SiLU, L2 norms,
// gates, delta rule, gated RMS norm), and against the unfused ops it replaces run on
// the same device (which store the same intermediate roundings). Cases: Qwen3.5's
// head shape (16 / 32 heads of 128) at batch 1 in f32 and bf16, grouped and tiled
// value heads; 4 rows of that head size (8 value heads), slots out of order; odd
// sizes (Dk 20, Dv 12, conv width 3) with slots out of order; Dk 100 / Dv 70 with
// strided rows (mixed, a, b, z as columns of one wider row, as the model passes them)
// and bf16 weights; Dk 192, past the GPU's fused kernels (the unfused ops run there).
// On a GPU each case runs under the kernel choice and each forced variant of
// gpu.gdn_decode (src/vt/gpu/gdn_decode_choice.h), checking which kernel ran.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

struct DecodeCase {
  int64_t batch, hk, hv, dk, dv, kernel;
  std::vector<int32_t> slots;  // per row
  DType dtype;                 // activations
  DType weight_dtype;          // conv weight, A, dt_bias, norm weight
  bool tiled, strided;
};

// The op's inputs on the CPU (drawn once per case, then copied to each device).
struct DecodeInputs {
  Tensor projected;  // [B, C + 2 Hv + Hv Dv (+ pad)]: mixed | a | b | z side by side
  Tensor mixed, a, b, z, conv_weight, conv_states, A, dt_bias, states, slots, norm_weight;
};

DecodeInputs MakeInputs(const DecodeCase& c, std::mt19937& rng) {
  const int64_t channels = 2 * c.hk * c.dk + c.hv * c.dv, num_slots = 4;
  const int64_t width = channels + 2 * c.hv + c.hv * c.dv + (c.strided ? 5 : 0);
  DecodeInputs in;
  in.projected = RandomTensor({c.batch, width}, c.dtype, kCpu, rng, -1.0f, 1.0f);
  const int64_t row = in.projected.stride(0), base = in.projected.offset();
  if (c.strided) {
    in.mixed = in.projected.AsStrided({c.batch, channels}, {row, 1}, base);
    in.a = in.projected.AsStrided({c.batch, c.hv}, {row, 1}, base + channels);
    in.b = in.projected.AsStrided({c.batch, c.hv}, {row, 1}, base + channels + c.hv);
    in.z = in.projected.AsStrided({c.batch, c.hv, c.dv}, {row, c.dv, 1}, base + channels + 2 * c.hv);
  } else {
    in.mixed = RandomTensor({c.batch, channels}, c.dtype, kCpu, rng);
    in.a = RandomTensor({c.batch, c.hv}, c.dtype, kCpu, rng);
    in.b = RandomTensor({c.batch, c.hv}, c.dtype, kCpu, rng);
    in.z = RandomTensor({c.batch, c.hv, c.dv}, c.dtype, kCpu, rng);
  }
  in.conv_weight = RandomTensor({channels, c.kernel}, c.weight_dtype, kCpu, rng, -0.6f, 0.6f);
  in.conv_states = RandomTensor({num_slots, channels, c.kernel - 1}, DType::kF32, kCpu, rng);
  in.A = RandomTensor({c.hv}, c.weight_dtype, kCpu, rng, -4.0f, -0.1f);
  in.dt_bias = RandomTensor({c.hv}, c.weight_dtype, kCpu, rng, -1.0f, 1.0f);
  in.states = RandomTensor({num_slots, c.hv, c.dk, c.dv}, DType::kF32, kCpu, rng, -0.5f, 0.5f);
  in.slots = Tensor::FromVector(c.slots, {c.batch});
  in.norm_weight = RandomTensor({c.dv}, c.weight_dtype, kCpu, rng, 0.5f, 1.5f);
  return in;
}

double Silu(double x) { return x / (1.0 + std::exp(-x)); }

struct Reference {
  std::vector<double> out, states, conv_states;
};

// The op's definition in double precision, from the inputs' stored values.
Reference ReferenceDecode(const DecodeCase& c, const DecodeInputs& in, float eps) {
  const int64_t channels = 2 * c.hk * c.dk + c.hv * c.dv, width = c.kernel - 1, num_slots = in.states.size(0);
  const std::vector<double> mixed = ToDoubles(in.mixed), a = ToDoubles(in.a), b = ToDoubles(in.b), z = ToDoubles(in.z);
  const std::vector<double> w = ToDoubles(in.conv_weight), A = ToDoubles(in.A), dt = ToDoubles(in.dt_bias);
  const std::vector<double> norm_w = ToDoubles(in.norm_weight);
  Reference ref{std::vector<double>(static_cast<size_t>(c.batch * c.hv * c.dv), 0.0), ToDoubles(in.states),
                ToDoubles(in.conv_states)};
  for (int64_t r = 0; r < c.batch; ++r) {
    const int64_t slot = c.slots[static_cast<size_t>(r)];
    if (slot < 0 || slot >= num_slots) continue;
    std::vector<double> conv(static_cast<size_t>(channels));
    for (int64_t ch = 0; ch < channels; ++ch) {
      double* state = ref.conv_states.data() + (slot * channels + ch) * width;
      const double x = mixed[r * channels + ch];
      double sum = w[ch * c.kernel + width] * x;
      for (int64_t j = 0; j < width; ++j) sum += w[ch * c.kernel + j] * state[j];
      for (int64_t j = 0; j + 1 < width; ++j) state[j] = state[j + 1];
      state[width - 1] = x;
      conv[ch] = Silu(sum);
    }
    auto normalised = [&](int64_t first, double scale) {
      double sum_sq = 0.0;
      for (int64_t d = 0; d < c.dk; ++d) sum_sq += conv[first + d] * conv[first + d];
      std::vector<double> out(static_cast<size_t>(c.dk));
      for (int64_t d = 0; d < c.dk; ++d) out[d] = conv[first + d] / std::sqrt(sum_sq + 1e-6) * scale;
      return out;
    };
    for (int64_t h = 0; h < c.hv; ++h) {
      const int64_t kh = c.tiled ? h % c.hk : h / (c.hv / c.hk);
      const std::vector<double> q = normalised(kh * c.dk, 1.0 / std::sqrt(static_cast<double>(c.dk)));
      const std::vector<double> k = normalised(c.hk * c.dk + kh * c.dk, 1.0);
      const double x = a[r * c.hv + h] + dt[h];
      const double decay = std::exp(A[h] * (x > 20.0 ? x : std::log1p(std::exp(x))));
      const double beta = 1.0 / (1.0 + std::exp(-b[r * c.hv + h]));
      double* S = ref.states.data() + (slot * c.hv + h) * c.dk * c.dv;  // [Dk, Dv]
      std::vector<double> o(static_cast<size_t>(c.dv));
      for (int64_t j = 0; j < c.dv; ++j) {
        double read = 0.0;
        for (int64_t i = 0; i < c.dk; ++i) read += decay * S[i * c.dv + j] * k[i];
        const double delta = beta * (conv[2 * c.hk * c.dk + h * c.dv + j] - read);
        for (int64_t i = 0; i < c.dk; ++i) {
          S[i * c.dv + j] = decay * S[i * c.dv + j] + k[i] * delta;
          o[j] += S[i * c.dv + j] * q[i];
        }
      }
      double sum_sq = 0.0;
      for (double v : o) sum_sq += v * v;
      const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(c.dv) + eps);
      for (int64_t j = 0; j < c.dv; ++j) {
        ref.out[(r * c.hv + h) * c.dv + j] = o[j] * inv * norm_w[j] * Silu(z[(r * c.hv + h) * c.dv + j]);
      }
    }
  }
  return ref;
}

struct DecodeOutputs {
  Tensor out, states, conv_states;
};

// GdnDecode on `device` over copies of the inputs' states.
DecodeOutputs RunDecode(const DecodeCase& c, const DecodeInputs& in, float eps, Device device) {
  // Strided cases: the same views into a device copy of the wide rows.
  const Tensor projected = in.projected.To(device);
  auto on_device = [&](const Tensor& t) {
    return c.strided ? projected.AsStrided(t.shape(), t.strides(), t.offset()) : t.To(device);
  };
  DecodeOutputs result{Tensor::Empty({c.batch, c.hv, c.dv}, c.dtype, device), in.states.To(device),
                       in.conv_states.To(device)};
  Poison(result.out);
  GdnDecode({.mixed = on_device(in.mixed),
             .conv_weight = in.conv_weight.To(device),
             .conv_states = result.conv_states,
             .a = on_device(in.a),
             .b = on_device(in.b),
             .A = in.A.To(device),
             .dt_bias = in.dt_bias.To(device),
             .states = result.states,
             .state_slot_ids = in.slots.To(device),
             .z = on_device(in.z),
             .norm_weight = in.norm_weight.To(device),
             .out = result.out,
             .key_heads = c.hk,
             .key_dim = c.dk,
             .eps = eps,
             .tiled_value_heads = c.tiled});
  return result;
}

// The GPU kernel variants each case runs under ("": the choice); the CPU runs its one kernel.
std::vector<std::string> VariantsOn(Device device) {
  if (device.type == DeviceType::kCPU) return {""};
  return {"", "whole_head", "column_slices"};
}

// Runs `body` with gpu.gdn_decode forced to `variant`, then checks the reach counter of
// the kernel that should have run: the unfused ops past 128, the choice's kernel
// (gdn_decode_choice.h), and the forced variant where it applies (column slices where
// the device runs sm_90 code: the condition of programmatic launch, whose counter the
// run also hits).
void WithVariant(const DecodeCase& c, Device device, const std::string& variant, const std::function<void()>& body) {
  SCOPED_TRACE("variant '" + variant + "'");
  tuning::SetVariant("gpu.gdn_decode", variant);
  reach::Reset();
  body();
  tuning::SetVariant("gpu.gdn_decode", "");
  if (device.type == DeviceType::kCPU) return;
  if (c.dk > 128 || c.dv > 128) {
    EXPECT_EQ(reach::Count("GdnDecodeGpu.unfused"), 1u);
    return;
  }
  const bool hopper = reach::Count("GpuLaunch.programmatic") > 0;
  EXPECT_EQ(reach::Count("GdnDecodeGpu.column_slices") + reach::Count("GdnDecodeGpu.whole_head"), 1u);
  // The choice takes column slices on sm_90 devices (114-132 multiprocessors) when the
  // whole-head blocks would fill at most a quarter of them.
  const int64_t quarter_of = 4 * c.batch * c.hv;
  if (variant == "" && hopper && quarter_of > 114 && quarter_of <= 132) return;  // depends on the card
  const bool slices = hopper && (variant == "column_slices" || (variant == "" && quarter_of <= 114));
  EXPECT_EQ(reach::Count("GdnDecodeGpu.column_slices"), slices ? 1u : 0u);
  EXPECT_EQ(reach::Count("GdnDecodeGpu.whole_head"), slices ? 0u : 1u);
}

std::string Describe(const DecodeCase& c) {
  return "B=" + std::to_string(c.batch) + " Hk/Hv=" + std::to_string(c.hk) + "/" + std::to_string(c.hv) +
         " Dk/Dv=" + std::to_string(c.dk) + "/" + std::to_string(c.dv) + " K=" + std::to_string(c.kernel) + " " +
         DTypeName(c.dtype) + " weights " + DTypeName(c.weight_dtype) + (c.tiled ? " tiled" : " grouped") +
         (c.strided ? " strided" : "");
}

const std::vector<DecodeCase>& Cases() {
  static const std::vector<DecodeCase> cases = {
      {1, 16, 32, 128, 128, 4, {2}, DType::kF32, DType::kF32, false, false},
      {1, 16, 32, 128, 128, 4, {1}, DType::kBF16, DType::kF32, true, true},
      {4, 4, 8, 128, 128, 4, {0, 3, 2, 1}, DType::kBF16, DType::kF32, false, false},
      {4, 2, 6, 20, 12, 3, {3, 0, 2, 1}, DType::kF32, DType::kF32, false, false},
      {3, 2, 4, 100, 70, 4, {1, 3, 0}, DType::kBF16, DType::kBF16, true, true},
      {2, 1, 2, 192, 64, 4, {0, 2}, DType::kF32, DType::kF32, false, false},
  };
  return cases;
}

TEST(GdnDecodeTest, MatchesReference) {
  std::mt19937 rng(71);
  const float eps = 1e-6f;
  for (const DecodeCase& c : Cases()) {
    SCOPED_TRACE(Describe(c));
    const DecodeInputs in = MakeInputs(c, rng);
    const Reference ref = ReferenceDecode(c, in, eps);
    ForEachDeviceAndIsa([&](Device device) {
      for (const std::string& variant : VariantsOn(device)) {
        DecodeOutputs got;
        WithVariant(c, device, variant, [&] { got = RunDecode(c, in, eps, device); });
        // f32: the states are sums of Dk products of values <~ 1 (~1e-7 relative); out
        // is normalised per head. bf16: conv outputs, q, k and the delta rule's output
        // are stored in bf16 between the steps, as the unfused ops store them.
        const double out_tol = c.dtype == DType::kF32 ? 1e-5 : 4 * testing::DefaultTolerance(c.dtype);
        const double state_tol = c.dtype == DType::kF32 ? 1e-5 : testing::DefaultTolerance(c.dtype);
        EXPECT_TRUE(AllClose(ref.out, got.out, out_tol));
        EXPECT_TRUE(AllClose(ref.states, got.states, state_tol));
        EXPECT_TRUE(AllClose(ref.conv_states, got.conv_states, 1e-6));
      }
    });
  }
}

// The fused op against the ops it replaces, on the same device: the same stored
// roundings, so they agree to f32 rounding (bf16: an intermediate may round to the
// neighbouring bf16 value).
TEST(GdnDecodeTest, EqualsTheUnfusedOps) {
  std::mt19937 rng(72);
  const float eps = 1e-6f;
  for (const DecodeCase& c : Cases()) {
    if (c.strided) continue;  // the unfused chain below takes contiguous inputs
    SCOPED_TRACE(Describe(c));
    const DecodeInputs in = MakeInputs(c, rng);
    ForEachDeviceAndIsa([&](Device device) {
      for (const std::string& variant : VariantsOn(device)) {
        DecodeOutputs fused;
        WithVariant(c, device, variant, [&] { fused = RunDecode(c, in, eps, device); });
        const int64_t channels = 2 * c.hk * c.dk + c.hv * c.dv;
        const Tensor conv_states = in.conv_states.To(device), states = in.states.To(device);
        const Tensor slots = in.slots.To(device), mixed = in.mixed.To(device);
        const Tensor conv = Tensor::Empty({c.batch, channels}, c.dtype, device);
        CausalConv1dUpdate({.x = mixed, .weight = in.conv_weight.To(device), .conv_states = conv_states,
                            .state_slot_ids = slots, .out = conv, .apply_silu = true});
        const int64_t kw = c.hk * c.dk;
        const Tensor qn = Tensor::Empty({c.batch, c.hk, c.dk}, c.dtype, device);
        const Tensor kn = Tensor::Empty({c.batch, c.hk, c.dk}, c.dtype, device);
        L2Norm({.x = conv.AsStrided({c.batch, c.hk, c.dk}, {channels, c.dk, 1}, conv.offset()), .out = qn,
                .eps = 1e-6f, .scale = 1.0f / std::sqrt(static_cast<float>(c.dk))});
        L2Norm({.x = conv.AsStrided({c.batch, c.hk, c.dk}, {channels, c.dk, 1}, conv.offset() + kw), .out = kn,
                .eps = 1e-6f, .scale = 1.0f});
        const Tensor g = Tensor::Empty({c.batch, c.hv}, DType::kF32, device);
        const Tensor beta = Tensor::Empty({c.batch, c.hv}, DType::kF32, device);
        GdnGates({.a = in.a.To(device), .b = in.b.To(device), .A = in.A.To(device), .dt_bias = in.dt_bias.To(device),
                  .g = g, .beta = beta});
        std::vector<int32_t> starts;
        for (int32_t i = 0; i <= static_cast<int32_t>(c.batch); ++i) starts.push_back(i);
        const Tensor core = Tensor::Zeros({c.batch, c.hv, c.dv}, c.dtype, device);
        GdnRecurrent({.q = qn,
                      .k = kn,
                      .v = conv.AsStrided({c.batch, c.hv, c.dv}, {channels, c.dv, 1}, conv.offset() + 2 * kw),
                      .g = g,
                      .beta = beta,
                      .states = states,
                      .query_start_loc = Tensor::FromVector(starts, {c.batch + 1}).To(device),
                      .state_slot_ids = slots,
                      .out = core,
                      .tiled_value_heads = c.tiled});
        const Tensor out = Tensor::Empty({c.batch, c.hv, c.dv}, c.dtype, device);
        GatedRmsNorm({.x = core, .z = in.z.To(device), .weight = in.norm_weight.To(device), .out = out, .eps = eps});
        const double tol = c.dtype == DType::kF32 ? 1e-5 : testing::DefaultTolerance(c.dtype);
        EXPECT_TRUE(AllClose(ToDoubles(out), fused.out, tol));
        EXPECT_TRUE(AllClose(ToDoubles(states), fused.states, c.dtype == DType::kF32 ? 1e-6 : tol));
        EXPECT_TRUE(AllClose(ToDoubles(conv_states), fused.conv_states, 0.0));
      }
    });
  }
}

TEST(GdnDecodeTest, NamesWhatIsWrong) {
  std::mt19937 rng(73);
  const DecodeCase c = Cases()[2];
  const DecodeInputs in = MakeInputs(c, rng);
  const Tensor out = Tensor::Empty({c.batch, c.hv, c.dv}, c.dtype);
  GdnDecodeArgs args{.mixed = in.mixed, .conv_weight = in.conv_weight, .conv_states = in.conv_states, .a = in.a,
                     .b = in.b, .A = in.A, .dt_bias = in.dt_bias, .states = in.states, .state_slot_ids = in.slots,
                     .z = in.z, .norm_weight = in.norm_weight, .out = out, .key_heads = c.hk, .key_dim = c.dk,
                     .eps = 1e-6f, .tiled_value_heads = false};
  args.key_dim = c.dk + 1;
  try {
    GdnDecode(args);
    ADD_FAILURE() << "a key_dim that does not match mixed's columns was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GdnDecode"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mixed"), std::string::npos) << e.what();
  }
  args.key_dim = c.dk;
  args.norm_weight = Tensor::Zeros({c.dv + 1}, DType::kF32);
  EXPECT_THROW(GdnDecode(args), Error);
}

}  // namespace
}  // namespace vt
