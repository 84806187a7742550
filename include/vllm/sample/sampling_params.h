// Per-request sampling parameters, with vLLM's names and meanings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vllm {

namespace structured_output {
struct Grammar;
}

// vLLM's StructuredOutputsParams: the output is constrained to a language
// (docs/structured_output.md). Exactly one of the constraints is set.
struct StructuredOutputsParams {
  std::optional<std::string> json;                  // a JSON schema, as JSON text
  std::optional<std::string> regex;                 // the whole output matches it
  std::optional<std::vector<std::string>> choice;   // the output is one of these strings
  std::optional<std::string> grammar;               // llama.cpp's GBNF
  bool json_object = false;                         // any JSON object
  // A grammar made by the server itself (the tool calls of tool_choice "required" or
  // a named function), cached by the engine under `prebuilt_key`. Not a request field.
  std::shared_ptr<const structured_output::Grammar> prebuilt;
  std::string prebuilt_key;
  // vLLM's disable_any_whitespace: no whitespace between JSON tokens (json, json_object).
  bool disable_any_whitespace = false;

  int NumConstraints() const {
    return json.has_value() + regex.has_value() + choice.has_value() + grammar.has_value() + json_object +
           (prebuilt != nullptr);
  }
};

// What the engine's outputs of a request hold (vLLM's RequestOutputKind):
//   kCumulative  everything so far, every step;
//   kDelta       only what is new since the previous output: token_ids, their
//                logprobs and text (equal to new_token_ids / new_text), and the
//                prompt with its logprobs in the first output (streaming responses);
//   kFinalOnly   only new_token_ids / new_text (what metrics need) until the final
//                output, which is complete (non-streaming responses).
// The last two spare a long generation a copy of its whole history every step.
enum class RequestOutputKind { kCumulative, kDelta, kFinalOnly };

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  double top_p = 1.0;        // (0, 1]
  int top_k = 0;             // 0 or -1 = all tokens
  double min_p = 0.0;        // [0, 1]
  double repetition_penalty = 1.0;  // > 0; prompt and output tokens
  double presence_penalty = 0.0;    // [-2, 2]; output tokens
  double frequency_penalty = 0.0;   // [-2, 2]; output tokens
  std::optional<uint64_t> seed;     // per-request generator; none = engine generator
  int64_t max_tokens = 16;
  int64_t min_tokens = 0;  // EOS and stop tokens are masked until this many were generated
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  std::optional<int> logprobs;         // top-K per generated token; -1 = whole vocabulary
  std::optional<int> prompt_logprobs;  // top-K per prompt position; -1 = whole vocabulary
  // Logits processors (vLLM's), applied in this order before penalties; logprobs stay
  // those of the raw logits:
  //   logit_bias           (token id, bias in [-100, 100]) added to the token's logit;
  //   allowed_token_ids    when not empty, every other token is masked;
  //   bad_words_token_ids  token sequences never generated: the last token of one is
  //                        masked whenever the output ends with the ones before it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<int32_t> allowed_token_ids;
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  RequestOutputKind output_kind = RequestOutputKind::kCumulative;
  // Constrained decoding: a token bitmask from the request's grammar is applied to its
  // logits before everything above (after the reasoning, with a reasoning parser).
  std::optional<StructuredOutputsParams> structured_outputs;

  bool IsGreedy() const { return temperature < 1e-5; }
  // Whether any of the logits processors above is set.
  bool HasLogitsProcessors() const {
    return !logit_bias.empty() || !allowed_token_ids.empty() || !bad_words_token_ids.empty();
  }
  // Throws std::invalid_argument naming the field, its value and the allowed range.
  void Validate(int64_t vocab_size) const;
};

}  // namespace vllm
