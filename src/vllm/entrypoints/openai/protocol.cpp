#include "vllm/entrypoints/openai/protocol.h"

#include <cctype>
#include <chrono>
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

void RefuseUnsupported(const json& body) {
  if (const std::optional<int64_t> n = OptionalInt(body, "n"); n && *n != 1) {
    BadRequest("n must be 1: vllm-cpp returns one choice per prompt, got n=" + std::to_string(*n) +
                   "; send the request several times (with different seeds) for more",
               "n");
  }
  if (const std::optional<int64_t> best_of = OptionalInt(body, "best_of"); best_of && *best_of != 1) {
    BadRequest("best_of must be 1, got " + std::to_string(*best_of), "best_of");
  }
  if (JsonFieldPresent(body, "logit_bias") && !body.at("logit_bias").empty()) {
    BadRequest("logit_bias is not supported by vllm-cpp", "logit_bias");
  }
  if (JsonFieldPresent(body, "response_format")) {
    const json& format = body.at("response_format");
    if (!format.is_object() || format.value("type", "") != "text") {
      BadRequest("response_format other than {\"type\": \"text\"} (structured outputs) is not supported by vllm-cpp",
                 "response_format");
    }
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
  options.include_usage = OptionalBool(stream_options, "include_usage").value_or(false);
  return options;
}

RequestSampling ReadSampling(const json& body, const SamplingDefaults& defaults) {
  RefuseUnsupported(body);
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

int64_t UnixTimeSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace vllm::openai
