#include "serving_tokenization.h"

#include "request_fields.h"

namespace vllm::openai {

using nlohmann::json;

ApiResponse ServingTokenization::Tokenize(const std::string& text) const {
  const json body = ParseBody(text);
  CheckTokenizationFields(body, body.contains("messages") ? TokenizationForm::kTokenizeChat
                                                          : TokenizationForm::kTokenizePrompt);
  context_.CheckModel(body);
  const Tokenizer& tokenizer = context_.RequireTokenizer("/tokenize");
  std::string prompt;
  bool add_special_tokens = true;
  if (body.contains("messages")) {
    prompt = context_.RenderChat(ParseOrderedBody(text));
    add_special_tokens = false;  // the template writes the special tokens itself
  } else if (const std::optional<std::string> given = OptionalString(body, "prompt")) {
    prompt = *given;
  } else {
    BadRequest("send 'prompt' (a string) or 'messages' (a chat conversation)", "prompt");
  }
  add_special_tokens = OptionalBool(body, "add_special_tokens").value_or(add_special_tokens);
  const std::vector<int32_t> ids =
      context_.Encode(prompt, add_special_tokens, body.contains("messages") ? "messages" : "prompt");
  json token_strs = nullptr;
  if (OptionalBool(body, "return_token_strs").value_or(false)) {
    token_strs = json::array();
    for (int32_t id : ids) token_strs.push_back(std::string(tokenizer.IdToToken(id)));
  }
  return {200,
          {{"count", ids.size()},
           {"max_model_len", context_.engine().max_model_len()},
           {"tokens", ids},
           {"token_strs", std::move(token_strs)}},
          nullptr};
}

ApiResponse ServingTokenization::Detokenize(const std::string& text) const {
  const json body = ParseBody(text);
  CheckTokenizationFields(body, TokenizationForm::kDetokenize);
  context_.CheckModel(body);
  const Tokenizer& tokenizer = context_.RequireTokenizer("/detokenize");
  if (!body.contains("tokens") || !body["tokens"].is_array())
    BadRequest("'tokens' must be a list of token ids", "tokens");
  const int64_t vocab = context_.engine().vocab_size();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < body["tokens"].size(); ++i) {
    const json& id = body["tokens"][i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
      BadRequest("tokens[" + std::to_string(i) + "] is " + DumpJson(id) + ", not a token id in [0, " +
                     std::to_string(vocab) + ")",
                 "tokens");
    }
    // Ids past the tokenizer's vocabulary (embedding padding rows) add no text, as in generation.
    if (tokenizer.HasToken(id.get<int32_t>())) ids.push_back(id.get<int32_t>());
  }
  return {200, {{"prompt", tokenizer.Decode(ids)}}, nullptr};
}

}  // namespace vllm::openai
