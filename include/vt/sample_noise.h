// The random numbers of vt::Sample, the same on every backend: Philox4x32-10 (Salmon
// et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), a counter-based
// generator, so that the draw of vocabulary index i at a request's position `offset`
// under its `seed` is a pure function of (seed, offset, i): no generator state to
// keep on the device, the same token on the CPU and the GPU, whatever the batch.
//
// Used by the CPU kernel, the GPU kernels and the tests; header-only, compiled by the
// host compiler and by nvcc / hipcc (__host__ __device__ there).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define VT_SAMPLE_NOISE_FN __host__ __device__ inline
#else
#define VT_SAMPLE_NOISE_FN inline
#endif

namespace vt::sample_noise {

// Philox4x32's multipliers and Weyl key increments (the published constants).
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
// The fourth counter word: a constant that tells these draws apart from any other use
// of the same (seed, offset) ("SAMP").
constexpr uint32_t kStream = 0x53414D50u;

// The first 32-bit output of Philox4x32-10 for counter (c0, c1, c2, c3) and key (k0, k1).
VT_SAMPLE_NOISE_FN uint32_t Philox4x32First(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                            uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c0;
}

// A uniform draw in the open interval (0, 1): 24 random bits, centred in their cell,
// so neither 0 nor 1 occurs and -log(-log(u)) is finite.
VT_SAMPLE_NOISE_FN float Uniform(uint64_t seed, int64_t offset, int64_t index) {
  const uint64_t o = static_cast<uint64_t>(offset);
  const uint32_t bits = Philox4x32First(static_cast<uint32_t>(index), static_cast<uint32_t>(o),
                                        static_cast<uint32_t>(o >> 32), kStream, static_cast<uint32_t>(seed),
                                        static_cast<uint32_t>(seed >> 32));
  return (static_cast<float>(bits >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

// Standard Gumbel noise -log(-log(u)): argmax_i (x_i / T + g_i) over a set of indices
// is distributed as softmax(x / T) restricted to that set (the Gumbel-max trick, the
// exponential race of vLLM's random_sample in the log domain).
VT_SAMPLE_NOISE_FN float Gumbel(uint64_t seed, int64_t offset, int64_t index) {
  return -logf(-logf(Uniform(seed, offset, index)));
}

}  // namespace vt::sample_noise

#undef VT_SAMPLE_NOISE_FN
