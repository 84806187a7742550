// Random weights in their stored GGUF form (see random_weights.h).
//
// Block types: the quant bits of a row are uniform random bytes (so every quant
// value is uniform over its range), then each block's scale fields are set so that
// the block decodes to mean 0 and std sigma x U(0.75, 1.25) (vt/quant.h gives the
// layouts):
//   Q8_0  x = d q,              q uniform in [-127, 127]: a random byte, -128 (which
//                               ggml's quantizer never emits) made 0, keeping the
//                               mean 0; rms(q) = 73.5.
//   Q4_0  x = d (q - 8),        q in [0, 15]; d of random sign (ggml's d is signed)
//                               cancels the -0.5 mean; rms(q - 8) = 4.64.
//   Q4_K  x = d sc q - dmin m,  q in [0, 15]; sc = m in [16, 31], dmin = 7.5 d, so
//                               x = d sc (q - 7.5); rms(q - 7.5) = 4.61, rms(sc) = 23.9.
//   Q5_K  the same with q in [0, 31] and dmin = 15.5 d; rms(q - 15.5) = 9.23.
//   Q6_K  x = d s (q - 32),     q in [0, 63]; s in +-[8, 15] of random sign;
//                               rms(q - 32) = 18.5, rms(s) = 11.7.
// The integer ranges keep d a normal (not subnormal) f16 at sigma = 0.02.
#include "random_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "vt/quant.h"

namespace vllm::bench {
namespace {

constexpr double kMatrixStd = 0.02;

// splitmix64's finalizer after a golden-ratio step: seeds and streams.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// splitmix64: one stream per row.
class RowRandom {
 public:
  explicit RowRandom(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix(state_ += 0x9e3779b97f4a7c15ull); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Normal() {  // Box-Muller: exact, for the small f32 tensors
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Approximately N(0, 1) from one draw: the sum of four 16-bit uniforms has mean 2
  // and variance 1/3. For the bulk f32/f16/bf16 matrices, where Box-Muller would be
  // the bottleneck.
  float FastNormal() {
    const uint64_t r = Next();
    const uint32_t sum = static_cast<uint32_t>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
    return (static_cast<float>(sum) * 0x1.0p-16f - 2.0f) * 1.7320508f;
  }
  void Bytes(uint8_t* dst, size_t n) {
    for (; n >= 8; n -= 8, dst += 8) {
      const uint64_t r = Next();
      std::memcpy(dst, &r, 8);
    }
    if (n > 0) {
      const uint64_t r = Next();
      std::memcpy(dst, &r, n);
    }
  }
  int Int(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }  // [lo, hi]
  // sigma x U(0.75, 1.25) / rms_of_quant: the scale of one block.
  float BlockScale(double rms_of_quant) { return static_cast<float>(kMatrixStd * (0.75 + 0.5 * Uniform()) / rms_of_quant); }

 private:
  uint64_t state_;
};

// The inverse of vt::UnpackQ4KScaleMin: eight 6-bit (scale, min) pairs into 12 bytes.
void PackQ4KScaleMin(const int sc[8], const int m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Q4_K and Q5_K (same header): sc = m per sub-block and dmin = centre x d, so each
// sub-block decodes to d sc (q - centre).
template <typename Block>
void SetKQuantHeader(Block& b, RowRandom& rng, double centre, double rms_of_q) {
  int sc[8];
  for (int& s : sc) s = rng.Int(16, 31);
  const float d = rng.BlockScale(rms_of_q * 23.9);
  b.d = vt::F32ToF16(d);
  b.dmin = vt::F32ToF16(static_cast<float>(centre * d));
  PackQ4KScaleMin(sc, sc, b.scales);
}

void SetQ6KHeader(vt::BlockQ6_K& b, RowRandom& rng) {
  for (int8_t& s : b.scales) {
    const int sign = rng.Next() & 1 ? 1 : -1;  // drawn first: operand order is unspecified
    s = static_cast<int8_t>(sign * rng.Int(8, 15));
  }
  b.d = vt::F32ToF16(rng.BlockScale(18.5 * 11.7));
}

// One row of `n` values of block type `dtype`: random quant bits, then the headers.
template <typename Block, typename SetHeader>
void RandomBlocks(RowRandom& rng, int64_t n, int64_t block_elems, uint8_t* dst, SetHeader set_header) {
  const int64_t num_blocks = n / block_elems;
  rng.Bytes(dst, static_cast<size_t>(num_blocks) * sizeof(Block));
  auto* blocks = reinterpret_cast<Block*>(dst);
  for (int64_t i = 0; i < num_blocks; ++i) set_header(blocks[i]);
}

void RandomQuantRow(vt::DType dtype, RowRandom& rng, int64_t n, uint8_t* dst) {
  switch (dtype) {
    case vt::DType::kQ8_0:
      return RandomBlocks<vt::BlockQ8_0>(rng, n, 32, dst, [&](vt::BlockQ8_0& b) {
        for (int8_t& q : b.qs) q = q == -128 ? 0 : q;
        b.d = vt::F32ToF16(rng.BlockScale(73.5));
      });
    case vt::DType::kQ4_0:
      return RandomBlocks<vt::BlockQ4_0>(rng, n, 32, dst, [&](vt::BlockQ4_0& b) {
        const float sign = rng.Next() & 1 ? 1.0f : -1.0f;
        b.d = vt::F32ToF16(sign * rng.BlockScale(4.64));
      });
    case vt::DType::kQ4_K:
      return RandomBlocks<vt::BlockQ4_K>(rng, n, 256, dst,
                                         [&](vt::BlockQ4_K& b) { SetKQuantHeader(b, rng, 7.5, 4.61); });
    case vt::DType::kQ5_K:
      return RandomBlocks<vt::BlockQ5_K>(rng, n, 256, dst,
                                         [&](vt::BlockQ5_K& b) { SetKQuantHeader(b, rng, 15.5, 9.23); });
    case vt::DType::kQ6_K:
      return RandomBlocks<vt::BlockQ6_K>(rng, n, 256, dst, [&](vt::BlockQ6_K& b) { SetQ6KHeader(b, rng); });
    default:
      throw std::invalid_argument(std::string("random_gguf: no random blocks for dtype ") + vt::DTypeName(dtype));
  }
}

// A matrix row (kMatrix, kEmbedding, kExperts) in any stored dtype.
void RandomMatrixRow(vt::DType dtype, RowRandom& rng, int64_t n, uint8_t* dst) {
  if (vt::IsQuantized(dtype)) return RandomQuantRow(dtype, rng, n, dst);
  const float std = static_cast<float>(kMatrixStd);
  if (dtype == vt::DType::kF32) {
    auto* out = reinterpret_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = std * rng.FastNormal();
    return;
  }
  if (dtype != vt::DType::kF16 && dtype != vt::DType::kBF16) {
    throw std::invalid_argument(std::string("random_gguf: no random matrix of dtype ") + vt::DTypeName(dtype));
  }
  auto* out = reinterpret_cast<uint16_t*>(dst);
  const bool bf16 = dtype == vt::DType::kBF16;
  for (int64_t i = 0; i < n; ++i) {
    const float v = std * rng.FastNormal();
    out[i] = bf16 ? vt::F32ToBf16(v) : vt::F32ToF16(v);
  }
}

// One row of a small f32 tensor, as HF initialises it or stores it by convention:
// zero-centred norms stored as 1 + N(0, 0.02) (the converter bakes the +1 in) and
// the plain GDN norm likewise; ssm_a = -A with A ~ U(1, 16) (HF's A_log init range);
// dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1] (Mamba's init);
// conv1d U(-0.5, 0.5) (PyTorch's default for a depthwise kernel of width 4); the
// router and the shared-expert gate N(0, 0.02) like any init, so that different
// tokens pick different experts.
void FillSmallRow(WeightKind kind, RowRandom& rng, float* row, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case WeightKind::kNorm:
      case WeightKind::kGdnNorm: row[i] = static_cast<float>(1.0 + 0.02 * rng.Normal()); break;
      case WeightKind::kGdnA: row[i] = static_cast<float>(-(1.0 + 15.0 * rng.Uniform())); break;
      case WeightKind::kGdnDtBias: {
        const double dt = std::exp(std::log(1e-3) + rng.Uniform() * (std::log(1e-1) - std::log(1e-3)));
        row[i] = static_cast<float>(std::log(std::expm1(dt)));
        break;
      }
      case WeightKind::kGdnConv: row[i] = static_cast<float>(rng.Uniform() - 0.5); break;
      default: row[i] = static_cast<float>(kMatrixStd * rng.Normal());
    }
  }
}

bool IsMatrixKind(WeightKind kind) {
  return kind == WeightKind::kMatrix || kind == WeightKind::kEmbedding || kind == WeightKind::kExperts;
}

}  // namespace

uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return Mix(seed ^ h);
}

void FillRandomTensor(WeightKind kind, vt::DType dtype, int64_t rows, int64_t n, uint64_t tensor_seed,
                      int num_threads, uint8_t* dst) {
  const bool matrix = IsMatrixKind(kind);
  if (!matrix && dtype != vt::DType::kF32) {
    throw std::invalid_argument(std::string("random_gguf: small tensors are stored as f32, not ") + vt::DTypeName(dtype));
  }
  const size_t row_bytes = static_cast<size_t>(vt::BytesFor(dtype, n));
  auto fill_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RowRandom rng(Mix(tensor_seed + static_cast<uint64_t>(r)));
      uint8_t* row = dst + static_cast<size_t>(r) * row_bytes;
      if (matrix) RandomMatrixRow(dtype, rng, n, row);
      else FillSmallRow(kind, rng, reinterpret_cast<float*>(row), n);
    }
  };
  // Row 0 first, on this thread: a dtype without a random form throws here, where it
  // can, not inside a worker (which would terminate the process).
  if (rows == 0) return;
  fill_rows(0, 1);
  // At least 64 rows per thread: small tensors are not worth a thread start.
  const int64_t workers = std::clamp<int64_t>(num_threads, 1, std::max<int64_t>(rows / 64, 1));
  if (workers == 1) return fill_rows(1, rows);
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back(fill_rows, 1 + (rows - 1) * w / workers, 1 + (rows - 1) * (w + 1) / workers);
  }
  for (std::thread& t : pool) t.join();
}

}  // namespace vllm::bench
