// Contract tests of vt::Sample (op_args.h): greedy rows, min_p / top-k / top-p
// thresholds and the Gumbel race against a double-precision reference that sorts the
// row; the distribution of many draws against softmax(x / T) over the kept set; the
// same (seed, offset) giving the same token; the allowed bitmask; f32/bf16 rows,
// strided, a Qwen3.5-sized vocabulary; every device and CPU ISA level.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "testing/op_testing.h"
#include "vt/sample_noise.h"

namespace vt {
namespace {

using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::ToInts;

struct RowParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f, min_p = 0.0f;
  int64_t seed = 0, offset = 0;
};

Tensor ParamsTensor(const std::vector<RowParams>& rows, Device device) {
  std::vector<SampleRow> packed;
  for (const RowParams& r : rows) {
    SampleRow row{.temperature = r.temperature, .top_k = r.top_k, .top_p = r.top_p, .min_p = r.min_p};
    row.SetSeed(static_cast<uint64_t>(r.seed));
    row.SetOffset(r.offset);
    packed.push_back(row);
  }
  return Tensor::FromVector(SampleRowWords(packed), {static_cast<int64_t>(rows.size()), kSampleRowWords}).To(device);
}

std::vector<int64_t> RunSample(const Tensor& x, const std::vector<RowParams>& rows, const Tensor& allowed = {}) {
  Tensor out = Tensor::Empty({x.size(0)}, DType::kI32, x.device());
  Poison(out);
  Sample({.x = x, .params = ParamsTensor(rows, x.device()), .out = out, .allowed = allowed});
  return ToInts(out);
}

bool Allowed(const std::vector<int32_t>& mask, int64_t words, int64_t row, int64_t i) {
  return mask.empty() || ((static_cast<uint32_t>(mask[row * words + i / 32]) >> (i % 32)) & 1u);
}

// One row's reference in double: the kept indices (value order, descending) and the
// race's keys. `kept_floor` is the smallest kept value.
struct RowReference {
  int64_t token = 0;
  std::vector<double> keys;  // per index; -inf when not kept
  double floor = -std::numeric_limits<double>::infinity();
};

RowReference Reference(const double* x, int64_t n, const RowParams& p, const std::vector<int32_t>& mask,
                       int64_t words, int64_t row) {
  RowReference ref;
  ref.keys.assign(n, -std::numeric_limits<double>::infinity());
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) {
    if (Allowed(mask, words, row, i) && !std::isnan(x[i])) order.push_back(i);
  }
  if (order.empty()) return ref;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  if (!(p.temperature > 0)) {
    ref.token = *std::min_element(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    return ref;
  }
  const double t = p.temperature, m = x[order[0]];
  double floor = -std::numeric_limits<double>::infinity();
  if (p.min_p > 0) floor = m + t * std::log(static_cast<double>(p.min_p));
  std::erase_if(order, [&](int64_t i) { return x[i] < floor; });
  if (p.top_k > 0 && p.top_k < n && static_cast<size_t>(p.top_k) < order.size()) {
    floor = std::max(floor, x[order[p.top_k - 1]]);
    std::erase_if(order, [&](int64_t i) { return x[i] < floor; });
  }
  if (p.top_p < 1) {
    double total = 0;
    for (int64_t i : order) total += std::exp((x[i] - m) / t);
    double mass = 0;
    for (int64_t i : order) {
      mass += std::exp((x[i] - m) / t);
      if (mass >= p.top_p * total) {
        floor = std::max(floor, x[i]);
        break;
      }
    }
    std::erase_if(order, [&](int64_t i) { return x[i] < floor; });
  }
  ref.floor = floor;
  double best = -std::numeric_limits<double>::infinity();
  ref.token = order[0];
  for (int64_t i : order) {
    const double u = sample_noise::Uniform(static_cast<uint64_t>(p.seed), p.offset, i);
    ref.keys[i] = x[i] / t - std::log(-std::log(u));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ref.keys[i] > best) {
      best = ref.keys[i];
      ref.token = i;
    }
  }
  return ref;
}

// A device token other than the reference's is accepted only where f32 rounding can
// decide: its key within 1e-4 of the winner's, or it or the winner at the keep
// threshold (within 1e-4) of a set boundary that the f32 sums may draw differently.
bool AcceptableDifference(const double* x, const RowReference& ref, int64_t got) {
  if (got == ref.token) return true;
  const double tol = 1e-4;
  const double best = ref.keys[ref.token], mine = ref.keys[got];
  if (std::isfinite(mine) && best - mine <= tol * (1 + std::fabs(best))) return true;
  return std::fabs(x[got] - ref.floor) <= tol * (1 + std::fabs(ref.floor));
}

std::vector<RowParams> ParamsFor(int64_t rows, int64_t vocab, std::mt19937& rng) {
  // Cycles through greedy, plain, each filter alone and together, extreme values.
  const RowParams kinds[] = {
      {.temperature = 0.0f},
      {.temperature = 1.0f},
      {.temperature = 0.6f, .top_k = 1},
      {.temperature = 0.7f, .top_k = 5},
      {.temperature = 1.3f, .top_k = static_cast<int32_t>(std::max<int64_t>(1, vocab / 3))},
      {.temperature = 0.8f, .top_p = 0.3f},
      {.temperature = 1.0f, .top_p = 0.95f},
      {.temperature = 0.9f, .min_p = 0.2f},
      {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f},
      {.temperature = 1.0f, .top_k = 50, .top_p = 0.8f, .min_p = 0.05f},
      {.temperature = 2.0f, .top_k = static_cast<int32_t>(vocab), .top_p = 1.0f},
  };
  std::vector<RowParams> out;
  for (int64_t r = 0; r < rows; ++r) {
    RowParams p = kinds[(r + rng() % 3) % std::size(kinds)];
    p.seed = static_cast<int64_t>((static_cast<uint64_t>(rng()) << 32) | rng());
    p.offset = rng() % 5000;
    out.push_back(p);
  }
  return out;
}

TEST(SampleTest, MatchesReference) {
  std::mt19937 rng(211);
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Shape& shape : std::vector<Shape>{{1, 1}, {6, 9}, {11, 1000}, {11, 20001}, {3, 248320}}) {
        for (bool masked : {false, true}) {
          SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + (masked ? " masked" : ""));
          Tensor x = testing::WithPaddedRows(RandomTensor(shape, dtype, device, rng, -4.0f, 4.0f), 3);
          const int64_t words = (shape[1] + 31) / 32;
          std::vector<int32_t> mask;
          Tensor allowed;
          if (masked) {
            for (int64_t i = 0; i < shape[0] * words; ++i) {
              mask.push_back(static_cast<int32_t>(i % 5 == 0 ? ~0u : static_cast<uint32_t>(rng() | rng())));
            }
            allowed = Tensor::FromVector(mask, {shape[0], words}).To(device);
          }
          const std::vector<RowParams> params = ParamsFor(shape[0], shape[1], rng);
          const std::vector<int64_t> got = RunSample(x, params, allowed);
          const std::vector<double> xs = ToDoubles(x);
          for (int64_t r = 0; r < shape[0]; ++r) {
            const double* row = xs.data() + r * shape[1];
            const RowReference ref = Reference(row, shape[1], params[r], mask, words, r);
            EXPECT_TRUE(AcceptableDifference(row, ref, got[r]))
                << "row " << r << " (T " << params[r].temperature << ", top_k " << params[r].top_k << ", top_p "
                << params[r].top_p << ", min_p " << params[r].min_p << "): got " << got[r] << ", expected "
                << ref.token;
          }
        }
      }
    }
  });
}

// 4000 draws of one row (offsets 0..3999) against the probabilities of softmax(x / T)
// over the kept set: Pearson's chi-square below 40 (5 degrees of freedom or fewer: a
// correct sampler exceeds it with probability below 1e-6), and nothing drawn outside
// the kept set.
TEST(SampleTest, DrawsFollowTheFilteredSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.2f, -0.3f, 2.0f, 0.0f};
  const int64_t vocab = 6, draws = 4000;
  const RowParams kinds[] = {{.temperature = 1.0f},
                             {.temperature = 0.5f},
                             {.temperature = 1.0f, .top_k = 3},
                             {.temperature = 1.0f, .top_p = 0.7f},
                             {.temperature = 2.0f, .min_p = 0.3f}};
  ForEachDeviceAndIsa([&](Device device) {
    for (const RowParams& kind : kinds) {
      SCOPED_TRACE("T " + std::to_string(kind.temperature) + " top_k " + std::to_string(kind.top_k) + " top_p " +
                   std::to_string(kind.top_p) + " min_p " + std::to_string(kind.min_p));
      std::vector<float> rows_data;
      std::vector<RowParams> params;
      for (int64_t d = 0; d < draws; ++d) {
        rows_data.insert(rows_data.end(), logits.begin(), logits.end());
        RowParams p = kind;
        p.seed = 12345;
        p.offset = d;
        params.push_back(p);
      }
      const Tensor x = Tensor::FromVector(rows_data, {draws, vocab}).To(device);
      const std::vector<int64_t> got = RunSample(x, params);
      // Expected probabilities: the reference's kept set, renormalised.
      std::vector<double> xd(logits.begin(), logits.end());
      const RowReference ref = Reference(xd.data(), vocab, kind, {}, 0, 0);
      std::vector<double> prob(vocab, 0.0);
      double total = 0;
      for (int64_t i = 0; i < vocab; ++i) {
        if (std::isfinite(ref.keys[i])) total += prob[i] = std::exp(xd[i] / kind.temperature);
      }
      std::vector<int64_t> counts(vocab, 0);
      for (int64_t t : got) ++counts[t];
      double chi2 = 0;
      for (int64_t i = 0; i < vocab; ++i) {
        if (prob[i] == 0) {
          EXPECT_EQ(counts[i], 0) << "index " << i << " is outside the kept set";
          continue;
        }
        const double expected = draws * prob[i] / total;
        chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
      }
      EXPECT_LT(chi2, 40.0);
    }
  });
}

// The draw is a function of (seed, offset, row): the same inputs give the same tokens
// in another batch position, other seeds other tokens.
TEST(SampleTest, SeedAndOffsetDecide) {
  std::mt19937 rng(212);
  ForEachDeviceAndIsa([&](Device device) {
    const Tensor row = RandomTensor({1, 5000}, DType::kF32, device, rng, -1.0f, 1.0f);
    const std::vector<double> values = ToDoubles(row);
    std::vector<float> data;
    for (int r = 0; r < 16; ++r) data.insert(data.end(), values.begin(), values.end());
    const Tensor x = Tensor::FromVector(data, {16, 5000}).To(device);
    std::vector<RowParams> same(16), seeds(16);
    for (int r = 0; r < 16; ++r) {
      same[r] = {.temperature = 1.0f, .seed = 7, .offset = 3};
      seeds[r] = {.temperature = 1.0f, .seed = 100 + r, .offset = 3};
    }
    const std::vector<int64_t> a = RunSample(x, same), b = RunSample(x, seeds);
    EXPECT_EQ(std::count(a.begin(), a.end(), a[0]), 16);
    std::vector<int64_t> distinct = b;
    std::sort(distinct.begin(), distinct.end());
    EXPECT_GT(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 8);
    EXPECT_EQ(RunSample(x, seeds), b);
  });
}

TEST(SampleTest, RejectsBadParameterTensors) {
  const Tensor x = Tensor::Empty({2, 10}, DType::kF32, kCpu);
  Tensor out = Tensor::Empty({2}, DType::kI32, kCpu);
  for (const Tensor& params : {Tensor::Empty({2, kSampleRowWords}, DType::kF32, kCpu),
                               Tensor::Empty({3, kSampleRowWords}, DType::kI32, kCpu),
                               Tensor::Empty({2, 4}, DType::kI32, kCpu)}) {
    try {
      Sample({.x = x, .params = params, .out = out});
      ADD_FAILURE() << "accepted params " << params.Describe();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("params"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vt
