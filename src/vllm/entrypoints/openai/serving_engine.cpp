#include "serving_engine.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace vllm::openai {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A message's content as the template sees it: a string (text parts joined by "\n",
// as vLLM does for string-format templates) or null.
ordered_json FlattenContent(const ordered_json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array()) BadRequest(where + " must be a string, a list of content parts or null", "messages");
  std::string text;
  for (size_t p = 0; p < content.size(); ++p) {
    const ordered_json& part = content[p];
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>()
                                 : std::string();
    if (type != "text" || !part.contains("text") || !part["text"].is_string()) {
      BadRequest(
          where + "[" + std::to_string(p) + "] must be {\"type\": \"text\", \"text\": \"...\"}" +
              (type.empty() || type == "text" ? "" : " (content parts of type '" + type + "' are not supported)"),
          "messages");
    }
    text += (p ? "\n" : "") + part["text"].get<std::string>();
  }
  return text;
}

// Tool-call arguments arrive as JSON text (OpenAI's format); templates iterate over
// them as a mapping, so text that parses as an object is handed over parsed (as vLLM does).
void ParseToolCallArguments(ordered_json& message) {
  if (!message.contains("tool_calls") || !message["tool_calls"].is_array()) return;
  for (ordered_json& call : message["tool_calls"]) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
    ordered_json& function = call["function"];
    if (!function.contains("arguments") || !function["arguments"].is_string()) continue;
    ordered_json parsed = ordered_json::parse(function["arguments"].get<std::string>(), nullptr, false);
    if (parsed.is_object()) function["arguments"] = std::move(parsed);
  }
}

ordered_json NormalizeMessages(const ordered_json& body) {
  if (!body.contains("messages") || body["messages"].is_null()) BadRequest("'messages' is required", "messages");
  const ordered_json& messages = body["messages"];
  if (!messages.is_array() || messages.empty())
    BadRequest("'messages' must be a non-empty list of messages", "messages");
  ordered_json normalized = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      BadRequest("messages[" + std::to_string(i) + "] must be an object with a string 'role'", "messages");
    }
    ordered_json copy = message;
    if (copy.contains("content")) copy["content"] = FlattenContent(copy["content"], i);
    ParseToolCallArguments(copy);
    normalized.push_back(std::move(copy));
  }
  return normalized;
}

ordered_json OptionalOrdered(const ordered_json& body, const char* field,
                             bool (ordered_json::*is_type)() const noexcept, const char* expected) {
  if (!body.contains(field) || body[field].is_null()) return nullptr;
  if (!(body[field].*is_type)()) BadRequest(std::string("'") + field + "' must be " + expected, field);
  return body[field];
}

// vLLM's --chat-template: a file, or the template itself (text with Jinja's braces).
std::string ReadTemplateSource(const std::string& chat_template) {
  std::ifstream file(chat_template);
  if (!file) {
    if (chat_template.find('{') != std::string::npos) return chat_template;
    throw std::invalid_argument("--chat-template " + chat_template + ": cannot open the file");
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

std::string DumpJson(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SseEvent(const json& data) { return "data: " + DumpJson(data) + "\n\n"; }

RequestGroup::RequestGroup(EngineClient& engine, std::vector<EngineClient::NewRequest> requests)
    : engine_(engine), queue_(std::make_shared<OutputQueue>()) {
  for (const auto& r : requests) request_ids_.push_back(r.request_id);
  finished_.assign(request_ids_.size(), false);
  try {
    engine_.AddRequests(std::move(requests), queue_);
  } catch (const std::invalid_argument& e) {
    num_finished_ = request_ids_.size();  // none of them runs
    throw OpenAIError(400, e.what());
  } catch (const std::exception& e) {
    num_finished_ = request_ids_.size();
    throw OpenAIError(500, e.what());
  }
}

RequestGroup::~RequestGroup() {
  std::vector<std::string> unfinished;
  for (size_t i = 0; i < request_ids_.size(); ++i) {
    if (!finished_[i]) unfinished.push_back(request_ids_[i]);
  }
  if (!unfinished.empty() && num_finished_ < request_ids_.size()) engine_.Abort(std::move(unfinished));
}

std::optional<RequestOutput> RequestGroup::Next(std::chrono::milliseconds timeout) {
  std::optional<StreamItem> item = queue_->Pop(timeout);
  if (!item) return std::nullopt;
  const size_t index = IndexOf(item->output.request_id);
  if (item->error || item->output.finished) {
    if (!finished_[index]) ++num_finished_;
    finished_[index] = true;
  }
  if (item->error) throw OpenAIError(500, *item->error);
  return std::move(item->output);
}

std::vector<RequestOutput> RequestGroup::WaitAll(const ClientGone& client_gone) {
  constexpr auto kProbeInterval = std::chrono::milliseconds(200);
  std::vector<RequestOutput> outputs(request_ids_.size());
  auto next_probe = std::chrono::steady_clock::now() + kProbeInterval;
  while (!finished()) {
    std::optional<RequestOutput> output = Next(kProbeInterval);
    if (output && output->finished) outputs[IndexOf(output->request_id)] = std::move(*output);
    // Outputs come every engine step; the client is asked on a clock, not per output.
    if (client_gone && std::chrono::steady_clock::now() >= next_probe) {
      if (client_gone()) throw ClientDisconnected();
      next_probe = std::chrono::steady_clock::now() + kProbeInterval;
    }
  }
  return outputs;
}

size_t RequestGroup::IndexOf(const std::string& request_id) const {
  return static_cast<size_t>(std::find(request_ids_.begin(), request_ids_.end(), request_id) - request_ids_.begin());
}

ServingContext::ServingContext(EngineClient& engine, const ServerConfig& config)
    : engine_(engine),
      served_model_names_(config.served_model_names),
      trust_request_chat_template_(config.trust_request_chat_template),
      sampling_defaults_(config.sampling_defaults),
      enable_auto_tool_choice_(config.enable_auto_tool_choice),
      tool_call_parser_(config.tool_call_parser) {
  if (served_model_names_.empty()) throw std::invalid_argument("ServingContext: no served model name");
  SetMaxPromptBytes(config.max_prompt_bytes);
  const Tokenizer* tokenizer = engine.tokenizer();
  if (!config.chat_template.empty()) {
    chat_template_.emplace(ReadTemplateSource(config.chat_template));  // a template given by hand must parse
  } else if (tokenizer && !tokenizer->chat_template().empty()) {
    // The model's own template failing to parse leaves completions working; chat
    // requests then say why they cannot be served.
    try {
      chat_template_.emplace(tokenizer->chat_template());
    } catch (const ChatTemplateError& e) {
      chat_template_error_ = e.what();
    }
  }
  if (tokenizer) template_tokens_ = ChatTemplateTokensOf(*tokenizer);
}

std::string ServingContext::CheckModel(const json& body) const {
  const std::optional<std::string> model = OptionalString(body, "model");
  if (!model) return served_model_names_.front();
  if (std::find(served_model_names_.begin(), served_model_names_.end(), *model) == served_model_names_.end()) {
    throw OpenAIError(404,
                      "The model `" + *model + "` does not exist. This server serves `" + served_model_names_.front() +
                          "` (GET /v1/models lists the names).",
                      "model");
  }
  return *model;
}

const Tokenizer& ServingContext::RequireTokenizer(const std::string& what) const {
  if (engine_.tokenizer() == nullptr) {
    throw OpenAIError(400, what + " needs a tokenizer, and the model " + engine_.config().model +
                               " has none (tokenizer.json or GGUF tokenizer metadata): send token ids, or start the "
                               "server with --tokenizer PATH");
  }
  return *engine_.tokenizer();
}

// A prompt longer than max_model_len tokens of the longest token cannot fit; twice
// that leaves room for normalizers that shorten text (NFC composing a decomposed
// character). Tokenizing a longer one would only cost memory and time.
void ServingContext::SetMaxPromptBytes(int64_t max_prompt_bytes) {
  if (max_prompt_bytes < 0) {
    throw std::invalid_argument("--max-prompt-bytes must be >= 1, got " + std::to_string(max_prompt_bytes));
  }
  max_prompt_bytes_ = max_prompt_bytes;
  max_prompt_bytes_origin_ = "--max-prompt-bytes";
  const Tokenizer* tokenizer = engine_.tokenizer();
  if (max_prompt_bytes > 0 || tokenizer == nullptr) return;
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    if (tokenizer->HasToken(id)) longest = std::max(longest, tokenizer->TokenBytes(id).size());
  }
  max_prompt_bytes_ = 2 * engine_.max_model_len() * static_cast<int64_t>(longest);
  max_prompt_bytes_origin_ = "--max-prompt-bytes, by default 2 x max_model_len " +
                             std::to_string(engine_.max_model_len()) + " x the longest token's " +
                             std::to_string(longest) + " bytes";
}

std::vector<int32_t> ServingContext::Encode(const std::string& text, bool add_special_tokens,
                                            const std::string& param) const {
  const Tokenizer& tokenizer = RequireTokenizer(param == "messages" ? "a chat conversation" : "a text " + param);
  if (static_cast<int64_t>(text.size()) > max_prompt_bytes_) {
    const std::string what = param == "messages" ? "rendered conversation" : param;
    throw OpenAIError(400,
                      "the " + what + " is " + std::to_string(text.size()) + " bytes, more than the " +
                          std::to_string(max_prompt_bytes_) + " this server tokenizes (" + max_prompt_bytes_origin_ +
                          "): send a shorter " + what,
                      param);
  }
  try {
    return tokenizer.Encode(text, add_special_tokens);
  } catch (const std::exception& e) {
    throw OpenAIError(400, "the " + param + " cannot be tokenized: " + e.what(), param);
  }
}

// The request's own chat_template (parsed into `own`) when the server trusts those,
// else the server's.
const ChatTemplate& ServingContext::TemplateFor(const ordered_json& body, std::optional<ChatTemplate>& own) const {
  const ordered_json source = OptionalOrdered(body, "chat_template", &ordered_json::is_string, "a string");
  if (!source.is_null()) {
    if (!trust_request_chat_template_) {
      BadRequest("a chat_template in the request is refused: the server was not started with "
                 "--trust-request-chat-template (vLLM's flag)",
                 "chat_template");
    }
    try {
      return own.emplace(source.get<std::string>());
    } catch (const ChatTemplateError& e) {
      BadRequest(std::string("the request's chat_template does not parse: ") + e.what(), "chat_template");
    }
  }
  if (!chat_template_error_.empty()) {
    throw OpenAIError(400, "the model's chat template cannot be used (" + chat_template_error_ +
                               "): start the server with --chat-template FILE");
  }
  if (!chat_template_) {
    throw OpenAIError(400,
                      "the model has no chat template (tokenizer_config.json chat_template, chat_template.jinja "
                      "or GGUF tokenizer.chat_template): start the server with --chat-template FILE");
  }
  return *chat_template_;
}

std::string ServingContext::RenderChat(const ordered_json& body) const {
  const ordered_json messages = NormalizeMessages(body);
  RequireTokenizer("a chat conversation");
  std::optional<ChatTemplate> own;
  const ChatTemplate& chat_template = TemplateFor(body, own);
  const ordered_json tools = OptionalOrdered(body, "tools", &ordered_json::is_array, "a list of tools");
  ordered_json kwargs = OptionalOrdered(body, "chat_template_kwargs", &ordered_json::is_object, "an object");
  if (kwargs.is_null()) kwargs = ordered_json::object();
  // vLLM hands reasoning_effort to the template as a variable of that name.
  if (ordered_json effort = OptionalOrdered(body, "reasoning_effort", &ordered_json::is_string, "a string");
      !effort.is_null()) {
    kwargs["reasoning_effort"] = std::move(effort);
  }
  const ordered_json documents = OptionalOrdered(body, "documents", &ordered_json::is_array, "a list of documents");
  const ordered_json generation =
      OptionalOrdered(body, "add_generation_prompt", &ordered_json::is_boolean, "true or false");
  try {
    return chat_template.Render(messages, tools, generation.is_null() || generation.get<bool>(), kwargs,
                                template_tokens_, documents);
  } catch (const ChatTemplateError& e) {
    throw OpenAIError(400, e.kind() == ChatTemplateError::Kind::kRaised ? e.detail() : std::string(e.what()),
                      "messages");
  }
}

void ServingContext::TruncatePrompt(std::vector<int32_t>& ids, std::optional<int64_t> k) const {
  if (!k) return;
  const int64_t max_len = engine_.max_model_len();
  if (*k == 0 || *k < -1 || *k > max_len) {
    BadRequest("truncate_prompt_tokens must be -1 (max_model_len) or in [1, max_model_len " + std::to_string(max_len) +
                   "], got " + std::to_string(*k),
               "truncate_prompt_tokens");
  }
  const auto keep = static_cast<size_t>(*k == -1 ? max_len : *k);
  if (ids.size() > keep) ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
}

std::vector<std::vector<int32_t>> ServingContext::BadWordsTokenIds(const std::vector<std::string>& words) const {
  std::vector<std::vector<int32_t>> sequences;
  if (words.empty()) return sequences;
  RequireTokenizer("bad_words");
  for (const std::string& word : words) {
    const std::string bare = word.substr(std::min(word.find_first_not_of(" \t\n"), word.size()));
    if (bare.empty()) BadRequest("bad_words holds an empty word", "bad_words");
    std::vector<int32_t> plain = Encode(bare, false, "bad_words");
    std::vector<int32_t> spaced = Encode(" " + bare, false, "bad_words");
    const bool add_spaced = !spaced.empty() && spaced.size() == plain.size() && spaced[0] != plain[0];
    if (!plain.empty()) sequences.push_back(std::move(plain));
    if (add_spaced) sequences.push_back(std::move(spaced));
  }
  return sequences;
}

int64_t ServingContext::ResolveMaxTokens(int64_t num_prompt_tokens, std::optional<int64_t> requested,
                                         std::optional<int64_t> fallback, const std::string& prompt_name) const {
  const int64_t max_len = engine_.max_model_len();
  const std::string limit = "This model's maximum context length is " + std::to_string(max_len) + " tokens. ";
  if (num_prompt_tokens >= max_len) {
    throw OpenAIError(400,
                      limit + "However, you requested " + std::to_string(num_prompt_tokens) + " tokens in the " +
                          prompt_name + " (the " + prompt_name + " and at least one generated token must fit). " +
                          "Please reduce the length of the " + prompt_name + ".",
                      prompt_name);
  }
  const int64_t left = max_len - num_prompt_tokens;
  if (!requested) return std::min(fallback.value_or(left), left);
  if (*requested < 1) BadRequest("max_tokens must be >= 1, got " + std::to_string(*requested), "max_tokens");
  if (*requested > left) {
    throw OpenAIError(400,
                      limit + "However, you requested " +
                          std::to_string(static_cast<uint64_t>(num_prompt_tokens) + static_cast<uint64_t>(*requested)) +
                          " tokens (" + std::to_string(num_prompt_tokens) + " in the " + prompt_name + ", " +
                          std::to_string(*requested) + " in the completion). Please reduce the length of the " +
                          prompt_name + " or completion.",
                      "max_tokens");
  }
  return *requested;
}

std::string TokenText(const Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr) return "token_id:" + std::to_string(id);
  if (!tokenizer->HasToken(id)) return "";
  const int32_t ids[] = {id};
  return tokenizer->Decode(ids);
}

std::string TokenRawBytes(const Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr || !tokenizer->HasToken(id)) return TokenText(tokenizer, id);
  return std::string(tokenizer->TokenBytes(id));
}

float LogprobOf(const TokenLogprobs& entry, int32_t id) {
  for (const auto& [token, logprob] : entry) {
    if (token == id) return logprob;
  }
  return -std::numeric_limits<float>::infinity();
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"completion_tokens", completion_tokens}};
}

json StopReasonJson(const RequestOutput& output, const SamplingParams& params) {
  if (!output.stop_reason.empty()) return output.stop_reason;
  if (output.finish_reason == "stop" && !output.token_ids.empty()) {
    const int32_t last = output.token_ids.back();
    if (std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), last) != params.stop_token_ids.end()) {
      return last;
    }
  }
  return nullptr;
}

json PromptLogprobsJson(const Tokenizer* tokenizer, const RequestOutput& output, int num_top) {
  if (output.prompt_logprobs.empty()) return nullptr;
  json positions = json::array();
  for (size_t p = 0; p < output.prompt_logprobs.size(); ++p) {
    if (!output.prompt_logprobs[p]) {
      positions.push_back(nullptr);
      continue;
    }
    const TokenLogprobs& entry = *output.prompt_logprobs[p];
    json position = json::object();
    for (size_t rank = 0; rank < entry.size(); ++rank) {
      const auto& [id, logprob] = entry[rank];
      // Entries are the top K by rank, then the prompt token when it is not among them
      // (its rank is not known).
      const bool ranked = rank < static_cast<size_t>(num_top);
      position[std::to_string(id)] = {{"logprob", logprob},
                                      {"rank", ranked ? json(rank + 1) : json(nullptr)},
                                      {"decoded_token", TokenText(tokenizer, id)}};
    }
    positions.push_back(std::move(position));
  }
  return positions;
}

}  // namespace vllm::openai
