// The sampler: one token per request from its row of logits, on the host.
//
// Order of operations (vLLM v1's):
//   1. logprobs / prompt logprobs are log_softmax of the RAW logits (before
//      penalties and temperature), top-K plus the sampled token;
//   2. the logits processors: logit_bias, allowed_token_ids, bad words; then
//      min_tokens masks EOS and stop tokens (when these leave no token at all,
//      the raw logits of the allowed tokens are used);
//   3. repetition (prompt + output), frequency and presence (output) penalties;
//   4. temperature 0 -> argmax (first index on ties); otherwise logits / T,
//      min_p, top-k, top-p, renormalise, draw from the request's generator.
// A request with a seed has its own generator (same seed, same tokens); others
// draw from the sampler's generator, itself seeded explicitly by the engine.
// On a GPU most requests are not sampled here but by vt::Sample on the device
// (SamplesOnDevice): the same filters, counter-based random numbers, so a seed gives
// other tokens there than here.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vllm/core/request.h"
#include "vt/op_args.h"

namespace vllm {

// token id -> log-probability; the K most likely first, then the sampled token if
// it was not among them (vLLM's convention).
using TokenLogprobs = std::vector<std::pair<int32_t, float>>;

struct SampleResult {
  int32_t token_id = -1;
  TokenLogprobs logprobs;  // empty unless the request asked for logprobs
};

// Sampling candidates (token, probability) walked in descending probability (ties:
// the lower id first), the order of a full sort, sorted a chunk at a time only as far
// as a walk goes (a draw from a peaked distribution stops within the first few).
class SampleCandidates {
 public:
  explicit SampleCandidates(std::vector<std::pair<int32_t, double>> items) : items_(std::move(items)) {}
  size_t size() const { return items_.size(); }
  // The i-th in descending order (sorts up to it when needed).
  const std::pair<int32_t, double>& operator[](size_t i);
  // The candidates in storage order: the sorted ones first, then the rest in any order.
  const std::vector<std::pair<int32_t, double>>& items() const { return items_; }
  // Keeps the first n in descending order.
  void KeepFirst(size_t n);
  // Removes storage position i (an index into items()).
  void Erase(size_t i);
  void DivideBy(double divisor) {
    for (auto& item : items_) item.second /= divisor;
  }

 private:
  static bool ByProbability(const std::pair<int32_t, double>& a, const std::pair<int32_t, double>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  }
  std::vector<std::pair<int32_t, double>> items_;
  size_t sorted_ = 0;  // items_[0, sorted_) are the first in descending order, sorted
};

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : engine_rng_(seed) {}

  // logits: [vocab] f32 for `request`, whose token history so far is
  // request.all_token_ids(). Creates the request's generator on first use.
  SampleResult Sample(const float* logits, int64_t vocab, const Request& request);
  // Speculative decoding: verifies `draft` (a point proposal, as the MTP head's greedy
  // drafts are) at this row, vLLM's rejection sampler. Greedy: accepted when it is
  // the argmax. Otherwise accepted with probability p(draft) under the request's
  // distribution (after every processor and penalty, as Sample), else the result is
  // drawn from p without the draft; either way the token is distributed exactly as
  // Sample's. result.token_id is the draft when accepted; logprobs as Sample's.
  SampleResult VerifyDraft(const float* logits, int64_t vocab, const Request& request, int32_t draft, bool& accepted);
  // Whether Sample would return the argmax of the raw logits (first on ties) and
  // nothing else: greedy, no logprobs, no penalties, no logits processors, min_tokens
  // reached, no grammar (IsGreedyUnderGrammarOnly: the runner's masked device argmax).
  static bool IsPlainGreedy(const Request& request);
  // Repetition, frequency or presence penalty set.
  static bool HasPenalties(const Request& request);
  // Plain greedy but for a grammar (structured outputs): its token is the argmax over
  // the tokens the grammar's bitmask allows, which vt::Argmax takes on the device.
  static bool IsGreedyUnderGrammarOnly(const Request& request);
  // Whether vt::Sample draws this request's token the way Sample would (the same
  // filters, other random numbers): logprobs of at most vt::kMaxTopLogprobs entries
  // (vt::TopLogprobs), no logit_bias together with a mask this step; a grammar's
  // bitmask goes with it, allowed_token_ids, bad words and the min_tokens mask as
  // cleared bits of the same row (ApplyDeviceMask), logit_bias as a row added to the
  // logits first (DeviceBiasRow), and penalties are vt::Penalties after it
  // (DevicePenalties). The runner samples such requests on a GPU
  // (ModelRunner::ExecuteWithDeviceSampler, ExecuteGraph).
  static bool SamplesOnDevice(const Request& request);
  // logit_bias set.
  static bool HasDeviceBias(const Request& request);
  // The request's logit_bias as a dense row of the [V] logits (0 elsewhere).
  static void DeviceBiasRow(const Request& request, std::span<float> row);
  // Whether allowed_token_ids, a bad word or the min_tokens mask (EOS and stop tokens
  // before min_tokens outputs) takes tokens away this step.
  static bool HasDeviceMask(const Request& request);
  // Clears in `words` (the request's bitmask row of a [V]-wide logits row: its
  // grammar's, or all ones) the tokens Sample's processors set to -inf this step:
  // those outside allowed_token_ids, the last tokens of bad words whose prefix ends
  // the output, and EOS and stop tokens before min_tokens; bits past `vocab` too. When
  // that leaves no token, only allowed_token_ids' mask is applied (as Sample does).
  static void ApplyDeviceMask(const Request& request, std::span<uint32_t> words, int64_t vocab);
  // The request's k of vt::TopLogprobs (its logprobs), -1 when it asks for none.
  static int DeviceLogprobs(const Request& request);
  // A row of vt::TopLogprobs' output (column 0 the sampled token, then the row's top
  // entries) as Sample gives logprobs: the top k, then the token when not among them.
  static TokenLogprobs LogprobsFromDeviceRow(const int64_t* ids, const float* values, int k);
  // The request's row of vt::Penalties' params: repetition, frequency, presence; its
  // token_ids row is request.all_token_ids(), outputs from num_prompt_tokens().
  static std::array<float, 3> DevicePenalties(const Request& request);
  // vt::Penalties' inputs for N logits rows, row n penalized by `penalized[n]` (null:
  // not at all): `ids` holds token_ids [N, length] (-1 padding) then output_begin [N],
  // `params` [N, 3]; length 0 when no row is penalized (nothing to run).
  struct PenaltyRows {
    int64_t rows = 0, length = 0;
    std::vector<int32_t> ids;
    std::vector<float> params;
  };
  static PenaltyRows DevicePenaltyRows(const std::vector<const Request*>& penalized);
  // The request's row of vt::Sample's params: temperature 0 when greedy, its filters,
  // its seed (or one drawn once from the sampler's generator, kept per request) and
  // its position (the output tokens so far), so that its tokens depend on nothing
  // else in the batch.
  vt::SampleRow DeviceSampleRow(const Request& request);
  // Forgets a finished request's generator.
  void Release(const std::string& req_id) {
    request_rngs_.erase(req_id);
    device_seeds_.erase(req_id);
  }

 private:
  static bool IsBareGreedy(const Request& request);
  std::mt19937_64& RngFor(const Request& request);
  // The raw logits after the logits processors, the min_tokens mask and penalties.
  static std::vector<float> ProcessedLogits(const float* raw_logits, int64_t vocab, const Request& request);
  static int32_t Draw(SampleCandidates& candidates, std::mt19937_64& rng);
  static void AddLogprobs(const float* raw_logits, int64_t vocab, const Request& request, SampleResult& result);

  std::mt19937_64 engine_rng_;
  std::unordered_map<std::string, std::mt19937_64> request_rngs_;
  std::unordered_map<std::string, uint64_t> device_seeds_;  // unseeded requests' seeds for vt::Sample
};

// log_softmax of logits [vocab] in double precision, returned as f32.
std::vector<float> LogSoftmax(const float* logits, int64_t vocab);
// The k (all when k < 0 or k >= vocab) largest entries, descending (ties: lower id first).
TokenLogprobs TopLogprobs(const std::vector<float>& logprobs, int k);

}  // namespace vllm
