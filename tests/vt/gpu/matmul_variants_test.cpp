// Every decode MatMul kernel that vt::tuning can force (family gpu.matmul_skinny,
// src/vt/gpu/matmul_choice.h) run on the GPU against a double-precision reference,
// with reach counters proving which kernel ran. The GPU benchmarks time these
// variants against each other; this test is what makes a variant's number count.
// Shapes: M = 1..8 (each row-count instantiation of the loads-in-flight kernel), K
// with a remainder after the 4-loads-in-flight steps (2088 = 8 * 261 values), N
// above the resident-warp grid of an H200 (9000 > 132 SMs * 64 warps, so warps walk
// several columns), strided x / w / out rows. Skips itself without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/gpu/matmul_choice.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

using testing::RandomTensor;

// Forces a variant for the scope, and clears it however the scope ends.
class ForcedSkinnyVariant {
 public:
  explicit ForcedSkinnyVariant(const std::string& variant) { tuning::SetVariant(gpu::kSkinnyVariantFamily, variant); }
  ~ForcedSkinnyVariant() { tuning::SetVariant(gpu::kSkinnyVariantFamily, ""); }
};

struct Shape3 {
  int64_t n, k;
  int64_t pad;  // extra elements per row of x, w and out (a multiple of 8 keeps rows 16-byte aligned)
};

// Tolerance: out is rounded once to its dtype (DefaultTolerance: bf16 1e-2, f16
// 2e-3, f32 1e-5) after an f32 sum of at most 2088 products (~2088 * 6e-8 relative
// at worst, inside even the f32 tolerance).
void ExpectVariantMatches(Device device, const std::string& variant, const char* reach_name, DType dtype,
                          DType x_dtype, std::mt19937& rng) {
  const ForcedSkinnyVariant forced(variant);
  for (const Shape3& s : {Shape3{70, 96, 0}, Shape3{257, 2088, 8}, Shape3{9000, 64, 16}}) {
    for (int64_t m : {1, 2, 3, 4, 5, 8}) {
      SCOPED_TRACE(device.ToString() + " " + variant + " x " + DTypeName(x_dtype) + " w " + DTypeName(dtype) +
                   " M=" + std::to_string(m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
      const Tensor x = testing::WithPaddedRows(RandomTensor({m, s.k}, x_dtype, device, rng), s.pad);
      const Tensor w = testing::WithPaddedRows(RandomTensor({s.n, s.k}, dtype, device, rng), s.pad);
      const Tensor out = testing::WithPaddedRows(Tensor::Empty({m, s.n}, x_dtype, device), s.pad);
      testing::Poison(out);
      reach::Reset();
      MatMul({.x = x, .w = w, .out = out});
      EXPECT_EQ(reach::Count(std::string("MatMulGpu.") + reach_name), 1u) << reach_name;
      EXPECT_TRUE(testing::AllClose(testing::MatMulReference(x, w), out, testing::DefaultTolerance(x_dtype)));
    }
  }
}

TEST(MatMulSkinnyVariantsTest, EveryForcedVariantMatchesTheReference) {
  std::vector<Device> gpus;
  for (Device d : testing::TestDevices()) {
    if (d.type != DeviceType::kCPU) gpus.push_back(d);
  }
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(21);
  for (Device device : gpus) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      ExpectVariantMatches(device, "loads_in_flight", "skinny_loads_in_flight", dtype, dtype, rng);
      ExpectVariantMatches(device, "vector_loads", "skinny_vector_loads", dtype, dtype, rng);
      ExpectVariantMatches(device, "warp_per_column", "skinny_warp_per_column", dtype, dtype, rng);
    }
    // f32 x with 16-bit weights (the LM head of a bf16 model) takes the 16-bit kernel;
    // f32 weights, which it does not take, keep the chosen vector-load walk.
    ExpectVariantMatches(device, "loads_in_flight", "skinny_loads_in_flight", DType::kBF16, DType::kF32, rng);
    ExpectVariantMatches(device, "loads_in_flight", "skinny_loads_in_flight", DType::kF16, DType::kF32, rng);
    ExpectVariantMatches(device, "loads_in_flight", "skinny_vector_loads", DType::kF32, DType::kF32, rng);
  }
}

TEST(MatMulSkinnyVariantsTest, AnUnknownVariantIsAnError) {
  std::vector<Device> gpus;
  for (Device d : testing::TestDevices()) {
    if (d.type != DeviceType::kCPU) gpus.push_back(d);
  }
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(22);
  const ForcedSkinnyVariant forced("fastest");
  const Tensor x = RandomTensor({1, 64}, DType::kBF16, gpus[0], rng);
  const Tensor w = RandomTensor({8, 64}, DType::kBF16, gpus[0], rng);
  const Tensor out = Tensor::Empty({1, 8}, DType::kBF16, gpus[0]);
  EXPECT_THROW(MatMul({.x = x, .w = w, .out = out}), Error);
}

}  // namespace
}  // namespace vt
