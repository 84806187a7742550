// Sampler: greedy, filters, penalties, seeds, logprobs conventions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "vllm/sample/sampler.h"
#include "vt/ops.h"

namespace vllm {
namespace {

Request MakeRequest(SamplingParams params, std::vector<int32_t> prompt = {0}, std::vector<int32_t> eos = {}) {
  return Request("r", std::move(prompt), params, std::move(eos), 0);
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

TEST(SamplerTest, GreedyTakesTheFirstMaximum) {
  Sampler sampler(0);
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  Request r = MakeRequest(Greedy());
  EXPECT_EQ(sampler.Sample(logits.data(), 4, r).token_id, 1);
}

TEST(SamplerTest, TopKOneAndTinyTopPAreGreedy) {
  Sampler sampler(1);
  std::vector<float> logits = {0.5f, 0.4f, 2.0f, 1.9f, 0.0f};
  for (int trial = 0; trial < 50; ++trial) {
    SamplingParams k1;
    k1.top_k = 1;
    SamplingParams p_tiny;
    p_tiny.top_p = 1e-6;
    Request a = MakeRequest(k1), b = MakeRequest(p_tiny);
    EXPECT_EQ(sampler.Sample(logits.data(), 5, a).token_id, 2);
    sampler.Release("r");
    EXPECT_EQ(sampler.Sample(logits.data(), 5, b).token_id, 2);
    sampler.Release("r");
  }
}

TEST(SamplerTest, MinPAndTopPRemoveTheTail) {
  Sampler sampler(2);
  // probs ~ [0.64, 0.24, 0.09, 0.03]
  std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  SamplingParams min_p;
  min_p.min_p = 0.3;  // keeps tokens with p >= 0.3 * 0.64: tokens 0 and 1
  SamplingParams top_p;
  top_p.top_p = 0.8;  // 0.64 < 0.8 -> add token 1 (0.88): tokens 0 and 1
  for (const SamplingParams& params : {min_p, top_p}) {
    std::vector<int> counts(4, 0);
    for (int trial = 0; trial < 400; ++trial) {
      Request r = MakeRequest(params);
      ++counts[sampler.Sample(logits.data(), 4, r).token_id];
      sampler.Release("r");
    }
    EXPECT_EQ(counts[2] + counts[3], 0);
    EXPECT_GT(counts[0], counts[1]);
    EXPECT_GT(counts[1], 40);
  }
}

TEST(SamplerTest, TemperatureSamplingFollowsTheDistribution) {
  Sampler sampler(3);
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  std::vector<int> counts(3, 0);
  const int n = 20000;
  for (int trial = 0; trial < n; ++trial) {
    Request r = MakeRequest(SamplingParams{});
    ++counts[sampler.Sample(logits.data(), 3, r).token_id];
    sampler.Release("r");
  }
  // 5 standard deviations of a binomial with n = 20000 are < 0.018.
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.018);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.018);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.018);
}

TEST(SamplerTest, SeededRequestsAreReproducibleAndIndependentOfOtherDraws) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f);
  SamplingParams seeded;
  seeded.seed = 1234;
  auto draw = [&](Sampler& sampler, int noise_draws) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < noise_draws; ++i) {
      Request other("other" + std::to_string(i), {0}, SamplingParams{}, {}, 1);
      sampler.Sample(logits.data(), 50, other);
    }
    Request r = MakeRequest(seeded);
    for (int step = 0; step < 10; ++step) tokens.push_back(sampler.Sample(logits.data(), 50, r).token_id);
    return tokens;
  };
  Sampler a(7), b(99);
  EXPECT_EQ(draw(a, 0), draw(b, 5));
}

TEST(SamplerTest, PenaltiesFollowVllmFormulas) {
  Sampler sampler(4);
  SamplingParams p = Greedy();
  p.repetition_penalty = 2.0;
  // token 0 (in the prompt) 1.5 -> 0.75 loses to token 1 (1.0)
  std::vector<float> logits = {1.5f, 1.0f, -3.0f};
  Request r = MakeRequest(p, {0});
  EXPECT_EQ(sampler.Sample(logits.data(), 3, r).token_id, 1);
  SamplingParams f = Greedy();
  f.frequency_penalty = 0.4;
  f.presence_penalty = 0.2;
  Request out = MakeRequest(f, {2});
  out.AppendOutputToken(0);
  out.AppendOutputToken(0);
  // token 0: 1.5 - (0.4 * 2 + 0.2) = 0.5 < 1.0; prompt tokens are not penalised
  EXPECT_EQ(sampler.Sample(logits.data(), 3, out).token_id, 1);
}

TEST(SamplerTest, MinTokensMasksEosAndStopTokens) {
  Sampler sampler(5);
  SamplingParams p = Greedy();
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  std::vector<float> logits = {0.0f, 5.0f, 9.0f, 1.0f};
  Request r = MakeRequest(p, {0}, /*eos=*/{2});
  EXPECT_EQ(sampler.Sample(logits.data(), 4, r).token_id, 3);
  r.AppendOutputToken(3);
  r.AppendOutputToken(3);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, r).token_id, 2);
}

TEST(SamplerTest, LogprobsAreRawLogSoftmaxTopKPlusTheSampledToken) {
  Sampler sampler(6);
  SamplingParams p = Greedy();
  p.logprobs = 2;
  p.repetition_penalty = 10.0;  // changes the choice, not the reported logprobs
  std::vector<float> logits = {2.0f, 1.0f, 0.5f, 1.9f};
  Request r = MakeRequest(p, {0});
  SampleResult s = sampler.Sample(logits.data(), 4, r);
  EXPECT_EQ(s.token_id, 3);
  double z = std::log(std::exp(2.0) + std::exp(1.0) + std::exp(0.5) + std::exp(1.9));
  ASSERT_EQ(s.logprobs.size(), 2u);  // top-2 {0, 3} already holds the sampled token
  EXPECT_EQ(s.logprobs[0].first, 0);
  EXPECT_NEAR(s.logprobs[0].second, 2.0 - z, 1e-6);
  EXPECT_EQ(s.logprobs[1].first, 3);
  p.logprobs = -1;
  Request all = MakeRequest(p, {0});
  EXPECT_EQ(sampler.Sample(logits.data(), 4, all).logprobs.size(), 4u);
}

TEST(SamplingParamsTest, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  try {
    p.Validate(100);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("top_p must be in (0, 1]"), std::string::npos);
  }
  SamplingParams q;
  q.stop_token_ids = {100};
  EXPECT_THROW(q.Validate(100), std::invalid_argument);
}

TEST(SamplerTest, LogitBiasMovesTheArgmaxAndLogprobsStayRaw) {
  Sampler sampler(0);
  std::vector<float> logits = {3.0f, 1.0f, 0.0f};
  SamplingParams p = Greedy();
  p.logit_bias = {{2, 5.0f}};
  p.logprobs = 0;
  Request r = MakeRequest(p);
  const SampleResult result = sampler.Sample(logits.data(), 3, r);
  EXPECT_EQ(result.token_id, 2);
  const std::vector<float> raw = LogSoftmax(logits.data(), 3);
  ASSERT_EQ(result.logprobs.size(), 1u);
  EXPECT_FLOAT_EQ(result.logprobs[0].second, raw[2]);
}

TEST(SamplerTest, AllowedTokenIdsMaskEveryOtherToken) {
  Sampler sampler(3);
  std::vector<float> logits = {5.0f, 0.0f, 1.0f, 4.0f};
  SamplingParams greedy = Greedy();
  greedy.allowed_token_ids = {1, 2};
  Request g = MakeRequest(greedy);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, g).token_id, 2);
  SamplingParams random;
  random.allowed_token_ids = {1, 2};
  for (int trial = 0; trial < 200; ++trial) {
    Request r = MakeRequest(random);
    const int32_t token = sampler.Sample(logits.data(), 4, r).token_id;
    EXPECT_TRUE(token == 1 || token == 2) << token;
    sampler.Release("r");
  }
}

TEST(SamplerTest, BadWordsMaskTheirLastTokenAfterTheirPrefix) {
  Sampler sampler(0);
  std::vector<float> logits = {0.0f, 1.0f, 3.0f, 2.0f};
  SamplingParams p = Greedy();
  p.bad_words_token_ids = {{1, 2}, {0, 3}};  // "2 after 1", "3 after 0"
  Request fresh = MakeRequest(p);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, fresh).token_id, 2);  // no prefix yet
  Request after_one = MakeRequest(p);
  after_one.AppendOutputToken(1);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, after_one).token_id, 3);
  SamplingParams single = Greedy();
  single.bad_words_token_ids = {{2}, {3}};
  Request r = MakeRequest(single);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, r).token_id, 1);
  // Masks that leave nothing fall back to the allowed tokens' raw logits.
  SamplingParams everything = Greedy();
  everything.allowed_token_ids = {3};
  everything.bad_words_token_ids = {{3}};
  Request e = MakeRequest(everything);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, e).token_id, 3);
  EXPECT_FALSE(Sampler::IsPlainGreedy(e));
}

TEST(SamplingParamsTest, LogitsProcessorIdsAndBiasesAreChecked) {
  SamplingParams p;
  p.allowed_token_ids = {4};
  EXPECT_THROW(p.Validate(4), std::invalid_argument);
  p.allowed_token_ids = {};
  p.logit_bias = {{0, 101.0f}};
  EXPECT_THROW(p.Validate(4), std::invalid_argument);
  p.logit_bias = {};
  p.bad_words_token_ids = {{}};
  EXPECT_THROW(p.Validate(4), std::invalid_argument);
  p.bad_words_token_ids = {{3, 1}};
  EXPECT_NO_THROW(p.Validate(4));
}

// Speculative decoding's rejection rule: whatever the draft (likely, unlikely,
// outside top-k), VerifyDraft's tokens are distributed as the request's processed
// distribution (temperature 0.7, top-k 5: computed here in double precision), and
// the draft is accepted with its probability. Chi-square over the 5 candidates
// (df 4; 25 is beyond its 1e-4 quantile).
TEST(SamplerTest, VerifyDraftTokensAreDistributedAsTheTargetsForAnyDraft) {
  const std::vector<float> logits = {1.0f, 0.2f, 2.0f, -0.5f, 1.5f, 0.9f, -2.0f, 0.0f};
  SamplingParams params;
  params.temperature = 0.7;
  params.top_k = 5;
  // The reference: softmax(logits / T) over the 5 largest (ids 2, 4, 0, 5, 1).
  const std::vector<int32_t> top = {2, 4, 0, 5, 1};
  std::vector<double> p(8, 0.0);
  double z = 0;
  for (int32_t t : top) z += std::exp(logits[t] / 0.7);
  for (int32_t t : top) p[t] = std::exp(logits[t] / 0.7) / z;
  constexpr int kDraws = 40000;
  for (int32_t draft : {2, 1, 6}) {  // the most likely, the least likely candidate, outside top-k
    Sampler sampler(9);
    Request r = MakeRequest(params);
    std::vector<int> counts(8, 0);
    int accepted = 0;
    for (int i = 0; i < kDraws; ++i) {
      bool ok = false;
      const SampleResult res = sampler.VerifyDraft(logits.data(), 8, r, draft, ok);
      ++counts[res.token_id];
      accepted += ok;
      if (ok) {
        EXPECT_EQ(res.token_id, draft);
      }
    }
    double chi2 = 0;
    for (int32_t t = 0; t < 8; ++t) {
      if (p[t] == 0) {
        EXPECT_EQ(counts[t], 0) << "token " << t << " is outside top-k";
        continue;
      }
      const double expected = p[t] * kDraws;
      chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
    }
    EXPECT_LT(chi2, 25.0) << "draft " << draft;
    const double rate = static_cast<double>(accepted) / kDraws;
    EXPECT_NEAR(rate, p[draft], 4 * std::sqrt(p[draft] * (1 - p[draft]) / kDraws) + 1e-9) << "draft " << draft;
  }
}

TEST(SamplerTest, VerifyDraftGreedyAcceptsTheArgmaxOnly) {
  Sampler sampler(0);
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 2.5f};
  Request r = MakeRequest(Greedy());
  bool ok = false;
  EXPECT_EQ(sampler.VerifyDraft(logits.data(), 4, r, 1, ok).token_id, 1);
  EXPECT_TRUE(ok);
  EXPECT_EQ(sampler.VerifyDraft(logits.data(), 4, r, 3, ok).token_id, 1);
  EXPECT_FALSE(ok);
}

// What the runner hands vt::Sample for a request: greedy as temperature 0, "all
// tokens" top-k as 0, the filters as given, the request's seed (or one drawn once and
// kept until Release), and its position (output tokens so far).
TEST(SamplerTest, DeviceSampleRowsCarryTheRequestsParametersSeedAndPosition) {
  Sampler sampler(5);
  SamplingParams p;
  p.temperature = 0.7;
  p.top_k = -1;
  p.top_p = 0.9;
  p.min_p = 0.05;
  p.seed = 0x1234567890abcdefull;
  Request seeded = MakeRequest(p);
  vt::SampleRow row = sampler.DeviceSampleRow(seeded);
  EXPECT_FLOAT_EQ(row.temperature, 0.7f);
  EXPECT_EQ(row.top_k, 0);
  EXPECT_FLOAT_EQ(row.top_p, 0.9f);
  EXPECT_FLOAT_EQ(row.min_p, 0.05f);
  EXPECT_EQ(row.Seed(), 0x1234567890abcdefull);
  EXPECT_EQ(row.Offset(), 0);
  seeded.AppendOutputToken(3);
  seeded.AppendOutputToken(4);
  EXPECT_EQ(sampler.DeviceSampleRow(seeded).Offset(), 2);

  EXPECT_EQ(sampler.DeviceSampleRow(MakeRequest(Greedy())).temperature, 0.0f);
  p.seed.reset();
  p.top_k = 20;
  Request unseeded("u", {0}, p, {}, 0);
  const uint64_t first = sampler.DeviceSampleRow(unseeded).Seed();
  EXPECT_EQ(sampler.DeviceSampleRow(unseeded).top_k, 20);
  EXPECT_EQ(sampler.DeviceSampleRow(unseeded).Seed(), first) << "one seed for the request's whole life";
  sampler.Release("u");
  EXPECT_NE(sampler.DeviceSampleRow(unseeded).Seed(), first) << "a released request's seed is forgotten";
}

// Which requests the device samples: not those needing the host's logits.
TEST(SamplerTest, SamplesOnDeviceExcludesWhatNeedsTheHost) {
  SamplingParams p;
  EXPECT_TRUE(Sampler::SamplesOnDevice(MakeRequest(p)));
  SamplingParams logprobs = p;  // vt::TopLogprobs takes up to vt::kMaxTopLogprobs on the device
  logprobs.logprobs = 2;
  EXPECT_TRUE(Sampler::SamplesOnDevice(MakeRequest(logprobs)));
  logprobs.temperature = 0;  // greedy, but more than the argmax comes back
  EXPECT_FALSE(Sampler::IsPlainGreedy(MakeRequest(logprobs)));
  logprobs.logprobs = static_cast<int>(vt::kMaxTopLogprobs) + 1;
  EXPECT_FALSE(Sampler::SamplesOnDevice(MakeRequest(logprobs)));
  SamplingParams penalty = p;  // vt::Penalties takes it on the device, before vt::Sample
  penalty.presence_penalty = 0.5;
  EXPECT_TRUE(Sampler::SamplesOnDevice(MakeRequest(penalty)));
  EXPECT_TRUE(Sampler::HasPenalties(MakeRequest(penalty)));
  penalty.temperature = 0;  // greedy, but not the raw logits' argmax
  EXPECT_FALSE(Sampler::IsPlainGreedy(MakeRequest(penalty)));
  SamplingParams bias = p;  // a dense row added on the device (DeviceBiasRow)...
  bias.logit_bias = {{1, 2.0f}};
  EXPECT_TRUE(Sampler::SamplesOnDevice(MakeRequest(bias)));
  EXPECT_TRUE(Sampler::HasDeviceBias(MakeRequest(bias)));
  bias.temperature = 0;
  EXPECT_FALSE(Sampler::IsPlainGreedy(MakeRequest(bias)));
  bias.bad_words_token_ids = {{3}};  // ...but not with a mask (Sample may drop both)
  EXPECT_FALSE(Sampler::SamplesOnDevice(MakeRequest(bias)));
  SamplingParams min_tokens = p;  // EOS and stop tokens as cleared bits of vt::Sample's row
  min_tokens.min_tokens = 3;
  EXPECT_TRUE(Sampler::SamplesOnDevice(MakeRequest(min_tokens, {0}, {1})));
  EXPECT_TRUE(Sampler::HasDeviceMask(MakeRequest(min_tokens, {0}, {1})));
  SamplingParams allowed = p;  // likewise allowed_token_ids and bad words
  allowed.allowed_token_ids = {1, 2};
  allowed.bad_words_token_ids = {{3}};
  EXPECT_TRUE(Sampler::SamplesOnDevice(MakeRequest(allowed)));
  EXPECT_TRUE(Sampler::HasDeviceMask(MakeRequest(allowed)));
  EXPECT_FALSE(Sampler::HasDeviceMask(MakeRequest(p)));
}

// The device path's penalties (vt::Penalties on the rows ModelRunner uploads,
// Sampler::DevicePenaltyRows: the request's whole history, outputs from
// num_prompt_tokens) pick the greedy token the host Sampler picks, over random logits
// and histories where the penalties decide the argmax (small vocabulary, repeated
// tokens, both signs); unpenalized rows of the same step keep their argmax.
TEST(SamplerTest, DevicePenaltiesGiveTheHostsGreedyToken) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> logit(-3.0f, 3.0f), penalty(-2.0f, 2.0f);
  std::uniform_int_distribution<int32_t> token(0, 15);
  const float repetition[] = {1.0f, 0.8f, 1.5f};
  Sampler sampler(0);
  int changed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SamplingParams p = Greedy();
    p.repetition_penalty = repetition[trial % 3];
    p.frequency_penalty = trial % 2 ? penalty(rng) : 0.0;
    p.presence_penalty = trial % 5 ? penalty(rng) : 0.0;
    if (!Sampler::HasPenalties(MakeRequest(p))) p.presence_penalty = 0.5;
    std::vector<int32_t> prompt(1 + trial % 7);
    for (int32_t& t : prompt) t = token(rng);
    Request r = MakeRequest(p, prompt);
    for (int i = 0; i < trial % 9; ++i) r.AppendOutputToken(token(rng));
    std::vector<float> logits(16);
    for (float& v : logits) v = logit(rng);
    const int32_t host = sampler.Sample(logits.data(), 16, r).token_id;
    // Row 1 of three, as ModelRunner packs a step: the rows around it are not penalized.
    std::vector<float> three(logits);
    three.insert(three.end(), logits.begin(), logits.end());
    three.insert(three.end(), logits.begin(), logits.end());
    const vt::Tensor x = vt::Tensor::FromVector(three, {3, 16});
    const Sampler::PenaltyRows rows = Sampler::DevicePenaltyRows({nullptr, &r, nullptr});
    ASSERT_EQ(rows.length, r.num_tokens());
    const vt::Tensor ids = vt::Tensor::FromVector(rows.ids, {3 * rows.length + 3});
    vt::Penalties({.x = x,
                   .token_ids = ids.Slice(0, 0, 3 * rows.length).View({3, rows.length}),
                   .output_begin = ids.Slice(0, 3 * rows.length, 3 * rows.length + 3),
                   .params = vt::Tensor::FromVector(rows.params, {3, 3})});
    const vt::Tensor id = vt::Tensor::Empty({3}, vt::DType::kI32);
    vt::Argmax({.x = x, .out = id});
    const auto raw_argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(id.ToIntVector(), (std::vector<int64_t>{raw_argmax, host, raw_argmax})) << "trial " << trial;
    changed += host != raw_argmax;
  }
  EXPECT_GT(changed, 30) << "the penalties rarely decided the token: the test is weak";
}

// The device path's logprobs (vt::TopLogprobs, assembled by LogprobsFromDeviceRow)
// are the host Sampler's: the same entries in the same order (the top k, then the
// sampled token when not among them), values within f32 rounding, for k from 0 to
// vt::kMaxTopLogprobs, greedy and sampled, ties in the logits included; requests
// asking for more than the device gives, or the whole vocabulary, stay on the host.
TEST(SamplerTest, DeviceLogprobsAreTheHosts) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(-40, 40);
  Sampler sampler(0);
  const int64_t vocab = 301;
  for (int trial = 0; trial < 200; ++trial) {
    SamplingParams p = trial % 2 ? Greedy() : SamplingParams{};
    const int ks[] = {0, 1, 5, static_cast<int>(vt::kMaxTopLogprobs)};
    p.logprobs = ks[trial % 4];
    Request r = MakeRequest(p);
    ASSERT_TRUE(Sampler::SamplesOnDevice(r));
    ASSERT_FALSE(Sampler::IsPlainGreedy(r)) << "a greedy request with logprobs is not the argmax alone";
    ASSERT_EQ(Sampler::DeviceLogprobs(r), *p.logprobs);
    std::vector<float> logits(vocab);
    for (float& v : logits) v = 0.1f * static_cast<float>(level(rng));  // 81 levels: many ties
    const SampleResult host = sampler.Sample(logits.data(), vocab, r);
    const int64_t columns = 1 + vt::kMaxTopLogprobs;
    const vt::Tensor ids = vt::Tensor::Empty({1, columns}, vt::DType::kI32);
    const vt::Tensor values = vt::Tensor::Empty({1, columns}, vt::DType::kF32);
    vt::TopLogprobs({.x = vt::Tensor::FromVector(logits, {1, vocab}),
                     .token = vt::Tensor::FromVector(std::vector<int32_t>{host.token_id}, {1}),
                     .ids = ids,
                     .values = values});
    const std::vector<int64_t> id_row = ids.ToIntVector();
    const std::vector<float> value_row = values.ToFloatVector();
    const TokenLogprobs device = Sampler::LogprobsFromDeviceRow(id_row.data(), value_row.data(), *p.logprobs);
    ASSERT_EQ(device.size(), host.logprobs.size()) << "trial " << trial;
    for (size_t j = 0; j < device.size(); ++j) {
      EXPECT_EQ(device[j].first, host.logprobs[j].first) << "trial " << trial << " entry " << j;
      EXPECT_NEAR(device[j].second, host.logprobs[j].second, 1e-5) << "trial " << trial << " entry " << j;
    }
  }
  SamplingParams more = Greedy();
  more.logprobs = static_cast<int>(vt::kMaxTopLogprobs) + 1;
  EXPECT_FALSE(Sampler::SamplesOnDevice(MakeRequest(more)));
  more.logprobs = -1;  // the whole vocabulary
  EXPECT_FALSE(Sampler::SamplesOnDevice(MakeRequest(more)));
}

// The device path's masks (Sampler::ApplyDeviceMask on a row of ones, then vt::Sample
// with that row as `allowed`) give the host Sampler's greedy token for requests with
// allowed_token_ids, bad words (one and two tokens, matching the output or not) and
// min_tokens (EOS and stop tokens masked), alone and together, over random logits;
// sampled draws never take a token the host masks; when the masks leave nothing, only
// allowed_token_ids' mask holds, as on the host.
TEST(SamplerTest, DeviceMasksGiveTheHostsTokens) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> logit(-3.0f, 3.0f);
  std::uniform_int_distribution<int32_t> token(0, 36);
  const int64_t vocab = 37;  // two bitmask words, the second one partial
  const int64_t words = 2;
  Sampler sampler(0);
  int masked_argmax = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SamplingParams p = trial % 4 == 3 ? SamplingParams{} : Greedy();
    if (trial % 3 == 0) {
      for (int i = 0; i < 1 + trial % 7; ++i) p.allowed_token_ids.push_back(token(rng));
    }
    if (trial % 5 < 2) p.bad_words_token_ids = {{token(rng)}, {7, token(rng)}};
    if (trial % 2 == 0) {
      p.min_tokens = 3;
      p.stop_token_ids = {token(rng)};
    }
    Request r = MakeRequest(p, {1, 2}, /*eos=*/{token(rng)});
    for (int i = 0; i < trial % 4; ++i) r.AppendOutputToken(i == 0 ? 7 : token(rng));  // 7 starts a bad word
    if (!Sampler::HasDeviceMask(r)) continue;
    ASSERT_TRUE(Sampler::SamplesOnDevice(r));
    ASSERT_FALSE(Sampler::IsPlainGreedy(r));
    std::vector<float> logits(vocab);
    for (float& v : logits) v = logit(rng);
    std::vector<uint32_t> row(words, ~0u);
    Sampler::ApplyDeviceMask(r, row, vocab);
    std::vector<int32_t> row_words(row.begin(), row.end());
    const vt::Tensor allowed = vt::Tensor::FromVector(row_words, {1, words});
    const vt::Tensor x = vt::Tensor::FromVector(logits, {1, vocab});
    if (p.IsGreedy()) {
      const int32_t host = sampler.Sample(logits.data(), vocab, r).token_id;
      const vt::Tensor id = vt::Tensor::Empty({1}, vt::DType::kI32);
      vt::Sample({.x = x,
                  .params = vt::Tensor::FromVector(vt::SampleRowWords({sampler.DeviceSampleRow(r)}),
                                                   {1, vt::kSampleRowWords}),
                  .out = id,
                  .allowed = allowed});
      EXPECT_EQ(id.ToIntVector()[0], host) << "trial " << trial;
      masked_argmax += host != std::max_element(logits.begin(), logits.end()) - logits.begin();
      continue;
    }
    // Sampled: the host's candidates are the unmasked tokens; every device draw is one.
    std::vector<bool> host_allowed(vocab, false);
    for (int seed = 0; seed < 20; ++seed) {
      SamplingParams seeded = p;
      seeded.seed = seed;
      Request again = MakeRequest(seeded, {1, 2}, r.eos_token_ids);
      for (int32_t t : r.output_token_ids()) again.AppendOutputToken(t);
      host_allowed[sampler.Sample(logits.data(), vocab, again).token_id] = true;
      const vt::Tensor id = vt::Tensor::Empty({1}, vt::DType::kI32);
      vt::Sample({.x = x,
                  .params = vt::Tensor::FromVector(vt::SampleRowWords({sampler.DeviceSampleRow(again)}),
                                                   {1, vt::kSampleRowWords}),
                  .out = id,
                  .allowed = allowed});
      const int64_t drawn = id.ToIntVector()[0];
      EXPECT_TRUE((row[drawn >> 5] >> (drawn & 31)) & 1u) << "trial " << trial << " drew masked token " << drawn;
    }
    for (int64_t t = 0; t < vocab; ++t) {
      if (host_allowed[t]) {
        EXPECT_TRUE((row[t >> 5] >> (t & 31)) & 1u) << "trial " << trial << " token " << t;
      }
    }
  }
  EXPECT_GT(masked_argmax, 40) << "the masks rarely moved the greedy token: the test is weak";
  // Everything masked: allowed_token_ids {5} with the bad word {5} leaves only 5's mask.
  SamplingParams all = Greedy();
  all.allowed_token_ids = {5};
  all.bad_words_token_ids = {{5}};
  std::vector<uint32_t> row(words, ~0u);
  Sampler::ApplyDeviceMask(MakeRequest(all), row, vocab);
  EXPECT_EQ(row, (std::vector<uint32_t>{1u << 5, 0u}));
  std::vector<float> logits(vocab, 0.0f);
  EXPECT_EQ(sampler.Sample(logits.data(), vocab, MakeRequest(all)).token_id, 5);
}

// logit_bias on the device (Sampler::DeviceBiasRow added to the row, then vt::Sample)
// gives the host Sampler's greedy token over random logits and biases of both signs,
// with penalties after it as on the host (vt::Penalties on the biased row).
TEST(SamplerTest, DeviceBiasGivesTheHostsTokens) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> logit(-3.0f, 3.0f), bias(-4.0f, 4.0f);
  std::uniform_int_distribution<int32_t> token(0, 36);
  const int64_t vocab = 37;
  Sampler sampler(0);
  int moved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SamplingParams p = Greedy();
    for (int i = 0; i < 1 + trial % 5; ++i) p.logit_bias.emplace_back(token(rng), bias(rng));  // repeats add up
    if (trial % 3 == 0) p.presence_penalty = 0.7;
    Request r = MakeRequest(p, {token(rng), token(rng)});
    r.AppendOutputToken(token(rng));
    ASSERT_TRUE(Sampler::SamplesOnDevice(r));
    std::vector<float> logits(vocab);
    for (float& v : logits) v = logit(rng);
    const int32_t host = sampler.Sample(logits.data(), vocab, r).token_id;
    std::vector<float> row(vocab);
    Sampler::DeviceBiasRow(r, row);
    const vt::Tensor x = vt::Tensor::FromVector(logits, {1, vocab});
    vt::Add({.a = x, .b = vt::Tensor::FromVector(row, {1, vocab}), .out = x});
    const Sampler::PenaltyRows penalties = Sampler::DevicePenaltyRows({Sampler::HasPenalties(r) ? &r : nullptr});
    if (penalties.length > 0) {
      const vt::Tensor ids = vt::Tensor::FromVector(penalties.ids, {penalties.length + 1});
      vt::Penalties({.x = x,
                     .token_ids = ids.Slice(0, 0, penalties.length).View({1, penalties.length}),
                     .output_begin = ids.Slice(0, penalties.length, penalties.length + 1),
                     .params = vt::Tensor::FromVector(penalties.params, {1, 3})});
    }
    const vt::Tensor id = vt::Tensor::Empty({1}, vt::DType::kI32);
    vt::Argmax({.x = x, .out = id});
    EXPECT_EQ(id.ToIntVector()[0], host) << "trial " << trial;
    moved += host != std::max_element(logits.begin(), logits.end()) - logits.begin();
  }
  EXPECT_GT(moved, 30) << "the biases rarely moved the greedy token: the test is weak";
}

}  // namespace
}  // namespace vllm
