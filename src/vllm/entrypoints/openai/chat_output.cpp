#include "chat_output.h"

#include "serving_engine.h"
#include "tool_parsers/tool_call_grammar.h"
#include "vllm/engine/structured_output_manager.h"

namespace vllm::openai {
namespace {

using ojson = nlohmann::ordered_json;

bool Present(const ojson& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

ChatTools::Mode ReadMode(const ojson& body, ChatTools& tools) {
  if (!Present(body, "tool_choice")) return Present(body, "tools") ? ChatTools::Mode::kAuto : ChatTools::Mode::kNone;
  const ojson& choice = body["tool_choice"];
  if (choice.is_string()) {
    const std::string mode = choice.get<std::string>();
    if (mode == "none") return ChatTools::Mode::kNone;
    if (mode == "auto") return ChatTools::Mode::kAuto;
    if (mode == "required") return ChatTools::Mode::kRequired;
  } else if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("function") &&
             choice["function"].is_object() && choice["function"].contains("name") &&
             choice["function"]["name"].is_string()) {
    tools.function = choice["function"]["name"].get<std::string>();
    return ChatTools::Mode::kNamed;
  }
  BadRequest("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
             "{\"name\": ...}}, got " + choice.dump(),
             "tool_choice");
}

}  // namespace

ChatTools ReadChatTools(const ojson& body, const ServingContext& context) {
  ChatTools tools;
  tools.mode = ReadMode(body, tools);
  if (Present(body, "tools")) tools.tools = body["tools"];
  if (tools.mode == ChatTools::Mode::kNone) return tools;
  if (!tools.tools.is_array() || tools.tools.empty()) {
    BadRequest("tool_choice " + body["tool_choice"].dump() + " needs a non-empty tools list", "tool_choice");
  }
  tools.parser = context.tool_call_parser();
  if (tools.mode == ChatTools::Mode::kAuto && !context.enable_auto_tool_choice()) {
    BadRequest("tool_choice \"auto\" (the default when tools are given) needs the server started with "
               "--enable-auto-tool-choice and --tool-call-parser; send tool_choice \"none\" to only show the tools "
               "to the model",
               "tool_choice");
  }
  if (tools.parser.empty()) {
    BadRequest("tool_choice " + body["tool_choice"].dump() +
                   " needs the server started with --tool-call-parser (hermes or qwen3_coder): the calls are "
                   "generated in that parser's format",
               "tool_choice");
  }
  return tools;
}

std::optional<StructuredOutputsParams> ToolCallConstraint(const ChatTools& tools) {
  if (tools.mode != ChatTools::Mode::kRequired && tools.mode != ChatTools::Mode::kNamed) return std::nullopt;
  const std::optional<std::string> function =
      tools.mode == ChatTools::Mode::kNamed ? std::optional<std::string>(tools.function) : std::nullopt;
  StructuredOutputsParams params;
  try {
    params.prebuilt = ToolCallGrammar(tools.parser, tools.tools, function);
  } catch (const structured_output::StructuredOutputError& e) {
    BadRequest(e.what(), function && std::string(e.what()).find("which tools do not list") != std::string::npos
                             ? "tool_choice"
                             : "tools");
  }
  params.prebuilt_key = tools.parser + '\0' + function.value_or("") + '\0' + tools.tools.dump();
  return params;
}

ChatOutputParser::ChatOutputParser(const std::string& reasoning_parser, bool starts_in_reasoning,
                                   const ChatTools& tools, const std::string& call_id_prefix) {
  if (!reasoning_parser.empty()) reasoning_ = std::make_unique<ReasoningParser>(starts_in_reasoning);
  if (tools.parses_calls()) {
    tools_ = MakeToolParser(tools.parser, nlohmann::json::parse(tools.tools.dump()), call_id_prefix);
  }
}

ChatDelta ChatOutputParser::Route(const ReasoningDelta& split, bool end) {
  ChatDelta out;
  out.reasoning = split.reasoning;
  if (!tools_) {
    out.content = split.content;
    return out;
  }
  ParsedDelta parsed = tools_->Feed(split.content);
  if (end) {
    ParsedDelta rest = tools_->Finish();
    parsed.content += rest.content;
    parsed.tool_calls.insert(parsed.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
  }
  out.content = std::move(parsed.content);
  out.tool_calls = std::move(parsed.tool_calls);
  return out;
}

ChatDelta ChatOutputParser::Feed(std::string_view text) {
  return Route(reasoning_ ? reasoning_->Feed(text) : ReasoningDelta{"", std::string(text)}, false);
}

ChatDelta ChatOutputParser::Finish() { return Route(reasoning_ ? reasoning_->Finish() : ReasoningDelta{}, true); }

void AppendDelta(ChatMessage& into, const ChatDelta& delta) {
  into.reasoning += delta.reasoning;
  ParsedToolCalls calls{std::move(into.content), std::move(into.tool_calls)};
  AppendDelta(calls, ParsedDelta{delta.content, delta.tool_calls});
  into.content = std::move(calls.content);
  into.tool_calls = std::move(calls.tool_calls);
}

bool PromptOpensReasoning(std::string_view prompt) {
  const size_t open = prompt.rfind("<think>"), close = prompt.rfind("</think>");
  return open != std::string_view::npos && (close == std::string_view::npos || open > close);
}

}  // namespace vllm::openai
