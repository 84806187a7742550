// What the OpenAI endpoints share (vLLM's OpenAIServing): the engine, the served model
// names, the chat template, prompt length checks, and the requests of one HTTP request
// (RequestGroup), whose outputs an endpoint turns into one JSON response or an SSE stream.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "vllm/engine/async_llm_engine.h"
#include "vllm/entrypoints/openai/api_server.h"
#include "vllm/entrypoints/openai/protocol.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm::openai {

// A server-sent event stream, produced a piece at a time by the HTTP layer's writer.
class EventStream {
 public:
  virtual ~EventStream() = default;
  // Waits up to `timeout` for engine output and appends the events it makes
  // ("data: {...}\n\n", at the end "data: [DONE]\n\n") to `events`. Returns false once
  // the stream is complete. Destroying an unfinished stream aborts its requests.
  virtual bool Next(std::chrono::milliseconds timeout, std::string& events) = 0;
};

// What an endpoint answers: a JSON body, or (stream set) an SSE stream.
struct ApiResponse {
  int status = 200;
  nlohmann::json body;
  std::shared_ptr<EventStream> stream;
};

inline constexpr char kSseDone[] = "data: [DONE]\n\n";
std::string SseEvent(const nlohmann::json& data);
// JSON text; invalid UTF-8 (never produced by the detokenizer) is replaced, not thrown.
std::string DumpJson(const nlohmann::json& value);

// Asked while a non-streaming answer waits for the engine: true once the client has
// closed its connection (nobody will read the answer).
using ClientGone = std::function<bool()>;

// Thrown by RequestGroup::WaitAll when the client left; the group's requests are
// aborted as it is destroyed, and nothing is written.
class ClientDisconnected : public std::runtime_error {
 public:
  ClientDisconnected() : std::runtime_error("the client closed the connection before the answer was ready") {}
};

// The engine requests made for one HTTP request (one per prompt), sharing an OutputQueue.
class RequestGroup {
 public:
  // Submits the requests; a 400 with the engine's reason when it rejects one (then none runs).
  RequestGroup(EngineClient& engine, std::vector<EngineClient::NewRequest> requests);
  // Aborts the requests that have not finished: the client went away.
  ~RequestGroup();
  RequestGroup(const RequestGroup&) = delete;
  RequestGroup& operator=(const RequestGroup&) = delete;

  // The next output of any of the requests, nullopt when none came within `timeout`;
  // a 500 when the engine failed a request.
  std::optional<RequestOutput> Next(std::chrono::milliseconds timeout);
  // The final output of every request, in the order given (waits for all). Between
  // outputs, `client_gone` (when set) is asked every 200 ms; ClientDisconnected when it says so.
  std::vector<RequestOutput> WaitAll(const ClientGone& client_gone = {});
  size_t IndexOf(const std::string& request_id) const;
  size_t size() const { return request_ids_.size(); }
  bool finished() const { return num_finished_ == request_ids_.size(); }

 private:
  EngineClient& engine_;
  std::shared_ptr<OutputQueue> queue_;
  std::vector<std::string> request_ids_;
  std::vector<bool> finished_;
  size_t num_finished_ = 0;
};

class ServingContext {
 public:
  // From `config`: served_model_names (not empty), chat_template (a template file or
  // the template itself, vLLM's --chat-template; empty means the tokenizer's; throws
  // when a given one cannot be read or parsed), trust_request_chat_template,
  // max_prompt_bytes (0: its default), sampling_defaults (--generation-config).
  ServingContext(EngineClient& engine, const ServerConfig& config);

  EngineClient& engine() const { return engine_; }
  const std::vector<std::string>& served_model_names() const { return served_model_names_; }
  const SamplingDefaults& sampling_defaults() const { return sampling_defaults_; }
  bool enable_auto_tool_choice() const { return enable_auto_tool_choice_; }
  const std::string& tool_call_parser() const { return tool_call_parser_; }
  // The engine's --reasoning-parser ("" or "qwen3").
  const std::string& reasoning_parser() const { return engine_.config().reasoning_parser; }
  // The model a request names, checked against the served names (absent: the first); a 404 otherwise.
  std::string CheckModel(const nlohmann::json& body) const;
  // The tokenizer, or a 400 saying that `what` needs one.
  const Tokenizer& RequireTokenizer(const std::string& what) const;
  // Token ids of a prompt text; a 400 naming `param` when it cannot be tokenized or is
  // longer than max_prompt_bytes (checked before any work).
  std::vector<int32_t> Encode(const std::string& text, bool add_special_tokens, const std::string& param) const;
  // Renders a chat request (messages, tools, documents, reasoning_effort,
  // add_generation_prompt, chat_template_kwargs) with the chat template, or with the
  // request's own chat_template when the server trusts those; 400s for malformed
  // messages and template errors.
  std::string RenderChat(const nlohmann::ordered_json& body) const;
  // max_tokens for a prompt of `num_prompt_tokens`: `requested`, else `fallback` (none:
  // all that is left of max_model_len) capped to what is left. A 400 in vLLM's words
  // when the prompt or prompt + requested exceed max_model_len. `prompt_name` is
  // "prompt" or "messages".
  int64_t ResolveMaxTokens(int64_t num_prompt_tokens, std::optional<int64_t> requested, std::optional<int64_t> fallback,
                           const std::string& prompt_name) const;
  // vLLM's truncate_prompt_tokens: keeps the last k tokens of `ids` (k -1:
  // max_model_len); a 400 for k = 0, below -1 or above max_model_len.
  void TruncatePrompt(std::vector<int32_t>& ids, std::optional<int64_t> k) const;
  // vLLM's bad words as token sequences: each word as written and, when that differs
  // only in its first token and not in length, after a space (how it appears mid-text).
  std::vector<std::vector<int32_t>> BadWordsTokenIds(const std::vector<std::string>& words) const;

 private:
  void SetMaxPromptBytes(int64_t max_prompt_bytes);
  const ChatTemplate& TemplateFor(const nlohmann::ordered_json& body, std::optional<ChatTemplate>& own) const;

  EngineClient& engine_;
  std::vector<std::string> served_model_names_;
  std::optional<ChatTemplate> chat_template_;
  std::string chat_template_error_;  // why the tokenizer's template did not parse
  bool trust_request_chat_template_ = false;
  ChatTemplateTokens template_tokens_;
  int64_t max_prompt_bytes_ = 0;
  std::string max_prompt_bytes_origin_;  // how the bound came about, for the 400
  SamplingDefaults sampling_defaults_;
  bool enable_auto_tool_choice_ = false;
  std::string tool_call_parser_;
};

// A token's text for logprobs: the token decoded alone (vLLM's), "" for ids past the
// tokenizer's vocabulary, "token_id:N" without a tokenizer.
std::string TokenText(const Tokenizer* tokenizer, int32_t id);
// The raw bytes of a token (chat logprobs' "bytes").
std::string TokenRawBytes(const Tokenizer* tokenizer, int32_t id);
// The logprob of `id` in an entry (the sampled or prompt token is always there).
float LogprobOf(const TokenLogprobs& entry, int32_t id);
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);
// vLLM's stop_reason: the stop string, the stop token id, or null (EOS, length).
nlohmann::json StopReasonJson(const RequestOutput& output, const SamplingParams& params);
// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}}, ...]
// for a request that asked for the top `num_top` per position.
nlohmann::json PromptLogprobsJson(const Tokenizer* tokenizer, const RequestOutput& output, int num_top);

// What a request body becomes before it reaches the engine: each engine request's
// prompt ids and sampling parameters (the request-body fuzzer checks these).
struct EngineRequestsOfBody {
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<SamplingParams> params;
};

}  // namespace vllm::openai
