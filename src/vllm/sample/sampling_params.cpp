#include "vllm/sample/sampling_params.h"

#include <stdexcept>
#include <string>

namespace vllm {
namespace {

[[noreturn]] void Bad(const std::string& field, const std::string& value, const std::string& rule) {
  throw std::invalid_argument(field + " must be " + rule + ", got " + value);
}

}  // namespace

void SamplingParams::Validate(int64_t vocab_size) const {
  if (!(temperature >= 0)) Bad("temperature", std::to_string(temperature), ">= 0");
  if (!(top_p > 0 && top_p <= 1)) Bad("top_p", std::to_string(top_p), "in (0, 1]");
  if (top_k < -1) Bad("top_k", std::to_string(top_k), "-1, 0 (disabled) or a positive count");
  if (!(min_p >= 0 && min_p <= 1)) Bad("min_p", std::to_string(min_p), "in [0, 1]");
  if (!(repetition_penalty > 0)) Bad("repetition_penalty", std::to_string(repetition_penalty), "> 0");
  if (!(presence_penalty >= -2 && presence_penalty <= 2)) {
    Bad("presence_penalty", std::to_string(presence_penalty), "in [-2, 2]");
  }
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) {
    Bad("frequency_penalty", std::to_string(frequency_penalty), "in [-2, 2]");
  }
  if (max_tokens < 1) Bad("max_tokens", std::to_string(max_tokens), ">= 1");
  if (min_tokens < 0 || min_tokens > max_tokens) {
    Bad("min_tokens", std::to_string(min_tokens), "in [0, max_tokens=" + std::to_string(max_tokens) + "]");
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      Bad("stop_token_ids", std::to_string(id), "token ids below the vocabulary size " + std::to_string(vocab_size));
    }
  }
  const auto check_id = [&](const char* field, int32_t id) {
    if (id < 0 || id >= vocab_size) {
      Bad(field, std::to_string(id), "token ids below the vocabulary size " + std::to_string(vocab_size));
    }
  };
  for (const auto& [id, bias] : logit_bias) {
    check_id("logit_bias", id);
    if (!(bias >= -100 && bias <= 100)) Bad("logit_bias", std::to_string(bias), "biases in [-100, 100]");
  }
  for (int32_t id : allowed_token_ids) check_id("allowed_token_ids", id);
  for (const std::vector<int32_t>& word : bad_words_token_ids) {
    if (word.empty()) Bad("bad_words", "a word of no tokens", "words of at least one token");
    for (int32_t id : word) check_id("bad_words", id);
  }
  for (const std::string& s : stop) {
    if (s.empty()) Bad("stop", "an empty string", "non-empty strings");
  }
  auto check_k = [&](const char* field, const std::optional<int>& k) {
    if (k && (*k < -1 || *k > vocab_size)) {
      Bad(field, std::to_string(*k), "-1 (whole vocabulary) or in [0, " + std::to_string(vocab_size) + "]");
    }
  };
  check_k("logprobs", logprobs);
  check_k("prompt_logprobs", prompt_logprobs);
  if (structured_outputs && structured_outputs->NumConstraints() != 1) {
    Bad("structured_outputs", std::to_string(structured_outputs->NumConstraints()) + " constraints",
        "exactly one of json, regex, choice, grammar, json_object");
  }
  if (structured_outputs && structured_outputs->choice && structured_outputs->choice->empty()) {
    Bad("structured_outputs", "an empty choice list", "a choice list of at least one string");
  }
}

}  // namespace vllm
