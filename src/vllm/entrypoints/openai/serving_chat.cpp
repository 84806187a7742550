#include "serving_chat.h"

#include <utility>

#include "chat_output.h"
#include "request_fields.h"
#include "structured_outputs_request.h"
#include "vllm/entrypoints/sampling_params_json.h"

namespace vllm::openai {
namespace {

using nlohmann::json;

struct ChatRequest {
  std::string request_id;
  std::string model;
  int64_t created = 0;
  StreamOptions stream;
  bool return_token_ids = false;       // vLLM's extra: prompt_token_ids and token_ids
  bool return_tokens_as_token_ids = false;  // logprobs name tokens "token_id:N"
  std::string user;                    // OpenAI's user: shown in the request's log line
  std::string role = "assistant";      // of the answer: the last message's without a generation prompt
  std::string echo;                    // echo: the last message's content when it has that role
  std::optional<int> top_logprobs;     // set when logprobs is true
  std::optional<int> prompt_logprobs;  // vLLM's extra field
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int64_t n = 1;        // choices, each its own engine request (ChoiceParams)
  int64_t best_of = 1;  // candidates the n choices are picked from (ReadBestOf)
  ChatTools tools;
  std::string reasoning_parser;       // the server's ("" or "qwen3")
  bool starts_in_reasoning = false;   // the rendered prompt left <think> open
  bool include_reasoning = true;      // vLLM's: false leaves reasoning_content out

  ChatOutputParser MakeParser() const {
    return ChatOutputParser(reasoning_parser, starts_in_reasoning, tools, request_id.substr(request_id.find('-') + 1));
  }
};

// The output constraint: tool_choice required / named, or the structured-output
// fields, not both.
std::optional<StructuredOutputsParams> ReadConstraint(const nlohmann::ordered_json& body, const ChatTools& tools) {
  RequestStructuredOutputs fields = ReadStructuredOutputs(body);
  std::optional<StructuredOutputsParams> calls = ToolCallConstraint(tools);
  if (!calls) return fields.params;
  if (fields.params) {
    BadRequest("'" + fields.field + "' and tool_choice " + body["tool_choice"].dump() +
                   " both constrain the output; send one of them",
               fields.field);
  }
  return calls;
}

// vLLM's chat echo: the answer's role is the assistant's after a generation prompt,
// else the last message's; echo returns the last message's content when it has that role.
void ReadRoleAndEcho(const json& body, ChatRequest& request) {
  const json& last = body["messages"].back();
  if (!OptionalBool(body, "add_generation_prompt").value_or(true)) request.role = last["role"].get<std::string>();
  if (!OptionalBool(body, "echo").value_or(false) || last["role"] != request.role) return;
  if (last.contains("content") && last["content"].is_string()) request.echo = last["content"].get<std::string>();
  if (last.contains("content") && last["content"].is_array()) {
    for (const json& part : last["content"]) request.echo += (request.echo.empty() ? "" : "\n") + part.value("text", "");
  }
}

ChatRequest ReadRequest(const std::string& text, const ServingContext& context) {
  const json body = ParseBody(text);
  CheckRequestFields(body, Endpoint::kChat);
  ChatRequest request;
  request.model = context.CheckModel(body);
  request.request_id = RequestIdOf(body, "chatcmpl-");
  request.created = UnixTimeSeconds();
  request.stream = ReadStreamOptions(body);
  request.user = OptionalString(body, "user").value_or("");
  const nlohmann::ordered_json ordered = ParseOrderedBody(text);
  request.tools = ReadChatTools(ordered, context);
  request.reasoning_parser = context.reasoning_parser();
  request.include_reasoning = OptionalBool(body, "include_reasoning").value_or(true);
  if (!request.include_reasoning && request.reasoning_parser.empty()) {
    BadRequest("include_reasoning false needs the server started with --reasoning-parser: without one the reasoning "
               "is not told apart from the content",
               "include_reasoning");
  }
  request.return_token_ids = OptionalBool(body, "return_token_ids").value_or(false);
  const bool logprobs = OptionalBool(body, "logprobs").value_or(false);
  const std::optional<int64_t> top_logprobs = OptionalInt(body, "top_logprobs");
  if (top_logprobs.value_or(0) > 0 && !logprobs) BadRequest("top_logprobs needs logprobs set to true", "top_logprobs");
  if (logprobs) request.top_logprobs = CheckLogprobsCount(top_logprobs.value_or(0), "top_logprobs");
  RequestSampling sampling = ReadSampling(body, context.sampling_defaults());
  // A stream sends what each output adds; a single response uses only the last (as vLLM).
  sampling.params.output_kind = request.stream.stream ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
  request.params = sampling.params;
  request.params.logprobs = request.top_logprobs;
  request.params.bad_words_token_ids = context.BadWordsTokenIds(sampling.bad_words);
  request.return_tokens_as_token_ids = sampling.return_tokens_as_token_ids;
  request.prompt_logprobs = request.params.prompt_logprobs;
  request.params.structured_outputs = ReadConstraint(ordered, request.tools);
  const std::string prompt = context.RenderChat(ordered);
  request.starts_in_reasoning = PromptOpensReasoning(prompt);
  ReadRoleAndEcho(body, request);  // after RenderChat, which checked the messages
  const bool add_special_tokens = OptionalBool(body, "add_special_tokens").value_or(false);
  request.prompt_ids = context.Encode(prompt, add_special_tokens, "messages");
  if (request.prompt_ids.empty()) BadRequest("the rendered conversation is empty", "messages");
  context.TruncatePrompt(request.prompt_ids, sampling.truncate_prompt_tokens);
  request.params.max_tokens = context.ResolveMaxTokens(static_cast<int64_t>(request.prompt_ids.size()),
                                                       sampling.max_tokens, sampling.default_max_tokens, "messages");
  ValidateSampling(request.params, context.engine().vocab_size());
  request.n = ReadChoiceCount(body);
  request.best_of = ReadBestOf(body, request.n, request.stream.stream);
  return request;
}

json TokenJson(const Tokenizer* tokenizer, int32_t id, float logprob) {
  const std::string raw = TokenRawBytes(tokenizer, id);
  json bytes = json::array();
  for (unsigned char c : raw) bytes.push_back(static_cast<int>(c));
  return {{"token", TokenText(tokenizer, id)}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

// Chat logprobs of the tokens of `output`: [{token, logprob, bytes, top_logprobs}].
json LogprobsContent(const Tokenizer* tokenizer, const RequestOutput& output, int num_top) {
  json content = json::array();
  for (size_t t = 0; t < output.token_ids.size(); ++t) {
    const TokenLogprobs& entry = output.logprobs.at(t);
    json item = TokenJson(tokenizer, output.token_ids[t], LogprobOf(entry, output.token_ids[t]));
    json top = json::array();
    for (size_t i = 0; i < entry.size() && i < static_cast<size_t>(num_top); ++i) {
      top.push_back(TokenJson(tokenizer, entry[i].first, entry[i].second));
    }
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  return content;
}

json ChunkBase(const ChatRequest& request, const char* object) {
  return {{"id", request.request_id}, {"object", object}, {"created", request.created}, {"model", request.model}};
}

json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& call : calls) {
    out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return out;
}

// vLLM's finish_reason "tool_calls" for an answer that called tools and stopped.
std::string FinishReasonOf(const std::string& finish_reason, bool called_tools) {
  return called_tools && finish_reason == "stop" ? "tool_calls" : finish_reason;
}

json MessageJson(const ChatRequest& request, const std::string& text) {
  ChatOutputParser parser = request.MakeParser();
  ChatMessage message;
  AppendDelta(message, parser.Feed(text));
  AppendDelta(message, parser.Finish());
  const std::string content = request.echo + message.content;
  json out = {{"role", request.role},
              {"content", content.empty() && !message.tool_calls.empty() ? json(nullptr) : json(content)},
              {"tool_calls", ToolCallsJson(message.tool_calls)}};
  if (!request.reasoning_parser.empty() && request.include_reasoning) {
    out["reasoning_content"] = message.reasoning.empty() ? json(nullptr) : json(message.reasoning);
  }
  return out;
}

json ResponseJson(const ChatRequest& request, const std::vector<RequestOutput>& outputs, const Tokenizer* tokenizer) {
  json response = ChunkBase(request, "chat.completion");
  json choices = json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RequestOutput& out = outputs[i];
    json logprobs = nullptr;
    if (request.top_logprobs) {
      const Tokenizer* names = request.return_tokens_as_token_ids ? nullptr : tokenizer;
      logprobs = {{"content", LogprobsContent(names, out, *request.top_logprobs)}};
    }
    json message = MessageJson(request, out.text);
    const bool called_tools = !message["tool_calls"].empty();
    choices.push_back({{"index", i},
                       {"message", std::move(message)},
                       {"logprobs", std::move(logprobs)},
                       {"finish_reason", FinishReasonOf(out.finish_reason, called_tools)},
                       {"stop_reason", StopReasonJson(out, request.params)}});
    if (request.return_token_ids) choices.back()["token_ids"] = out.token_ids;
    completion_tokens += static_cast<int64_t>(out.token_ids.size());
  }
  const RequestOutput& first = outputs.front();
  response["choices"] = std::move(choices);
  // The prompt is counted once, however many choices it has (as vLLM).
  response["usage"] = UsageJson(static_cast<int64_t>(first.prompt_token_ids.size()), completion_tokens);
  if (request.return_token_ids) response["prompt_token_ids"] = first.prompt_token_ids;
  response["prompt_logprobs"] =
      request.prompt_logprobs ? PromptLogprobsJson(tokenizer, first, *request.prompt_logprobs) : json(nullptr);
  return response;
}

// The role chunk first, then one content delta per engine output that adds text or
// tokens; the last carries the finish_reason.
class ChatStream : public EventStream {
 public:
  ChatStream(ChatRequest request, std::unique_ptr<RequestGroup> group, const Tokenizer* tokenizer)
      : request_(std::move(request)),
        group_(std::move(group)),
        tokenizer_(request_.return_tokens_as_token_ids ? nullptr : tokenizer) {
    for (int64_t j = 0; j < request_.n; ++j) choices_.push_back({request_.MakeParser()});
  }

  bool Next(std::chrono::milliseconds timeout, std::string& events) override {
    if (done_) return false;
    if (!role_sent_) {  // each choice's role chunk (and echo) first, as vLLM
      for (size_t i = 0; i < choices_.size(); ++i) {
        json role = Chunk(i, {{"role", request_.role}, {"content", ""}}, nullptr, nullptr, nullptr);
        if (request_.return_token_ids) role["prompt_token_ids"] = request_.prompt_ids;
        events += SseEvent(role);
        if (!request_.echo.empty()) events += SseEvent(Chunk(i, {{"content", request_.echo}}, nullptr, nullptr, nullptr));
      }
      role_sent_ = true;
    }
    try {
      // Everything ready goes out in one write: a writer that fell behind catches up.
      for (auto output = group_->Next(timeout); output; output = group_->Next(std::chrono::milliseconds(0))) {
        AddDelta(*output, events);
      }
    } catch (const OpenAIError& e) {
      events += SseEvent(e.ToJson()) + kSseDone;
      done_ = true;
      return false;
    }
    if (!group_->finished()) return true;
    if (request_.stream.include_usage) {
      json usage = ChunkBase(request_, "chat.completion.chunk");
      usage["choices"] = json::array();
      size_t completion_tokens = 0;
      for (const Choice& choice : choices_) completion_tokens += choice.num_tokens_sent;
      usage["usage"] = UsageJson(static_cast<int64_t>(request_.prompt_ids.size()), static_cast<int64_t>(completion_tokens));
      events += SseEvent(usage);
    }
    events += kSseDone;
    done_ = true;
    return false;
  }

 private:
  // One choice's state: its output parser, whether it called tools, its tokens.
  struct Choice {
    ChatOutputParser parser;
    bool called_tools = false;
    size_t num_tokens_sent = 0;
  };

  // A chunk of choice `index`; `token_ids`: null, or the chunk's new token ids (return_token_ids).
  json Chunk(size_t index, json delta, json logprobs, json finish_reason, const std::vector<int32_t>* token_ids) const {
    json chunk = ChunkBase(request_, "chat.completion.chunk");
    json choice = {{"index", index},
                   {"delta", std::move(delta)},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", std::move(finish_reason)}};
    if (token_ids) choice["token_ids"] = *token_ids;
    chunk["choices"] = json::array({std::move(choice)});
    if (request_.stream.include_usage && request_.stream.continuous_usage_stats) {
      chunk["usage"] = UsageJson(static_cast<int64_t>(request_.prompt_ids.size()),
                                 static_cast<int64_t>(choices_[index].num_tokens_sent));
    }
    return chunk;
  }

  // `output` is a delta (RequestOutputKind::kDelta): its tokens and logprobs are new.
  void AddDelta(const RequestOutput& output, std::string& events) {
    const size_t index = group_->IndexOf(output.request_id);
    Choice& choice = choices_[index];
    const std::vector<int32_t>& new_ids = output.token_ids;
    json logprobs = nullptr;
    if (request_.top_logprobs) {
      logprobs = {{"content", LogprobsContent(tokenizer_, output, *request_.top_logprobs)}};
    }
    choice.num_tokens_sent += output.token_ids.size();
    ChatDelta parsed = choice.parser.Feed(output.new_text);
    if (output.finished) {
      const ChatDelta rest = choice.parser.Finish();
      parsed.reasoning += rest.reasoning;
      parsed.content += rest.content;
      parsed.tool_calls.insert(parsed.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
    }
    if (!request_.include_reasoning) parsed.reasoning.clear();
    choice.called_tools = choice.called_tools || !parsed.tool_calls.empty();
    const bool tokens_wanted = request_.top_logprobs || request_.return_token_ids;
    if (parsed.empty() && !output.finished && !(tokens_wanted && !new_ids.empty())) return;
    events += SseEvent(
        Chunk(index, DeltaJson(parsed), std::move(logprobs),
              output.finished ? json(FinishReasonOf(output.finish_reason, choice.called_tools)) : json(nullptr),
              request_.return_token_ids ? &new_ids : nullptr));
  }

  // vLLM's delta: reasoning_content, content and tool_calls, each when it has something;
  // a call's first delta carries its id, type and name, later ones argument pieces.
  static json DeltaJson(const ChatDelta& parsed) {
    json delta = json::object();
    if (!parsed.reasoning.empty()) delta["reasoning_content"] = parsed.reasoning;
    if (!parsed.content.empty()) delta["content"] = parsed.content;
    if (parsed.tool_calls.empty()) return delta;
    json calls = json::array();
    for (const ToolCallDelta& call : parsed.tool_calls) {
      json item = {{"index", call.index}};
      json function = json::object();
      if (call.id) item["id"] = *call.id;
      if (call.id) item["type"] = "function";
      if (call.name) function["name"] = *call.name;
      if (!call.arguments.empty() || call.name) function["arguments"] = call.arguments;
      item["function"] = std::move(function);
      calls.push_back(std::move(item));
    }
    delta["tool_calls"] = std::move(calls);
    return delta;
  }

  ChatRequest request_;
  std::unique_ptr<RequestGroup> group_;
  const Tokenizer* tokenizer_;
  std::vector<Choice> choices_;
  bool role_sent_ = false;
  bool done_ = false;
};

}  // namespace

ApiResponse ServingChat::Create(const std::string& body, const ClientGone& client_gone) const {
  ChatRequest request = ReadRequest(body, context_);
  std::vector<EngineClient::NewRequest> engine_requests;
  for (int64_t j = 0; j < request.best_of; ++j) {
    // One request keeps vLLM's id; parallel samples get "-j" as in vLLM's fan-out.
    const std::string id = request.best_of == 1 ? request.request_id : request.request_id + "-" + std::to_string(j);
    engine_requests.push_back(
        {id, request.prompt_ids, CandidateParams(request.params, j, request.n, request.best_of), request.user});
  }
  auto group = std::make_unique<RequestGroup>(context_.engine(), std::move(engine_requests));
  const Tokenizer* tokenizer = context_.engine().tokenizer();
  if (request.stream.stream) {
    return {200, nullptr, std::make_shared<ChatStream>(std::move(request), std::move(group), tokenizer)};
  }
  std::vector<RequestOutput> outputs = group->WaitAll(client_gone);
  if (request.best_of > request.n) {  // the n best candidates, in ranking order
    const std::vector<RequestOutput> candidates = std::move(outputs);
    outputs.clear();
    for (size_t i : BestCandidates(candidates, 0, request.best_of, request.n)) outputs.push_back(candidates[i]);
  }
  return {200, ResponseJson(request, outputs, tokenizer), nullptr};
}

EngineRequestsOfBody ReadChatCompletionBody(const std::string& body, const ServingContext& context) {
  const ChatRequest request = ReadRequest(body, context);
  EngineRequestsOfBody out;
  for (int64_t j = 0; j < request.best_of; ++j) {
    out.prompt_ids.push_back(request.prompt_ids);
    out.params.push_back(CandidateParams(request.params, j, request.n, request.best_of));
  }
  return out;
}

}  // namespace vllm::openai
