// The GdnRecurrent / GdnChunkedPrefill kernels that vt::tuning can force on a GPU
// (family gpu.gdn_recurrent: state_in_registers, the decode default at Dk <= 128,
// warp_columns, chunks (the chunked WY form, src/vt/gpu/gdn_chunked.cu), the prompt
// default where the device's shared memory holds it, and token_recurrence:
// src/vt/gpu/gdn.cu) against the CPU kernel (itself checked against a double-precision reference in
// tests/vt/ops/gdn_test.cpp) on the same inputs: decode batches (one token per
// sequence, slots out of order) and a varlen batch (several tokens per sequence),
// Dk 128 / 64 / 100 (rows not a multiple of the 4 thread groups), Dv 128 and 70
// (a partial 64-column block, and 16-column blocks of warp_columns), grouped and
// tiled value heads, f32 and bf16, and the 9B's decode shape (16 key / 32 value
// heads, Dk = Dv = 128, batch 1). Dk 192 is past the variants' 128 rows: the token
// recurrence runs. Each call checks which kernel ran (reach counters). Skips itself
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

using testing::RandomTensor;

constexpr const char* kFamily = "gpu.gdn_recurrent";

class ForcedGdnVariant {
 public:
  explicit ForcedGdnVariant(const std::string& variant) { tuning::SetVariant(kFamily, variant); }
  ~ForcedGdnVariant() { tuning::SetVariant(kFamily, ""); }
};

struct Case {
  std::vector<int32_t> tokens_per_seq;
  std::vector<int32_t> slots;
  int64_t dk, dv;
  bool tiled;
  DType dtype;
  int64_t hk = 2, hv = 4;  // key and value heads
  float g_low = -0.5f;     // log-decays drawn from [g_low, -0.01]
};

using GdnOp = void (*)(const GdnArgs&);

// Runs GdnRecurrent on the CPU and `op` (GdnRecurrent by default, or
// GdnChunkedPrefill: the same function of the inputs) with `variant` forced ("" for
// the default choice) on `device` from the same inputs; expects equal outputs and
// final states, and `kernel` (its reach name, "GdnGpu.<kernel>") to have run.
void ExpectMatchesCpu(Device device, const Case& c, const std::string& variant, const std::string& kernel,
                      std::mt19937& rng, GdnOp op = &GdnRecurrent) {
  const int64_t hk = c.hk, hv = c.hv;
  const int64_t slots = std::max<int64_t>(3, static_cast<int64_t>(c.slots.size()));
  int64_t tokens = 0;
  std::vector<int32_t> query_start_loc = {0};
  for (int32_t n : c.tokens_per_seq) query_start_loc.push_back(static_cast<int32_t>(tokens += n));
  const int64_t batch = static_cast<int64_t>(c.slots.size());
  // Keys of norm ~1 and queries of norm ~1/sqrt(Dk), as the model feeds them, keep
  // the state bounded; g < 0 and beta in (0, 1).
  const float key_scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
  const Tensor q = RandomTensor({tokens, hk, c.dk}, c.dtype, kCpu, rng, -key_scale, key_scale);
  const Tensor k = RandomTensor({tokens, hk, c.dk}, c.dtype, kCpu, rng, -key_scale, key_scale);
  const Tensor v = RandomTensor({tokens, hv, c.dv}, c.dtype, kCpu, rng);
  const Tensor g = RandomTensor({tokens, hv}, DType::kF32, kCpu, rng, c.g_low, -0.01f);
  const Tensor beta = RandomTensor({tokens, hv}, DType::kF32, kCpu, rng, 0.1f, 0.9f);
  const Tensor initial = RandomTensor({slots, hv, c.dk, c.dv}, DType::kF32, kCpu, rng);
  const Tensor qsl = Tensor::FromVector(query_start_loc, {batch + 1});
  const Tensor slot_ids = Tensor::FromVector(c.slots, {batch});

  const Tensor cpu_states = initial.To(kCpu);
  const Tensor cpu_out = Tensor::Empty({tokens, hv, c.dv}, c.dtype);
  GdnRecurrent({.q = q, .k = k, .v = v, .g = g, .beta = beta, .states = cpu_states, .query_start_loc = qsl,
                .state_slot_ids = slot_ids, .out = cpu_out, .tiled_value_heads = c.tiled});

  const ForcedGdnVariant forced(variant);
  const Tensor states = initial.To(device);
  const Tensor out = Tensor::Empty({tokens, hv, c.dv}, c.dtype, device);
  testing::Poison(out);
  reach::Reset();
  op({.q = q.To(device), .k = k.To(device), .v = v.To(device), .g = g.To(device), .beta = beta.To(device),
      .states = states, .query_start_loc = qsl.To(device), .state_slot_ids = slot_ids.To(device), .out = out,
      .tiled_value_heads = c.tiled});
  for (const char* name : {"token_recurrence", "state_in_registers", "warp_columns", "chunks"}) {
    EXPECT_EQ(reach::Count(std::string("GdnGpu.") + name), kernel == name ? 1u : 0u) << name;
  }
  // Both sides update f32 states from the same inputs, summing in other orders:
  // ~1e-6 relative over 17 tokens; a bf16 output is rounded once more (2^-8).
  const double out_tol = c.dtype == DType::kF32 ? 1e-5 : testing::DefaultTolerance(c.dtype);
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(cpu_out), out, out_tol));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(cpu_states), states, 1e-5));
}

TEST(GdnRecurrentVariantsTest, BothKernelsMatchTheCpuKernel) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(31);
  const std::vector<Case> cases = {
      {{1, 1, 1}, {2, 0, 1}, 128, 128, false, DType::kF32},  // decode, the 9B's head shape
      {{1, 1, 1}, {2, 0, 1}, 128, 128, true, DType::kBF16},
      {{5, 1, 17}, {1, 2, 0}, 128, 70, false, DType::kF32},  // varlen: the token loop
      {{1, 1}, {0, 2}, 64, 128, true, DType::kF32},
      {{3, 1}, {2, 1}, 100, 70, false, DType::kBF16},        // 100 rows: groups of 25
      {{1}, {1}, 128, 128, false, DType::kF32, 16, 32},       // the 9B's decode: batch 1, 16/32 heads
      {{1}, {1}, 128, 128, false, DType::kBF16, 16, 32},
      {{1}, {1}, 128, 128, true, DType::kBF16, 16, 32},
  };
  for (Device device : gpus) {
    for (const std::string variant : {"", "state_in_registers", "token_recurrence", "warp_columns"}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(device.ToString() + " variant '" + variant + "' Hk/Hv=" + std::to_string(c.hk) + "/" +
                     std::to_string(c.hv) + " Dk=" + std::to_string(c.dk) + " Dv=" + std::to_string(c.dv) + " " +
                     DTypeName(c.dtype) + (c.tiled ? " tiled" : " grouped") + " seqs " +
                     std::to_string(c.slots.size()));
        ExpectMatchesCpu(device, c, variant, variant.empty() ? "state_in_registers" : variant, rng);
      }
      SCOPED_TRACE("Dk=192: past the register kernels, the token recurrence runs");
      ExpectMatchesCpu(device, {{1, 2}, {0, 1}, 192, 64, false, DType::kF32}, variant, "token_recurrence", rng);
    }
  }
}

// Whether `device` runs the chunked kernels (head sizes up to 128 and Hopper's shared
// memory): forced, they run there, or the token recurrence does.
bool RunsChunks(Device device, std::mt19937& rng) {
  const ForcedGdnVariant forced("chunks");
  const Case probe{{40}, {0}, 128, 128, false, DType::kF32};
  const int64_t tokens = 40;
  reach::Reset();
  GdnChunkedPrefill({.q = RandomTensor({tokens, probe.hk, 128}, DType::kF32, device, rng, -0.1f, 0.1f),
                     .k = RandomTensor({tokens, probe.hk, 128}, DType::kF32, device, rng, -0.1f, 0.1f),
                     .v = RandomTensor({tokens, probe.hv, 128}, DType::kF32, device, rng),
                     .g = RandomTensor({tokens, probe.hv}, DType::kF32, device, rng, -0.5f, -0.01f),
                     .beta = RandomTensor({tokens, probe.hv}, DType::kF32, device, rng, 0.1f, 0.9f),
                     .states = Tensor::Zeros({1, probe.hv, 128, 128}, DType::kF32, device),
                     .query_start_loc = Tensor::FromVector(std::vector<int32_t>{0, 40}, {2}).To(device),
                     .state_slot_ids = Tensor::FromVector(std::vector<int32_t>{0}, {1}).To(device),
                     .out = Tensor::Empty({tokens, probe.hv, 128}, DType::kF32, device),
                     .tiled_value_heads = false});
  return reach::Count("GdnGpu.chunks") == 1;
}

// GdnChunkedPrefill takes the same kernels on a GPU: chunks by default where the
// device holds them (sequences of 32+ tokens; the shorter ones of the same batch run
// GdnWarpColumns), warp_columns elsewhere. Prompts around the chunk size (1, 31, 32,
// 63, 64, 65, 129 tokens, 300, 1000) in one batch with short and empty sequences,
// Dv 70 (a partial column block of both kernels), Dk 100 and 64 (K rows padded in
// shared memory), Hk < Hv in both orders, strongly negative log-decays (exp(g) down to
// e^-30: the chunk's decay products underflow to 0), against the CPU's token
// recurrence.
TEST(GdnRecurrentVariantsTest, ChunkedPrefillKernelsMatchTheCpuKernel) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(37);
  const std::vector<Case> cases = {
      {{300, 0, 65}, {2, 0, 1}, 128, 128, true, DType::kBF16, 16, 32},
      {{129}, {1}, 128, 128, false, DType::kF32},
      {{70, 3}, {0, 2}, 100, 70, true, DType::kF32},
      {{33, 2, 1}, {1, 0, 2}, 64, 128, false, DType::kBF16},
      {{17}, {2}, 128, 70, false, DType::kBF16, 16, 32},
      {{1, 63, 64, 65, 31, 32}, {0, 1, 2, 3, 4, 5}, 128, 128, false, DType::kF32, 2, 4},
      {{1000}, {1}, 128, 128, false, DType::kF32, 16, 32},
      {{1000, 5}, {1, 0}, 128, 128, true, DType::kBF16, 16, 32},
      {{200, 64}, {0, 2}, 128, 128, false, DType::kF32, 2, 4, -30.0f},
  };
  for (Device device : gpus) {
    const bool chunks = RunsChunks(device, rng);
    SCOPED_TRACE(chunks ? "the chunked kernels run here" : "no chunked kernels here");
    for (const std::string variant : {"", "token_recurrence", "state_in_registers", "warp_columns", "chunks"}) {
      const std::string expected = variant.empty() ? (chunks ? "chunks" : "warp_columns")
                                   : variant == "chunks" && !chunks ? "token_recurrence"
                                                                    : variant;
      for (const Case& c : cases) {
        SCOPED_TRACE(device.ToString() + " variant '" + variant + "' Dk=" + std::to_string(c.dk) + " Dv=" +
                     std::to_string(c.dv) + " " + DTypeName(c.dtype) + " first length " +
                     std::to_string(c.tokens_per_seq[0]));
        ExpectMatchesCpu(device, c, variant, expected, rng, &GdnChunkedPrefill);
      }
    }
    SCOPED_TRACE("GdnChunkedPrefill at Dk=192: the token recurrence");
    ExpectMatchesCpu(device, {{40, 3}, {0, 1}, 192, 64, false, DType::kF32}, "", "token_recurrence", rng,
                     &GdnChunkedPrefill);
  }
}

TEST(GdnRecurrentVariantsTest, AnUnknownVariantIsAnError) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(32);
  const Device d = gpus[0];
  const ForcedGdnVariant forced("fastest");
  EXPECT_THROW(GdnRecurrent({.q = RandomTensor({1, 1, 8}, DType::kF32, d, rng),
                             .k = RandomTensor({1, 1, 8}, DType::kF32, d, rng),
                             .v = RandomTensor({1, 1, 8}, DType::kF32, d, rng),
                             .g = RandomTensor({1, 1}, DType::kF32, d, rng, -0.5f, -0.1f),
                             .beta = RandomTensor({1, 1}, DType::kF32, d, rng, 0.1f, 0.9f),
                             .states = Tensor::Zeros({1, 1, 8, 8}, DType::kF32, d),
                             .query_start_loc = Tensor::FromVector(std::vector<int32_t>{0, 1}, {2}).To(d),
                             .state_slot_ids = Tensor::FromVector(std::vector<int32_t>{0}, {1}).To(d),
                             .out = Tensor::Empty({1, 1, 8}, DType::kF32, d),
                             .tiled_value_heads = false}),
               Error);
}

}  // namespace
}  // namespace vt
