// TopLogprobs contract (vLLM's gather_logprobs): against a double-precision reference
// of log_softmax over the row (over the allowed entries when a bitmask is given,
// the others -inf), its k largest by (value descending, lower index first) from the
// values as stored. f32, bf16 and f16 rows (bf16 rows tie often: the ties must go to
// the lower index), strided rows, 1..17 rows, V from 1 to a Qwen3.5 vocabulary, k
// from 0 to kMaxTopLogprobs, masks with fewer allowed entries than k, a sampled token
// the mask rejects. Bad tokens are errors naming the row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"

namespace vt {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Tensor OnDevice(const Tensor& t, Device device) { return device == t.device() ? t : t.To(device); }

bool Allowed(const std::vector<int32_t>& mask, int64_t words, int64_t r, int64_t i) {
  return mask.empty() || ((static_cast<uint32_t>(mask[r * words + (i >> 5)]) >> (i & 31)) & 1u) != 0;
}

struct Expected {
  std::vector<int32_t> ids;     // [R, 1 + k]
  std::vector<double> values;   // [R, 1 + k]
};

Expected Reference(const Tensor& x, const std::vector<int32_t>& token, const std::vector<int32_t>& mask,
                   int64_t words, int64_t k) {
  const std::vector<double> xs = testing::ToDoubles(x);
  const int64_t rows = x.size(0), n = x.size(1);
  Expected e;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(xs.begin() + r * n, xs.begin() + (r + 1) * n);
    for (int64_t i = 0; i < n; ++i) {
      if (!Allowed(mask, words, r, i)) row[i] = kNegInf;
    }
    const double max_value = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (double v : row) sum += std::exp(v - max_value);
    const double log_norm = max_value + std::log(sum);
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    e.ids.push_back(token[r]);
    e.values.push_back(row[token[r]] - log_norm);
    for (int64_t j = 0; j < k; ++j) {
      e.ids.push_back(order[j]);
      e.values.push_back(row[order[j]] - log_norm);
    }
  }
  return e;
}

// A mask per row: whole words allowed or rejected (as a grammar's mostly are) with
// some mixed words; row 1 (when there is one) allows only 3 entries, fewer than k.
std::vector<int32_t> RandomMask(int64_t rows, int64_t n, int64_t words, std::mt19937& rng) {
  std::vector<int32_t> mask(static_cast<size_t>(rows * words));
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t w = 0; w < words; ++w) {
      const int k = kind(rng);
      mask[r * words + w] = static_cast<int32_t>(k == 0 ? 0u : k == 1 ? bits(rng) : ~0u);
    }
    if (r == 1) {
      std::fill(mask.begin() + r * words, mask.begin() + (r + 1) * words, 0);
      for (int64_t i : {int64_t{0}, n / 2, n - 1}) mask[r * words + (i >> 5)] |= static_cast<int32_t>(1u << (i & 31));
    }
    mask[r * words] |= 1;  // every row allows something
  }
  return mask;
}

void CheckTopLogprobs(int64_t rows, int64_t n, int64_t k, DType dtype, bool masked, std::mt19937& rng) {
  SCOPED_TRACE("R=" + std::to_string(rows) + " V=" + std::to_string(n) + " k=" + std::to_string(k) + " " +
               DTypeName(dtype) + (masked ? " masked" : ""));
  const Tensor x = testing::RandomTensor({rows, n}, dtype, kCpu, rng, -6.0f, 6.0f);
  const int64_t words = (n + 31) / 32 + 1;  // one word more than needed: allowed may be wider
  const std::vector<int32_t> mask = masked ? RandomMask(rows, n, words, rng) : std::vector<int32_t>{};
  std::vector<int32_t> token(static_cast<size_t>(rows));
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(n - 1));
  for (int32_t& t : token) t = any(rng);  // masked: some are rejected ones (logprob -inf)
  const Expected ref = Reference(x, token, mask, words, k);
  testing::ForEachDeviceAndIsa([&](Device device) {
    const Tensor ids = Tensor::Empty({rows, 1 + k}, DType::kI32, device);
    const Tensor values = Tensor::Empty({rows, 1 + k}, DType::kF32, device);
    testing::Poison(ids);
    testing::Poison(values);
    TopLogprobs({.x = OnDevice(testing::WithPaddedRows(x, 3), device),
                 .token = OnDevice(Tensor::FromVector(token, {rows}), device),
                 .allowed = masked ? OnDevice(Tensor::FromVector(mask, {rows, words}), device) : Tensor(),
                 .ids = ids,
                 .values = values});
    const std::vector<int64_t> got_ids = testing::ToInts(ids);
    const std::vector<double> got = testing::ToDoubles(values);
    for (size_t i = 0; i < ref.ids.size(); ++i) {
      ASSERT_EQ(got_ids[i], ref.ids[i]) << "row " << i / (1 + k) << " column " << i % (1 + k);
      if (std::isinf(ref.values[i])) {
        ASSERT_EQ(got[i], ref.values[i]) << "row " << i / (1 + k) << " column " << i % (1 + k);
      } else {
        // f32 sums of up to 248k exponentials: 1e-5 of the logprob's scale.
        ASSERT_NEAR(got[i], ref.values[i], 1e-5 * std::max(1.0, std::fabs(ref.values[i])))
            << "row " << i / (1 + k) << " column " << i % (1 + k);
      }
    }
  });
}

TEST(TopLogprobsTest, MatchTheReference) {
  std::mt19937 rng(7);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t rows : {1, 3, 17}) {
      for (int64_t n : {1, 37, 4099}) {
        for (int64_t k : {0, 1, 5, 20}) {
          for (bool masked : {false, true}) CheckTopLogprobs(rows, n, std::min(k, n), dtype, masked, rng);
        }
      }
    }
  }
  CheckTopLogprobs(2, 248320, kMaxTopLogprobs, DType::kF32, false, rng);
  CheckTopLogprobs(2, 248320, kMaxTopLogprobs, DType::kBF16, true, rng);
}

// Every value equal: the top entries are the lowest indices, in order, whichever
// thread read them.
TEST(TopLogprobsTest, TiesGoToTheLowerIndex) {
  testing::ForEachDeviceAndIsa([&](Device device) {
    const int64_t n = 1000;
    const Tensor ids = Tensor::Empty({1, 1 + kMaxTopLogprobs}, DType::kI32, device);
    const Tensor values = Tensor::Empty({1, 1 + kMaxTopLogprobs}, DType::kF32, device);
    TopLogprobs({.x = OnDevice(Tensor::FromVector(std::vector<float>(n, 0.5f), {1, n}), device),
                 .token = OnDevice(Tensor::FromVector(std::vector<int32_t>{999}, {1}), device),
                 .ids = ids,
                 .values = values});
    const std::vector<int64_t> got = testing::ToInts(ids);
    EXPECT_EQ(got[0], 999);
    for (int64_t j = 0; j < kMaxTopLogprobs; ++j) EXPECT_EQ(got[1 + j], j);
    for (double v : testing::ToDoubles(values)) EXPECT_NEAR(v, -std::log(1000.0), 1e-5);
  });
}

TEST(TopLogprobsTest, TokensOutsideTheRowAreErrorsNamingTheRow) {
  for (int32_t bad : {5, -1}) {
    testing::ForEachDeviceAndIsa([&](Device device) {
      try {
        TopLogprobs({.x = OnDevice(Tensor::Zeros({2, 5}, DType::kF32), device),
                     .token = OnDevice(Tensor::FromVector(std::vector<int32_t>{0, bad}, {2}), device),
                     .ids = Tensor::Empty({2, 3}, DType::kI32, device),
                     .values = Tensor::Empty({2, 3}, DType::kF32, device)});
        Synchronize(device);  // a GPU kernel's bad token is reported at the next wait
        ADD_FAILURE() << "token " << bad << " of 5 was accepted";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("TopLogprobs"), std::string::npos) << what;
        EXPECT_NE(what.find("token[1] = " + std::to_string(bad)), std::string::npos) << what;
      }
    });
  }
}

TEST(TopLogprobsTest, ShapesAndDtypesAreCheckedByName) {
  const Tensor x = Tensor::Zeros({2, 5}, DType::kF32);
  const Tensor token = Tensor::FromVector(std::vector<int32_t>{0, 1}, {2});
  const auto expect_error = [&](const TopLogprobsArgs& args, const std::string& name) {
    try {
      TopLogprobs(args);
      ADD_FAILURE() << "accepted; expected an error naming " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  const Tensor ids = Tensor::Empty({2, 3}, DType::kI32), values = Tensor::Empty({2, 3}, DType::kF32);
  expect_error({.x = x, .token = Tensor::Zeros({3}, DType::kI32), .ids = ids, .values = values}, "token");
  expect_error({.x = x, .token = token, .ids = Tensor::Empty({2, 3}, DType::kF32), .values = values}, "ids");
  expect_error({.x = x, .token = token, .ids = ids, .values = Tensor::Empty({2, 4}, DType::kF32)}, "values");
  // k = 6 > V = 5, and k = 21 > kMaxTopLogprobs.
  expect_error({.x = x, .token = token, .ids = Tensor::Empty({2, 7}, DType::kI32),
                .values = Tensor::Empty({2, 7}, DType::kF32)},
               "kMaxTopLogprobs");
  const Tensor wide = Tensor::Zeros({2, 100}, DType::kF32);
  expect_error({.x = wide, .token = token, .ids = Tensor::Empty({2, 22}, DType::kI32),
                .values = Tensor::Empty({2, 22}, DType::kF32)},
               "kMaxTopLogprobs");
  expect_error({.x = x, .token = token, .allowed = Tensor::Zeros({2, 1}, DType::kF32), .ids = ids, .values = values},
               "allowed");
}

}  // namespace
}  // namespace vt
