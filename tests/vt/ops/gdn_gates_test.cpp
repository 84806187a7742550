// Contract test of GdnGates: g = A * softplus(a + dt_bias) (softplus(x) = x above 20,
// as torch and vLLM do), beta = sigmoid(b), both f32, against a double reference.
#include <gtest/gtest.h>

#include <cmath>

#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::WithPaddedRows;

double Softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

struct GatesCase {
  int64_t tokens, heads;
  DType dtype;        // a and b
  DType param_dtype;  // A and dt_bias
  bool strided;
};

TEST(GdnGatesTest, MatchesReference) {
  const std::vector<GatesCase> cases = {
      {7, 16, DType::kF32, DType::kF32, false}, {13, 5, DType::kF32, DType::kF32, true},
      {9, 32, DType::kBF16, DType::kF32, true}, {4, 48, DType::kBF16, DType::kBF16, false},
      {3, 3, DType::kF16, DType::kF16, true},   {0, 8, DType::kF32, DType::kF32, false},
  };
  std::mt19937 rng(3);
  ForEachDeviceAndIsa([&](Device device) {
    for (const GatesCase& gc : cases) {
      SCOPED_TRACE("tokens " + std::to_string(gc.tokens) + " heads " + std::to_string(gc.heads) + " " +
                   DTypeName(gc.dtype) + " params " + DTypeName(gc.param_dtype) + (gc.strided ? " strided" : ""));
      // a + dt_bias spans both sides of softplus's threshold of 20.
      Tensor a = RandomTensor({gc.tokens, gc.heads}, gc.dtype, device, rng, -30.0f, 30.0f);
      Tensor b = RandomTensor({gc.tokens, gc.heads}, gc.dtype, device, rng, -8.0f, 8.0f);
      Tensor A = RandomTensor({gc.heads}, gc.param_dtype, device, rng, -16.0f, -0.01f);
      Tensor dt_bias = RandomTensor({gc.heads}, gc.param_dtype, device, rng, -2.0f, 2.0f);
      if (gc.strided) {
        a = WithPaddedRows(a, 3);
        b = WithPaddedRows(b, 1);
      }
      Tensor g = Tensor::Empty({gc.tokens, gc.heads}, DType::kF32, device);
      Tensor beta = Tensor::Empty({gc.tokens, gc.heads}, DType::kF32, device);
      Poison(g);
      Poison(beta);
      const std::vector<double> av = ToDoubles(a), bv = ToDoubles(b), Av = ToDoubles(A), dv = ToDoubles(dt_bias);
      std::vector<double> ref_g(av.size()), ref_beta(av.size());
      for (size_t i = 0; i < av.size(); ++i) {
        const size_t h = i % static_cast<size_t>(gc.heads);
        ref_g[i] = Av[h] * Softplus(av[i] + dv[h]);
        ref_beta[i] = 1.0 / (1.0 + std::exp(-bv[i]));
      }
      GdnGates({.a = a, .b = b, .A = A, .dt_bias = dt_bias, .g = g, .beta = beta});
      // f32 log1p/exp/sigmoid are accurate to a few ulp; the tolerance is relative to
      // max(1, max|ref|), and |g| reaches ~16 * 32.
      EXPECT_TRUE(AllClose(ref_g, g, 1e-6));
      EXPECT_TRUE(AllClose(ref_beta, beta, 1e-6));
    }
  });
}

// Elementwise relative accuracy of g where it is small (the decay exp(g) is close to
// 1 there, so an absolute error of 1e-6 would be large relative to g).
TEST(GdnGatesTest, SmallGatesAreRelativelyAccurate) {
  ForEachDeviceAndIsa([&](Device device) {
    std::vector<float> a_values;
    for (int i = 0; i < 64; ++i) a_values.push_back(-25.0f + 0.5f * static_cast<float>(i));
    Tensor a = Tensor::FromVector(a_values, {64, 1}).To(device);
    Tensor b = Tensor::Zeros({64, 1}, DType::kF32, device);
    Tensor A = Tensor::FromVector(std::vector<float>{-0.5f}, {1}).To(device);
    Tensor dt_bias = Tensor::FromVector(std::vector<float>{0.25f}, {1}).To(device);
    Tensor g = Tensor::Empty({64, 1}, DType::kF32, device);
    Tensor beta = Tensor::Empty({64, 1}, DType::kF32, device);
    GdnGates({.a = a, .b = b, .A = A, .dt_bias = dt_bias, .g = g, .beta = beta});
    const std::vector<double> got = ToDoubles(g);
    for (size_t i = 0; i < got.size(); ++i) {
      const double ref = -0.5 * Softplus(static_cast<double>(a_values[i]) + 0.25);
      EXPECT_NEAR(got[i], ref, 1e-6 * std::fabs(ref)) << "a = " << a_values[i];
    }
    EXPECT_TRUE(AllClose(std::vector<double>(64, 0.5), beta, 0.0));
  });
}

}  // namespace
}  // namespace vt
