#include "vllm/entrypoints/openai/protocol.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <limits>
#include <random>

#include "vllm/entrypoints/sampling_params_json.h"

namespace vllm::openai {
namespace {

using nlohmann::json;

// The field an invalid_argument message from SamplingParamsFromJson ("'top_k' must
// be ...") or SamplingParams::Validate ("top_p must be ...") is about.
std::optional<std::string> FieldOfMessage(const std::string& message) {
  const bool quoted = !message.empty() && message[0] == '\'';
  const size_t begin = quoted ? 1 : 0;
  size_t end = begin;
  while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) || message[end] == '_')) ++end;
  if (end == begin) return std::nullopt;
  return message.substr(begin, end - begin);
}

[[noreturn]] void WrongType(const char* field, const char* expected, const json& value) {
  BadRequest(WrongTypeMessage(field, expected, value), field);
}

// logit_bias: {"<token id>": bias, ...} (OpenAI's keys are strings).
std::vector<std::pair<int32_t, float>> ReadLogitBias(const json& body) {
  std::vector<std::pair<int32_t, float>> bias;
  if (!JsonFieldPresent(body, "logit_bias")) return bias;
  const json& map = body.at("logit_bias");
  if (!map.is_object()) WrongType("logit_bias", "an object of token id -> bias", map);
  for (const auto& [key, value] : map.items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id > INT32_MAX) {
      BadRequest("logit_bias key '" + key + "' is not a token id", "logit_bias");
    }
    if (!value.is_number()) WrongType("logit_bias", "an object of token id -> number", map);
    bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return bias;
}

std::vector<int32_t> ReadTokenIds(const json& body, const char* field) {
  std::vector<int32_t> ids;
  if (!JsonFieldPresent(body, field)) return ids;
  const json& list = body.at(field);
  if (!list.is_array()) WrongType(field, "a list of token ids", list);
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      WrongType(field, "a list of token ids", list);
    }
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

std::vector<std::string> ReadStrings(const json& body, const char* field) {
  std::vector<std::string> strings;
  if (!JsonFieldPresent(body, field)) return strings;
  const json& list = body.at(field);
  if (!list.is_array()) WrongType(field, "a list of strings", list);
  for (const json& s : list) {
    if (!s.is_string()) WrongType(field, "a list of strings", list);
    strings.push_back(s.get<std::string>());
  }
  return strings;
}

// Special tokens in the output are joined without spaces, which is vLLM's
// spaces_between_special_tokens false; true only matters when they are kept.
void CheckSpacesBetweenSpecialTokens(const json& body, const SamplingParams& params) {
  const std::optional<bool> spaces = OptionalBool(body, "spaces_between_special_tokens");
  if (spaces.value_or(false) && !params.skip_special_tokens) {
    BadRequest("spaces_between_special_tokens true is not supported by vllm-cpp with skip_special_tokens false: "
               "special tokens are joined without spaces (send spaces_between_special_tokens false)",
               "spaces_between_special_tokens");
  }
}

}  // namespace

OpenAIError::OpenAIError(int status, std::string message, std::optional<std::string> param)
    : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)) {}

std::string OpenAIError::type() const {
  switch (status_) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowedError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return status_ >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

json OpenAIError::ToJson() const {
  return {
      {"error",
       {{"message", what()}, {"type", type()}, {"param", param_ ? json(*param_) : json(nullptr)}, {"code", status_}}}};
}

void BadRequest(const std::string& message, const std::string& param) { throw OpenAIError(400, message, param); }

json ParseBody(const std::string& body) {
  json parsed;
  try {
    parsed = ParseJsonWithDepthLimit(body, kMaxJsonDepth);
  } catch (const JsonNumberOutOfRange& e) {
    throw OpenAIError(400, e.what(), e.field().empty() ? std::nullopt : std::optional<std::string>(e.field()));
  } catch (const std::invalid_argument& e) {
    throw OpenAIError(400, std::string("the request body is ") + e.what());
  }
  if (!parsed.is_object())
    throw OpenAIError(400, "the request body must be a JSON object, got " + std::string(parsed.type_name()));
  return parsed;
}

nlohmann::ordered_json ParseOrderedBody(const std::string& body) { return nlohmann::ordered_json::parse(body); }

std::optional<bool> OptionalBool(const json& body, const char* field) {
  if (!JsonFieldPresent(body, field)) return std::nullopt;
  if (!body.at(field).is_boolean()) WrongType(field, "true or false", body.at(field));
  return body.at(field).get<bool>();
}

std::optional<int64_t> OptionalInt(const json& body, const char* field) {
  if (!JsonFieldPresent(body, field)) return std::nullopt;
  if (!body.at(field).is_number_integer()) WrongType(field, "an integer", body.at(field));
  return body.at(field).get<int64_t>();
}

std::optional<std::string> OptionalString(const json& body, const char* field) {
  if (!JsonFieldPresent(body, field)) return std::nullopt;
  if (!body.at(field).is_string()) WrongType(field, "a string", body.at(field));
  return body.at(field).get<std::string>();
}

StreamOptions ReadStreamOptions(const json& body) {
  StreamOptions options;
  options.stream = OptionalBool(body, "stream").value_or(false);
  if (!JsonFieldPresent(body, "stream_options")) return options;
  const json& stream_options = body.at("stream_options");
  if (!stream_options.is_object()) WrongType("stream_options", "an object", stream_options);
  if (!options.stream) BadRequest("stream_options can only be set when stream is true", "stream_options");
  for (const auto& [key, value] : stream_options.items()) {
    if (key != "include_usage" && key != "continuous_usage_stats") {
      BadRequest("unknown field '" + key + "' of stream_options (vLLM's are include_usage and continuous_usage_stats)",
                 "stream_options");
    }
  }
  // vLLM's StreamOptions default include_usage to true once stream_options is given.
  options.include_usage = OptionalBool(stream_options, "include_usage").value_or(true);
  options.continuous_usage_stats = OptionalBool(stream_options, "continuous_usage_stats").value_or(false);
  return options;
}

int64_t ReadChoiceCount(const json& body) {
  const int64_t n = OptionalInt(body, "n").value_or(1);
  if (n < 1 || n > kMaxChoices) {
    BadRequest("'n' must be between 1 and " + std::to_string(kMaxChoices) + ", got " + std::to_string(n), "n");
  }
  return n;
}

SamplingParams ChoiceParams(const SamplingParams& params, int64_t j) {
  SamplingParams choice = params;
  if (choice.seed) *choice.seed += static_cast<uint64_t>(j);
  return choice;
}

int64_t ReadBestOf(const json& body, int64_t n, bool stream) {
  const int64_t best_of = OptionalInt(body, "best_of").value_or(n);
  if (best_of < n || best_of > kMaxChoices) {
    BadRequest("'best_of' must be between n (" + std::to_string(n) + ") and " + std::to_string(kMaxChoices) +
                   ", got " + std::to_string(best_of),
               "best_of");
  }
  if (stream && best_of > n) {
    BadRequest("'best_of' greater than n cannot be streamed: the best choices are known only when every candidate "
               "has finished; send stream false, or best_of equal to n",
               "best_of");
  }
  return best_of;
}

SamplingParams CandidateParams(const SamplingParams& params, int64_t j, int64_t n, int64_t best_of) {
  SamplingParams candidate = ChoiceParams(params, j);
  if (best_of > n && !candidate.logprobs) candidate.logprobs = 0;
  return candidate;
}

double CumulativeLogprob(const RequestOutput& output) {
  double sum = 0.0;
  for (size_t t = 0; t < output.token_ids.size(); ++t) {
    if (t >= output.logprobs.size()) return -std::numeric_limits<double>::infinity();
    double logprob = -std::numeric_limits<double>::infinity();
    for (const auto& [id, value] : output.logprobs[t]) {
      if (id == output.token_ids[t]) logprob = value;
    }
    sum += logprob;
  }
  return sum;
}

std::vector<size_t> BestCandidates(const std::vector<RequestOutput>& candidates, size_t first, int64_t best_of,
                                   int64_t n) {
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t i = first; i < first + static_cast<size_t>(best_of); ++i) {
    ranked.emplace_back(CumulativeLogprob(candidates.at(i)), i);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> best;
  for (int64_t i = 0; i < n; ++i) best.push_back(ranked[static_cast<size_t>(i)].second);
  return best;
}

RequestSampling ReadSampling(const json& body, const SamplingDefaults& defaults) {
  RequestSampling sampling;
  try {
    // logprobs is an int for completions, a bool for chat: the endpoints read it.
    sampling.params = SamplingParamsFromJson(body, defaults.ApplyTo(SamplingParams{}), {"logprobs", "max_tokens"});
  } catch (const std::invalid_argument& e) {
    throw OpenAIError(400, e.what(), FieldOfMessage(e.what()));
  }
  sampling.max_tokens = OptionalInt(body, "max_completion_tokens");
  if (!sampling.max_tokens) sampling.max_tokens = OptionalInt(body, "max_tokens");
  sampling.default_max_tokens = defaults.max_tokens;
  if (sampling.params.prompt_logprobs) CheckLogprobsCount(*sampling.params.prompt_logprobs, "prompt_logprobs");
  sampling.params.logit_bias = ReadLogitBias(body);
  sampling.params.allowed_token_ids = ReadTokenIds(body, "allowed_token_ids");
  if (JsonFieldPresent(body, "allowed_token_ids") && sampling.params.allowed_token_ids.empty()) {
    BadRequest("allowed_token_ids must hold at least one token id", "allowed_token_ids");
  }
  sampling.bad_words = ReadStrings(body, "bad_words");
  sampling.truncate_prompt_tokens = OptionalInt(body, "truncate_prompt_tokens");
  sampling.return_tokens_as_token_ids = OptionalBool(body, "return_tokens_as_token_ids").value_or(false);
  CheckSpacesBetweenSpecialTokens(body, sampling.params);
  return sampling;
}

void ValidateSampling(const SamplingParams& params, int64_t vocab_size) {
  try {
    params.Validate(vocab_size);
  } catch (const std::invalid_argument& e) {
    throw OpenAIError(400, e.what(), FieldOfMessage(e.what()));
  }
}

int CheckLogprobsCount(int64_t k, const char* field) {
  if (k < 0 || k > kMaxLogprobs) {
    BadRequest(std::string(field) + " must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(k),
               field);
  }
  return static_cast<int>(k);
}

std::string RandomRequestId(const std::string& prefix) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 32; ++i) id += kHex[generator() % 16];
  return id;
}

std::string RequestIdOf(const json& body, const std::string& prefix) {
  const std::optional<std::string> id = OptionalString(body, "request_id");
  if (!id) return RandomRequestId(prefix);
  if (id->empty()) BadRequest("request_id must not be empty", "request_id");
  return prefix + *id;
}

int64_t UnixTimeSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace vllm::openai
