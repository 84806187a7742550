#include "request_fields.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

#include "vllm/entrypoints/openai/protocol.h"

namespace vllm::openai {
namespace {

using nlohmann::json;

// Which endpoints declare a field.
enum Endpoints : uint8_t { kCompletionOnly = 1, kChatOnly = 2, kBoth = 3 };

// Whether a value of a field vllm-cpp does not implement still means "off".
using Accepts = bool (*)(const json& value);

bool Never(const json&) { return false; }
bool IsOne(const json& v) { return v.is_number() && v == 1; }
bool IsZero(const json& v) { return v.is_number() && v == 0; }
bool IsFalse(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool IsTrue(const json& v) { return v.is_boolean() && v.get<bool>(); }
bool IsEmptyString(const json& v) { return v.is_string() && v.get<std::string>().empty(); }
bool IsTextOnly(const json& v) { return v == json::array({"text"}); }

struct Field {
  const char* name;
  uint8_t endpoints;
  // nullptr: honoured (read by the endpoint); otherwise the values let through.
  Accepts accepts;
  // Why other values are refused (how to do without them).
  const char* refusal;
};

constexpr char kGuidedOther[] =
    "only json, regex, choice, grammar and json_object constrain the output here (structured_outputs, "
    "response_format or the guided_* fields); there is one grammar engine";

// In the order of vLLM's classes: OpenAI's fields, then vLLM's sampling and extra fields.
constexpr Field kFields[] = {
    {"messages", kChatOnly, nullptr, ""},
    {"prompt", kCompletionOnly, nullptr, ""},
    {"model", kBoth, nullptr, ""},
    {"prompt_embeds", kCompletionOnly, Never, "prompts are token ids or text; embeddings are not taken"},
    {"audio", kChatOnly, Never, "the served models produce text only"},
    {"modalities", kChatOnly, IsTextOnly, "the served models produce text only: send [\"text\"] or nothing"},
    {"best_of", kBoth, nullptr, ""},
    {"echo", kBoth, nullptr, ""},
    {"frequency_penalty", kBoth, nullptr, ""},
    {"logit_bias", kBoth, nullptr, ""},
    {"logprobs", kBoth, nullptr, ""},
    {"top_logprobs", kChatOnly, nullptr, ""},
    {"max_tokens", kBoth, nullptr, ""},
    {"max_completion_tokens", kChatOnly, nullptr, ""},
    {"n", kBoth, nullptr, ""},
    {"presence_penalty", kBoth, nullptr, ""},
    {"response_format", kBoth, nullptr, ""},
    {"seed", kBoth, nullptr, ""},
    {"stop", kBoth, nullptr, ""},
    {"stream", kBoth, nullptr, ""},
    {"stream_options", kBoth, nullptr, ""},
    {"suffix", kCompletionOnly, IsEmptyString, "fill-in-the-middle is not supported"},
    {"temperature", kBoth, nullptr, ""},
    {"top_p", kBoth, nullptr, ""},
    {"tools", kChatOnly, nullptr, ""},
    {"tool_choice", kChatOnly, nullptr, ""},
    {"reasoning_effort", kChatOnly, nullptr, ""},
    {"thinking_token_budget", kChatOnly, Never, "reasoning is not bounded separately; use max_tokens"},
    {"include_reasoning", kChatOnly, nullptr, ""},
    {"parallel_tool_calls", kChatOnly, IsTrue,
     "several tool calls may always come in one turn (tool_choice \"required\" constrains to one or more; a named "
     "function to exactly one)"},
    {"user", kBoth, nullptr, ""},
    {"use_beam_search", kBoth, IsFalse, "beam search is not implemented"},
    {"top_k", kBoth, nullptr, ""},
    {"min_p", kBoth, nullptr, ""},
    {"repetition_penalty", kBoth, nullptr, ""},
    {"length_penalty", kBoth, IsOne, "it applies to beam search, which is not implemented"},
    {"stop_token_ids", kBoth, nullptr, ""},
    {"include_stop_str_in_output", kBoth, nullptr, ""},
    {"ignore_eos", kBoth, nullptr, ""},
    {"min_tokens", kBoth, nullptr, ""},
    {"skip_special_tokens", kBoth, nullptr, ""},
    {"spaces_between_special_tokens", kBoth, nullptr, ""},
    {"truncate_prompt_tokens", kBoth, nullptr, ""},
    {"prompt_logprobs", kBoth, nullptr, ""},
    {"allowed_token_ids", kBoth, nullptr, ""},
    {"bad_words", kBoth, nullptr, ""},
    {"add_generation_prompt", kChatOnly, nullptr, ""},
    {"continue_final_message", kChatOnly, IsFalse, "the template cannot leave the last message open"},
    {"add_special_tokens", kBoth, nullptr, ""},
    {"documents", kChatOnly, nullptr, ""},
    {"chat_template", kChatOnly, nullptr, ""},
    {"chat_template_kwargs", kChatOnly, nullptr, ""},
    {"mm_processor_kwargs", kChatOnly, Never, "the served models take text only"},
    {"structured_outputs", kBoth, nullptr, ""},
    {"guided_json", kBoth, nullptr, ""},
    {"guided_regex", kBoth, nullptr, ""},
    {"guided_choice", kBoth, nullptr, ""},
    {"guided_grammar", kBoth, nullptr, ""},
    {"structural_tag", kBoth, Never, kGuidedOther},
    {"guided_decoding_backend", kBoth, Never, kGuidedOther},
    {"guided_whitespace_pattern", kBoth, Never, kGuidedOther},
    {"priority", kBoth, IsZero, "requests are scheduled first come, first served (no priority scheduling)"},
    {"request_id", kBoth, nullptr, ""},
    {"logits_processors", kBoth, Never, "custom logits processors cannot be loaded"},
    {"return_tokens_as_token_ids", kBoth, nullptr, ""},
    {"return_token_ids", kBoth, nullptr, ""},
    {"cache_salt", kBoth, Never, "the prefix cache is not salted per request"},
    {"kv_transfer_params", kBoth, Never, "disaggregated serving (KV transfer) is not implemented"},
    {"vllm_xargs", kBoth, Never, "there are no custom extensions to pass them to"},
};

uint8_t Bit(Endpoint endpoint) { return endpoint == Endpoint::kCompletion ? kCompletionOnly : kChatOnly; }

const char* PathOf(Endpoint endpoint) {
  return endpoint == Endpoint::kCompletion ? "/v1/completions" : "/v1/chat/completions";
}

// The fields of each tokenization form (the endpoints bits are not read there). The
// chat form reads what the chat endpoint's rendering reads (ServingContext::RenderChat),
// documents and reasoning_effort included, so that /tokenize counts exactly the
// prompt a chat request would send.
constexpr Field kTokenizePromptFields[] = {{"model", kBoth, nullptr, ""},
                                           {"prompt", kBoth, nullptr, ""},
                                           {"add_special_tokens", kBoth, nullptr, ""},
                                           {"return_token_strs", kBoth, nullptr, ""}};
constexpr Field kTokenizeChatFields[] = {
    {"model", kBoth, nullptr, ""},
    {"messages", kBoth, nullptr, ""},
    {"add_generation_prompt", kBoth, nullptr, ""},
    {"add_special_tokens", kBoth, nullptr, ""},
    {"return_token_strs", kBoth, nullptr, ""},
    {"chat_template", kBoth, nullptr, ""},
    {"chat_template_kwargs", kBoth, nullptr, ""},
    {"tools", kBoth, nullptr, ""},
    {"documents", kBoth, nullptr, ""},
    {"reasoning_effort", kBoth, nullptr, ""},
    {"continue_final_message", kBoth, IsFalse, "the template cannot leave the last message open"},
    {"mm_processor_kwargs", kBoth, Never, "the served models take text only"},
};
constexpr Field kDetokenizeFields[] = {{"model", kBoth, nullptr, ""}, {"tokens", kBoth, nullptr, ""}};

struct TokenizationFields {
  std::span<const Field> fields;
  const char* path;
  const char* vllm_class;
};

TokenizationFields FieldsOf(TokenizationForm form) {
  switch (form) {
    case TokenizationForm::kTokenizePrompt:
      return {kTokenizePromptFields, "/tokenize with a prompt", "TokenizeCompletionRequest"};
    case TokenizationForm::kTokenizeChat: return {kTokenizeChatFields, "/tokenize with messages", "TokenizeChatRequest"};
    case TokenizationForm::kDetokenize: break;
  }
  return {kDetokenizeFields, "/detokenize", "DetokenizeRequest"};
}

const Field* FindIn(std::span<const Field> fields, std::string_view name) {
  const auto found = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.name == name; });
  return found == fields.end() ? nullptr : &*found;
}

[[noreturn]] void RefuseUnknown(const std::string& name, const std::string& path, const std::string& vllm_class) {
  BadRequest("unknown field '" + name + "': " + path + " takes the fields of vLLM's " + vllm_class +
                 ", and vllm-cpp refuses a field rather than ignore it",
             name);
}

// A 400 when `field` is one vllm-cpp does not implement and `value` is not its "off".
void CheckValue(const Field& field, const std::string& name, const json& value) {
  if (field.accepts == nullptr || value.is_null() || field.accepts(value)) return;
  BadRequest("'" + name + "' is not supported by vllm-cpp: " + field.refusal, name);
}

}  // namespace

void CheckTokenizationFields(const json& body, TokenizationForm form) {
  if (form != TokenizationForm::kDetokenize && body.contains("prompt") && body.contains("messages")) {
    BadRequest("send 'prompt' or 'messages' to /tokenize, not both", "prompt");
  }
  const TokenizationFields of = FieldsOf(form);
  for (const auto& [name, value] : body.items()) {
    const Field* field = FindIn(of.fields, name);
    if (field == nullptr) RefuseUnknown(name, of.path, of.vllm_class);
    CheckValue(*field, name, value);
  }
}

std::vector<std::string> TokenizationFieldNames(TokenizationForm form) {
  std::vector<std::string> names;
  for (const Field& f : FieldsOf(form).fields) names.emplace_back(f.name);
  return names;
}

void CheckRequestFields(const json& body, Endpoint endpoint) {
  for (const auto& [name, value] : body.items()) {
    const Field* field = FindIn(kFields, name);
    if (field == nullptr) {
      RefuseUnknown(name, PathOf(endpoint),
                    endpoint == Endpoint::kCompletion ? "CompletionRequest" : "ChatCompletionRequest");
    }
    if ((field->endpoints & Bit(endpoint)) == 0) {
      BadRequest("'" + name + "' is not a field of " + PathOf(endpoint) + " (it belongs to " +
                     PathOf(endpoint == Endpoint::kCompletion ? Endpoint::kChat : Endpoint::kCompletion) + ")",
                 name);
    }
    CheckValue(*field, name, value);
  }
}

std::vector<std::string> RequestFieldNames(Endpoint endpoint) {
  std::vector<std::string> names;
  for (const Field& field : kFields) {
    if (field.endpoints & Bit(endpoint)) names.emplace_back(field.name);
  }
  return names;
}

}  // namespace vllm::openai
