// Penalties contract (vLLM's apply_penalties): against a double-precision reference
// on random logits with strided rows, odd vocabulary sizes and 1..17 rows; token
// lists with repeats, tokens in the prompt only, in the outputs only and in both,
// -1 padding anywhere, every output_begin from 0 (no prompt) to the list's end (no
// outputs); repetition 1 (none), below and above 1, frequency and presence of both
// signs. Rows untouched by their lists stay bit-identical. Bad ids are errors naming
// the position.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"

namespace vt {
namespace {

Tensor OnDevice(const Tensor& t, Device device) { return device == t.device() ? t : t.To(device); }

struct PenaltyCase {
  int64_t rows, vocab, length;
  std::vector<int32_t> ids;           // [rows, length]
  std::vector<int32_t> output_begin;  // [rows]
  std::vector<float> params;          // [rows, 3]
};

PenaltyCase RandomCase(int64_t rows, int64_t vocab, int64_t length, std::mt19937& rng) {
  PenaltyCase c{rows, vocab, length, {}, {}, {}};
  // Tokens from a small pool so that repeats and prompt/output overlaps are common.
  std::uniform_int_distribution<int32_t> pool(0, 11), any(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> favourites(12);
  for (int32_t& t : favourites) t = any(rng);
  favourites[0] = 0;
  favourites[1] = static_cast<int32_t>(vocab - 1);
  std::uniform_int_distribution<int> coin(0, 9);
  std::uniform_int_distribution<int64_t> begin(0, length);
  const float repetition[] = {1.0f, 0.7f, 1.3f, 2.0f};
  std::uniform_real_distribution<float> penalty(-2.0f, 2.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < length; ++i) c.ids.push_back(coin(rng) == 0 ? -1 : favourites[pool(rng)]);
    c.output_begin.push_back(static_cast<int32_t>(r == 0 ? 0 : r == 1 ? length : begin(rng)));
    c.params.push_back(repetition[r % 4]);
    c.params.push_back(r % 3 == 0 ? 0.0f : penalty(rng));
    c.params.push_back(r % 5 == 0 ? 0.0f : penalty(rng));
  }
  return c;
}

std::vector<double> Reference(const Tensor& x, const PenaltyCase& c) {
  std::vector<double> out = testing::ToDoubles(x);
  for (int64_t r = 0; r < c.rows; ++r) {
    std::map<int32_t, int64_t> outputs;  // token -> its count among the outputs
    std::map<int32_t, bool> seen;
    for (int64_t i = 0; i < c.length; ++i) {
      const int32_t t = c.ids[r * c.length + i];
      if (t < 0) continue;
      seen[t] = true;
      if (i >= c.output_begin[r]) ++outputs[t];
    }
    const double repetition = c.params[3 * r], frequency = c.params[3 * r + 1], presence = c.params[3 * r + 2];
    for (const auto& [t, unused] : seen) {
      double& v = out[r * c.vocab + t];
      v = v > 0 ? v / repetition : v * repetition;
      const int64_t n = outputs.count(t) ? outputs[t] : 0;
      if (n > 0) v -= frequency * static_cast<double>(n) + presence;
    }
  }
  return out;
}

void CheckPenalties(int64_t rows, int64_t vocab, int64_t length, std::mt19937& rng) {
  SCOPED_TRACE("R=" + std::to_string(rows) + " V=" + std::to_string(vocab) + " L=" + std::to_string(length));
  const PenaltyCase c = RandomCase(rows, vocab, length, rng);
  const Tensor x = testing::RandomTensor({rows, vocab}, DType::kF32, kCpu, rng, -4.0f, 4.0f);
  const std::vector<double> ref = Reference(x, c);
  testing::ForEachDeviceAndIsa([&](Device device) {
    const Tensor got = OnDevice(testing::WithPaddedRows(x, 5), device);  // strided rows, adjusted in place
    Penalties({.x = got,
               .token_ids = OnDevice(Tensor::FromVector(c.ids, {rows, length}), device),
               .output_begin = OnDevice(Tensor::FromVector(c.output_begin, {rows}), device),
               .params = OnDevice(Tensor::FromVector(c.params, {rows, 3}), device)});
    // One f32 rounding of the double result: equal to the reference rounded to f32.
    EXPECT_TRUE(testing::AllClose(ref, got, 1e-6));
    const std::vector<float> values = got.ToFloatVector(), before = x.ToFloatVector();
    for (int64_t i = 0; i < rows * vocab; ++i) {
      if (ref[i] == static_cast<double>(before[i])) {
        ASSERT_EQ(values[i], before[i]) << "entry " << i << " has no penalty but changed";
      }
    }
  });
}

TEST(PenaltiesTest, MatchTheReference) {
  std::mt19937 rng(1);
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t vocab : {1, 37, 4099}) {
      for (int64_t length : {1, 9, 300}) CheckPenalties(rows, vocab, length, rng);
    }
  }
}

// A list longer than a block's threads, every entry the same token: counted once
// per occurrence, adjusted once.
TEST(PenaltiesTest, OneTokenRepeatedManyTimesIsAdjustedOnce) {
  testing::ForEachDeviceAndIsa([&](Device device) {
    const Tensor x = OnDevice(Tensor::FromVector(std::vector<float>{1.0f, 2.0f, -3.0f}, {1, 3}), device);
    Penalties({.x = x,
               .token_ids = OnDevice(Tensor::FromVector(std::vector<int32_t>(1000, 1), {1, 1000}), device),
               .output_begin = OnDevice(Tensor::FromVector(std::vector<int32_t>{400}, {1}), device),
               .params = OnDevice(Tensor::FromVector(std::vector<float>{2.0f, 0.001f, 0.5f}, {1, 3}), device)});
    // 2 / 2 - (0.001 * 600 + 0.5)
    EXPECT_EQ(x.ToFloatVector(), (std::vector<float>{1.0f, static_cast<float>(1.0 - (0.001f * 600.0 + 0.5)), -3.0f}));
  });
}

TEST(PenaltiesTest, IdsOutsideTheVocabularyAreErrorsNamingThePosition) {
  for (int32_t bad : {5, -2}) {
    testing::ForEachDeviceAndIsa([&](Device device) {
      const Tensor x = OnDevice(Tensor::Zeros({2, 5}, DType::kF32), device);
      try {
        Penalties({.x = x,
                   .token_ids = OnDevice(Tensor::FromVector(std::vector<int32_t>{0, 1, 4, bad}, {2, 2}), device),
                   .output_begin = OnDevice(Tensor::FromVector(std::vector<int32_t>{0, 0}, {2}), device),
                   .params = OnDevice(Tensor::FromVector(std::vector<float>{1.5f, 0, 0, 1.5f, 0, 0}, {2, 3}), device)});
        Synchronize(device);  // a GPU kernel's bad id is reported at the next wait
        ADD_FAILURE() << "token id " << bad << " of 5 was accepted";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("Penalties"), std::string::npos) << what;
        EXPECT_NE(what.find("token_ids[1, 1] = " + std::to_string(bad)), std::string::npos) << what;
      }
    });
  }
}

TEST(PenaltiesTest, ShapesAndDtypesAreCheckedByName) {
  const Tensor x = Tensor::Zeros({2, 5}, DType::kF32);
  const Tensor ids = Tensor::FromVector(std::vector<int32_t>{0, 1, 2, 3}, {2, 2});
  const Tensor begin = Tensor::FromVector(std::vector<int32_t>{0, 0}, {2});
  const Tensor params = Tensor::Zeros({2, 3}, DType::kF32);
  EXPECT_THROW(Penalties({.x = Tensor::Zeros({2, 5}, DType::kBF16), .token_ids = ids, .output_begin = begin,
                          .params = params}),
               Error);
  EXPECT_THROW(Penalties({.x = x, .token_ids = ids.Slice(0, 0, 1), .output_begin = begin, .params = params}), Error);
  try {
    Penalties({.x = x, .token_ids = ids, .output_begin = begin, .params = Tensor::Zeros({2, 2}, DType::kF32)});
    ADD_FAILURE() << "params [2, 2] was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("params"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vt
