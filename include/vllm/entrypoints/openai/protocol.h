// The OpenAI-compatible server's protocol: errors in OpenAI's (vLLM's) shape and the
// request fields of /v1/completions and /v1/chat/completions read from JSON.
//
// Every problem with a request is an OpenAIError carrying the HTTP status, vLLM's
// error type, the message and the field at fault; the server turns it into
//   {"error": {"message": ..., "type": "BadRequestError", "param": "top_p", "code": 400}}
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "vllm/engine/request_output.h"
#include "vllm/entrypoints/generation_config.h"
#include "vllm/sample/sampling_params.h"

namespace vllm::openai {

// The largest top-K of logprobs, top_logprobs and prompt_logprobs (vLLM's default max_logprobs).
inline constexpr int kMaxLogprobs = 20;

class OpenAIError : public std::runtime_error {
 public:
  OpenAIError(int status, std::string message, std::optional<std::string> param = std::nullopt);

  int status() const { return status_; }
  const std::optional<std::string>& param() const { return param_; }
  // vLLM's error type for the status: BadRequestError, AuthenticationError,
  // NotFoundError, MethodNotAllowedError, ServiceUnavailableError, InternalServerError.
  std::string type() const;
  nlohmann::json ToJson() const;

 private:
  int status_;
  std::optional<std::string> param_;
};

// A 400 naming `param`.
[[noreturn]] void BadRequest(const std::string& message, const std::string& param);

// The deepest nesting a request body may have (tool schemas stay far below it).
inline constexpr int kMaxJsonDepth = 100;

// The request body as JSON (an object); a 400 saying what is wrong otherwise.
nlohmann::json ParseBody(const std::string& body);
// The same body with object keys in document order (what chat templates iterate); only
// for a body ParseBody accepted, whose checks it does not repeat.
nlohmann::ordered_json ParseOrderedBody(const std::string& body);

// Typed optional fields: absent or null gives nullopt; a wrong type is a 400 naming the field.
std::optional<bool> OptionalBool(const nlohmann::json& body, const char* field);
std::optional<int64_t> OptionalInt(const nlohmann::json& body, const char* field);
std::optional<std::string> OptionalString(const nlohmann::json& body, const char* field);

// stream and stream_options (include_usage: a last chunk with the usage;
// continuous_usage_stats: the usage so far in every chunk); stream_options without
// stream is a 400 (as in vLLM).
struct StreamOptions {
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage_stats = false;
};
StreamOptions ReadStreamOptions(const nlohmann::json& body);

// The sampling fields shared by completions and chat (temperature, top_p, top_k, min_p,
// penalties, seed, min_tokens, stop, stop_token_ids, ignore_eos,
// include_stop_str_in_output, skip_special_tokens, prompt_logprobs, logit_bias,
// allowed_token_ids). What needs the prompt or the tokenizer is returned apart for the
// endpoint: bad_words (tokenized by ServingContext::BadWordsTokenIds),
// truncate_prompt_tokens, return_tokens_as_token_ids. `logprobs` is left to the caller
// (its type differs between the endpoints); so is max_tokens, returned apart
// (max_completion_tokens first), unset when the body has none. A field the body does
// not set takes its value from `defaults` (--generation-config), else SamplingParams';
// the default max_tokens is returned apart too, for the endpoint to cap by what fits
// the context. Fields vllm-cpp does not implement were refused before
// (request_fields.h).
struct RequestSampling {
  SamplingParams params;
  std::optional<int64_t> max_tokens;
  std::optional<int64_t> default_max_tokens;
  std::vector<std::string> bad_words;
  std::optional<int64_t> truncate_prompt_tokens;
  bool return_tokens_as_token_ids = false;
};
RequestSampling ReadSampling(const nlohmann::json& body, const SamplingDefaults& defaults = {});

// `n`, the choices a prompt gets (vLLM's parallel sampling: each its own engine
// request), in [1, kMaxChoices]; a 400 naming n otherwise. vLLM caps nothing but the
// engine's sequences; the bound keeps one request from queueing thousands of them.
inline constexpr int64_t kMaxChoices = 128;
int64_t ReadChoiceCount(const nlohmann::json& body);
// Choice j's sampling parameters: `params`, with seed + j when seeded (vLLM's children).
SamplingParams ChoiceParams(const SamplingParams& params, int64_t j);

// `best_of`: how many candidates a prompt's n choices are picked from, the n of
// highest cumulative logprob of their generated tokens (vLLM's sampling with best_of);
// n by default. A 400 naming best_of when it is under n or over kMaxChoices, or over n
// on a stream (a choice is known only once every candidate has finished; OpenAI's
// best_of is not streamed either).
int64_t ReadBestOf(const nlohmann::json& body, int64_t n, bool stream);
// Candidate j of a prompt: ChoiceParams, and with best_of > n the sampled token's
// logprob at least (logprobs 0), which the ranking sums.
SamplingParams CandidateParams(const SamplingParams& params, int64_t j, int64_t n, int64_t best_of);
// The sum of the logprobs of `output`'s generated tokens (-inf without logprobs).
double CumulativeLogprob(const RequestOutput& output);
// Of candidates [first, first + best_of), the n of highest cumulative logprob, best first
// (ties: the lower index), as indices into `candidates`.
std::vector<size_t> BestCandidates(const std::vector<RequestOutput>& candidates, size_t first, int64_t best_of,
                                   int64_t n);
// SamplingParams::Validate as a 400 naming the field.
void ValidateSampling(const SamplingParams& params, int64_t vocab_size);

// A top-K count in [0, kMaxLogprobs] for `field`.
int CheckLogprobsCount(int64_t k, const char* field);

// "cmpl-" + 32 random hex digits (vLLM's ids).
std::string RandomRequestId(const std::string& prefix);
// `prefix` + the body's request_id (vLLM's extra field), else RandomRequestId(prefix).
std::string RequestIdOf(const nlohmann::json& body, const std::string& prefix);
int64_t UnixTimeSeconds();

}  // namespace vllm::openai
