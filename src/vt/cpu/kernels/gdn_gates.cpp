// CPU kernel of GdnGates: the per-token, per-value-head gates of a Gated DeltaNet layer.
//
//   g[t, h]    = A[h] * softplus(a[t, h] + dt_bias[h])   (A = -exp(A_log) < 0)
//   beta[t, h] = sigmoid(b[t, h])
//
// a, b [T, Hv] float (strided rows); A, dt_bias [Hv] float; g, beta [T, Hv] f32
// contiguous. softplus(x) = x for x > 20 (torch's threshold, which vLLM keeps) and
// log1p(exp(x)) otherwise, which stays relatively accurate for very negative x where
// g is tiny and the decay exp(g) is close to 1. T x Hv values per layer is too little
// work to need a vector path.
#include <cmath>

#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void GdnGatesCpu(const GdnGatesArgs& args) {
  const int64_t tokens = args.a.size(0), heads = args.a.size(1);
  std::vector<float> A(static_cast<size_t>(heads)), dt_bias(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) {
    A[h] = LoadFloat(args.A.data(), args.A.dtype(), h * args.A.stride(0));
    dt_bias[h] = LoadFloat(args.dt_bias.data(), args.dt_bias.dtype(), h * args.dt_bias.stride(0));
  }
  float* g = args.g.data_ptr<float>();
  float* beta = args.beta.data_ptr<float>();
  ParallelFor(tokens, std::max<int64_t>(1, 4096 / heads), [&](int64_t begin, int64_t end) {
    std::vector<float> a(static_cast<size_t>(heads)), b(static_cast<size_t>(heads));
    for (int64_t t = begin; t < end; ++t) {
      LoadRow(ElementAddress(args.a.data(), args.a.dtype(), t * args.a.stride(0)), args.a.dtype(), heads, a.data());
      LoadRow(ElementAddress(args.b.data(), args.b.dtype(), t * args.b.stride(0)), args.b.dtype(), heads, b.data());
      for (int64_t h = 0; h < heads; ++h) {
        g[t * heads + h] = A[h] * Softplus(a[h] + dt_bias[h]);
        beta[t * heads + h] = 1.0f / (1.0f + std::exp(-b[h]));
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(GdnGates, kCPU, GdnGatesCpu);

}  // namespace vt::cpu
