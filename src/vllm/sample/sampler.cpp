#include "vllm/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

namespace vllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool HasPenalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0;
}

// Whether EOS and stop tokens are still masked (fewer than min_tokens generated).
bool MasksStopTokens(const Request& r) { return r.num_output_tokens() < r.sampling_params.min_tokens; }

void ApplyPenalties(std::vector<float>& logits, const Request& r) {
  const SamplingParams& p = r.sampling_params;
  if (!HasPenalties(p)) return;
  if (p.repetition_penalty != 1.0) {
    std::vector<bool> seen(logits.size(), false);
    for (int32_t t : r.all_token_ids()) seen[t] = true;
    const float rp = static_cast<float>(p.repetition_penalty);
    for (size_t t = 0; t < logits.size(); ++t) {
      if (seen[t]) logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
    }
  }
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : r.output_token_ids()) ++counts[t];
    for (auto [t, n] : counts) {
      logits[t] -= static_cast<float>(p.frequency_penalty * n + p.presence_penalty);
    }
  }
}

void MaskStopTokensBeforeMinTokens(std::vector<float>& logits, const Request& r) {
  const SamplingParams& p = r.sampling_params;
  if (!MasksStopTokens(r)) return;
  if (!p.ignore_eos) {
    for (int32_t t : r.eos_token_ids) logits[t] = kNegInf;
  }
  for (int32_t t : p.stop_token_ids) logits[t] = kNegInf;
}

// Every token outside a non-empty allowed_token_ids becomes -inf.
void MaskDisallowed(std::vector<float>& logits, const std::vector<int32_t>& allowed_token_ids) {
  if (allowed_token_ids.empty()) return;
  std::vector<float> allowed(logits.size(), kNegInf);
  for (int32_t id : allowed_token_ids) allowed[id] = logits[id];
  logits.swap(allowed);
}

// Calls ban(t) for the last token t of every bad word whose other tokens end the
// request's output (a one-token word always).
template <typename Ban>
void ForEachBannedToken(const Request& r, const Ban& ban) {
  const std::vector<int32_t>& output = r.output_token_ids();
  for (const std::vector<int32_t>& word : r.sampling_params.bad_words_token_ids) {
    const size_t prefix = word.size() - 1;
    if (prefix > output.size()) continue;
    if (std::equal(word.begin(), word.end() - 1, output.end() - static_cast<std::ptrdiff_t>(prefix))) {
      ban(word.back());
    }
  }
}

// logit_bias, allowed_token_ids and bad words (SamplingParams' logits processors).
void ApplyLogitsProcessors(std::vector<float>& logits, const Request& r) {
  const SamplingParams& p = r.sampling_params;
  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
  MaskDisallowed(logits, p.allowed_token_ids);
  ForEachBannedToken(r, [&](int32_t t) { logits[t] = kNegInf; });
}

void ClearBit(std::span<uint32_t> words, int32_t t) { words[static_cast<size_t>(t) >> 5] &= ~(1u << (t & 31)); }

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

const std::pair<int32_t, double>& SampleCandidates::operator[](size_t i) {
  while (i >= sorted_) {
    // The next chunk (doubling, from 256) of the descending order: nth_element, then
    // a sort of the chunk alone. A walk that stops early sorts little of the row.
    const size_t next = std::min(items_.size(), std::max<size_t>(256, 2 * sorted_));
    const auto first = items_.begin() + static_cast<std::ptrdiff_t>(sorted_);
    const auto last = items_.begin() + static_cast<std::ptrdiff_t>(next);
    const auto by_probability = [](const auto& a, const auto& b) { return ByProbability(a, b); };  // inlined
    if (last != items_.end()) std::nth_element(first, last, items_.end(), by_probability);
    std::sort(first, last, by_probability);
    sorted_ = next;
  }
  return items_[i];
}

void SampleCandidates::KeepFirst(size_t n) {
  if (n < items_.size()) (void)(*this)[n - 1];  // the first n in order
  items_.resize(n);
  sorted_ = std::min(sorted_, n);
}

void SampleCandidates::Erase(size_t i) {
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
  if (i < sorted_) --sorted_;
}

namespace {

// Candidates (token, prob) after temperature, min_p, top-k and top-p, renormalised,
// in descending probability as they are walked (SampleCandidates): the order of a full
// sort, without sorting a 248k vocabulary whose draw stops near the top (a full sort
// took ~20 ms a token on a Zen 5 core, twice a 0.8B model's decode step).
SampleCandidates Candidates(const std::vector<float>& logits, const SamplingParams& p) {
  const double inv_t = 1.0 / p.temperature;
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<std::pair<int32_t, double>> items;
  items.reserve(logits.size());
  for (size_t t = 0; t < logits.size(); ++t) {
    if (logits[t] == kNegInf) continue;
    items.emplace_back(static_cast<int32_t>(t), std::exp((static_cast<double>(logits[t]) - max_logit) * inv_t));
  }
  // min_p: drop tokens below min_p times the top probability (the top weight is 1).
  if (p.min_p > 0) {
    std::erase_if(items, [&](const auto& c) { return c.second < p.min_p; });
  }
  SampleCandidates cand(std::move(items));
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < cand.size()) cand.KeepFirst(static_cast<size_t>(p.top_k));
  double total = 0;
  if (p.top_p < 1.0) {
    double all = 0;
    for (const auto& c : cand.items()) all += c.second;
    // Keep the smallest prefix whose mass reaches top_p (the top token always stays).
    size_t keep = 0;
    while (keep < cand.size() && (keep == 0 || total < p.top_p * all)) total += cand[keep++].second;
    cand.KeepFirst(keep);
  } else {
    for (const auto& c : cand.items()) total += c.second;
  }
  cand.DivideBy(total);
  return cand;
}
}  // namespace

std::vector<float> LogSoftmax(const float* logits, int64_t vocab) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max);
  const double log_z = max + std::log(sum);
  std::vector<float> out(vocab);
  for (int64_t i = 0; i < vocab; ++i) out[i] = static_cast<float>(logits[i] - log_z);
  return out;
}

TokenLogprobs TopLogprobs(const std::vector<float>& logprobs, int k) {
  const int64_t vocab = static_cast<int64_t>(logprobs.size());
  const int64_t n = (k < 0 || k > vocab) ? vocab : k;
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b);
  });
  TokenLogprobs top;
  top.reserve(n);
  for (int64_t i = 0; i < n; ++i) top.emplace_back(ids[i], logprobs[ids[i]]);
  return top;
}

std::mt19937_64& Sampler::RngFor(const Request& r) {
  auto it = request_rngs_.find(r.req_id);
  if (it != request_rngs_.end()) return it->second;
  uint64_t seed = r.sampling_params.seed ? *r.sampling_params.seed : engine_rng_();
  return request_rngs_.emplace(r.req_id, std::mt19937_64(seed)).first->second;
}

bool Sampler::SamplesOnDevice(const Request& r) {
  const SamplingParams& p = r.sampling_params;
  const bool logprobs_fit = !p.logprobs || (*p.logprobs >= 0 && *p.logprobs <= vt::kMaxTopLogprobs);
  // logit_bias with a mask stays here: when the masks leave no token, Sample drops the
  // bias with them (ProcessedLogits), which a bias added on the device cannot follow.
  return logprobs_fit && (p.logit_bias.empty() || !HasDeviceMask(r));
}

bool Sampler::HasDeviceBias(const Request& r) { return !r.sampling_params.logit_bias.empty(); }

void Sampler::DeviceBiasRow(const Request& r, std::span<float> row) {
  std::fill(row.begin(), row.end(), 0.0f);
  for (const auto& [id, bias] : r.sampling_params.logit_bias) row[static_cast<size_t>(id)] += bias;
}

bool Sampler::HasDeviceMask(const Request& r) {
  const SamplingParams& p = r.sampling_params;
  return !p.allowed_token_ids.empty() || !p.bad_words_token_ids.empty() || MasksStopTokens(r);
}

void Sampler::ApplyDeviceMask(const Request& r, std::span<uint32_t> words, int64_t vocab) {
  const SamplingParams& p = r.sampling_params;
  for (int64_t t = vocab; t < static_cast<int64_t>(words.size()) * 32; ++t) ClearBit(words, static_cast<int32_t>(t));
  if (!p.allowed_token_ids.empty()) {
    std::vector<uint32_t> allowed(words.size(), 0);
    for (int32_t t : p.allowed_token_ids) allowed[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    for (size_t w = 0; w < words.size(); ++w) words[w] &= allowed[w];
  }
  const std::vector<uint32_t> after_allowed(words.begin(), words.end());
  ForEachBannedToken(r, [&](int32_t t) { ClearBit(words, t); });
  if (MasksStopTokens(r)) {
    if (!p.ignore_eos) {
      for (int32_t t : r.eos_token_ids) ClearBit(words, t);
    }
    for (int32_t t : p.stop_token_ids) ClearBit(words, t);
  }
  // As ProcessedLogits: when the masks leave no token, only allowed_token_ids' holds.
  if (std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; })) {
    std::copy(after_allowed.begin(), after_allowed.end(), words.begin());
  }
}

int Sampler::DeviceLogprobs(const Request& r) {
  return r.sampling_params.logprobs ? *r.sampling_params.logprobs : -1;
}

TokenLogprobs Sampler::LogprobsFromDeviceRow(const int64_t* ids, const float* values, int k) {
  TokenLogprobs out;
  for (int j = 1; j <= k; ++j) out.emplace_back(static_cast<int32_t>(ids[j]), values[j]);
  const bool has_sampled = std::any_of(out.begin(), out.end(), [&](const auto& e) { return e.first == ids[0]; });
  if (!has_sampled) out.emplace_back(static_cast<int32_t>(ids[0]), values[0]);
  return out;
}

bool Sampler::HasPenalties(const Request& r) { return vllm::HasPenalties(r.sampling_params); }

// Greedy with nothing but an argmax to take: no logprobs, penalties, masks or bias
// (a grammar aside, which the two callers below tell apart).
bool Sampler::IsBareGreedy(const Request& r) {
  return r.sampling_params.IsGreedy() && SamplesOnDevice(r) && !HasPenalties(r) && !r.sampling_params.logprobs &&
         !HasDeviceMask(r) && !HasDeviceBias(r);
}

bool Sampler::IsPlainGreedy(const Request& r) { return !r.sampling_params.structured_outputs && IsBareGreedy(r); }

bool Sampler::IsGreedyUnderGrammarOnly(const Request& r) {
  return r.sampling_params.structured_outputs && IsBareGreedy(r);
}

std::array<float, 3> Sampler::DevicePenalties(const Request& r) {
  const SamplingParams& p = r.sampling_params;
  return {static_cast<float>(p.repetition_penalty), static_cast<float>(p.frequency_penalty),
          static_cast<float>(p.presence_penalty)};
}

Sampler::PenaltyRows Sampler::DevicePenaltyRows(const std::vector<const Request*>& penalized) {
  PenaltyRows out;
  out.rows = static_cast<int64_t>(penalized.size());
  for (const Request* r : penalized) {
    if (r != nullptr) out.length = std::max(out.length, r->num_tokens());
  }
  if (out.length == 0) return out;
  const auto N = static_cast<size_t>(out.rows), L = static_cast<size_t>(out.length);
  out.ids.assign(N * L + N, -1);
  out.params.assign(N * 3, 0.0f);
  for (size_t n = 0; n < N; ++n) {
    out.ids[N * L + n] = 0;
    out.params[3 * n] = 1.0f;  // a row of -1s: nothing to adjust anyway
    if (penalized[n] == nullptr) continue;
    const std::vector<int32_t>& tokens = penalized[n]->all_token_ids();
    std::copy(tokens.begin(), tokens.end(), out.ids.begin() + static_cast<std::ptrdiff_t>(n * L));
    out.ids[N * L + n] = static_cast<int32_t>(penalized[n]->num_prompt_tokens());
    const std::array<float, 3> p = DevicePenalties(*penalized[n]);
    std::copy(p.begin(), p.end(), out.params.begin() + static_cast<std::ptrdiff_t>(3 * n));
  }
  return out;
}

vt::SampleRow Sampler::DeviceSampleRow(const Request& r) {
  const SamplingParams& p = r.sampling_params;
  vt::SampleRow row;
  row.temperature = p.IsGreedy() ? 0.0f : static_cast<float>(p.temperature);
  row.top_k = p.top_k > 0 ? p.top_k : 0;
  row.top_p = static_cast<float>(p.top_p);
  row.min_p = static_cast<float>(p.min_p);
  uint64_t seed;
  if (p.seed) {
    seed = *p.seed;
  } else {
    auto it = device_seeds_.find(r.req_id);
    if (it == device_seeds_.end()) it = device_seeds_.emplace(r.req_id, engine_rng_()).first;
    seed = it->second;
  }
  row.SetSeed(seed);
  row.SetOffset(r.num_output_tokens());
  return row;
}

std::vector<float> Sampler::ProcessedLogits(const float* raw_logits, int64_t vocab, const Request& r) {
  const SamplingParams& p = r.sampling_params;
  std::vector<float> logits(raw_logits, raw_logits + vocab);
  ApplyLogitsProcessors(logits, r);
  MaskStopTokensBeforeMinTokens(logits, r);
  if (*std::max_element(logits.begin(), logits.end()) == kNegInf) {
    // The masks left nothing (a bad word or min_tokens covering every allowed token).
    logits.assign(raw_logits, raw_logits + vocab);
    MaskDisallowed(logits, p.allowed_token_ids);
  }
  ApplyPenalties(logits, r);
  return logits;
}

int32_t Sampler::Draw(SampleCandidates& cand, std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (size_t i = 0; i < cand.size(); ++i) {
    const auto& [token, prob] = cand[i];
    if (u < prob) return token;
    u -= prob;
  }
  return cand[cand.size() - 1].first;
}

void Sampler::AddLogprobs(const float* raw_logits, int64_t vocab, const Request& r, SampleResult& result) {
  const SamplingParams& p = r.sampling_params;
  if (!p.logprobs) return;
  std::vector<float> lp = LogSoftmax(raw_logits, vocab);
  result.logprobs = TopLogprobs(lp, *p.logprobs);
  bool has_sampled = std::any_of(result.logprobs.begin(), result.logprobs.end(),
                                 [&](const auto& e) { return e.first == result.token_id; });
  if (!has_sampled) result.logprobs.emplace_back(result.token_id, lp[result.token_id]);
}

SampleResult Sampler::Sample(const float* raw_logits, int64_t vocab, const Request& r) {
  const SamplingParams& p = r.sampling_params;
  SampleResult result;
  const std::vector<float> logits = ProcessedLogits(raw_logits, vocab, r);
  if (p.IsGreedy()) {
    result.token_id = Argmax(logits);
  } else {
    SampleCandidates cand = Candidates(logits, p);
    result.token_id = Draw(cand, RngFor(r));
  }
  AddLogprobs(raw_logits, vocab, r, result);
  return result;
}

SampleResult Sampler::VerifyDraft(const float* raw_logits, int64_t vocab, const Request& r, int32_t draft,
                                  bool& accepted) {
  const SamplingParams& p = r.sampling_params;
  SampleResult result;
  const std::vector<float> logits = ProcessedLogits(raw_logits, vocab, r);
  if (p.IsGreedy()) {
    result.token_id = Argmax(logits);
    accepted = result.token_id == draft;
  } else {
    // The draft is a point proposal q = 1 at `draft`: accept with probability
    // min(1, p(draft) / q) = p(draft); otherwise draw from the residual max(p - q, 0),
    // which is p without the draft, renormalised. The result is distributed as p.
    SampleCandidates cand = Candidates(logits, p);
    const auto& items = cand.items();
    const auto at = std::find_if(items.begin(), items.end(), [&](const auto& c) { return c.first == draft; });
    const double p_draft = at == items.end() ? 0.0 : at->second;
    std::mt19937_64& rng = RngFor(r);
    accepted = std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p_draft;
    if (accepted) {
      result.token_id = draft;
    } else {
      if (at != items.end()) cand.Erase(static_cast<size_t>(at - items.begin()));
      cand.DivideBy(1.0 - p_draft);
      result.token_id = Draw(cand, rng);
    }
  }
  AddLogprobs(raw_logits, vocab, r, result);
  return result;
}

}  // namespace vllm
