#include "vllm/tokenizer/chat_template.h"

#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/template.h"

namespace vllm {
namespace {

std::string FormatMessage(ChatTemplateError::Kind kind, int line, const std::string& detail) {
  const std::string where = line > 0 ? "line " + std::to_string(line) : "";
  switch (kind) {
    case ChatTemplateError::Kind::kSyntax: return "chat template syntax error (" + where + "): " + detail;
    case ChatTemplateError::Kind::kRender: return "chat template error (" + where + "): " + detail;
    case ChatTemplateError::Kind::kRaised: return "chat template raised an exception (" + where + "): " + detail;
    case ChatTemplateError::Kind::kInput: return "chat template input: " + detail;
  }
  return detail;
}

[[noreturn]] void BadInput(const std::string& detail) {
  throw ChatTemplateError(ChatTemplateError::Kind::kInput, 0, detail);
}

jinja::Value ConvertInput(const nlohmann::ordered_json& json, const char* what) {
  try {
    return jinja::FromJson(json);
  } catch (const jinja::RenderError& e) {
    BadInput(std::string(what) + ": " + e.what());
  }
}

// The variables transformers passes to the template: messages, tools, documents,
// add_generation_prompt, the special tokens, then the extra keyword arguments.
jinja::ValueDict BuildContext(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                              bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                              const ChatTemplateTokens& tokens, const nlohmann::ordered_json& documents) {
  if (!messages.is_array()) BadInput(std::string("messages must be a JSON array, got ") + messages.type_name());
  if (!tools.is_null() && !tools.is_array()) BadInput(std::string("tools must be null or an array, got ") + tools.type_name());
  for (const auto& tool : tools.is_array() ? tools : nlohmann::ordered_json::array()) {
    if (!tool.is_object()) BadInput("each tool must be a JSON object (a function schema), got " + std::string(tool.type_name()));
  }
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) {
    BadInput(std::string("chat template kwargs must be null or an object, got ") + extra_kwargs.type_name());
  }
  jinja::ValueDict context;
  context.Set("messages", ConvertInput(messages, "messages"));
  context.Set("tools", ConvertInput(tools, "tools"));
  if (!documents.is_null() && !documents.is_array()) {
    BadInput(std::string("documents must be null or an array, got ") + documents.type_name());
  }
  context.Set("documents", documents.is_null() ? jinja::Value::None() : ConvertInput(documents, "documents"));
  context.Set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
  const std::pair<const char*, const std::optional<std::string>*> special[] = {
      {"bos_token", &tokens.bos_token}, {"eos_token", &tokens.eos_token},
      {"pad_token", &tokens.pad_token}, {"unk_token", &tokens.unk_token}};
  for (const auto& [name, token] : special) {
    if (token->has_value()) context.Set(name, jinja::Value::String(**token));
  }
  if (extra_kwargs.is_object()) {
    for (const auto& [name, value] : extra_kwargs.items()) {
      if (name == "messages" || name == "tools" || name == "documents" || name == "add_generation_prompt") {
        BadInput("chat template kwarg '" + name + "' collides with an argument of apply_chat_template");
      }
      context.Set(name, ConvertInput(value, "chat template kwargs"));
    }
  }
  return context;
}

}  // namespace

ChatTemplateError::ChatTemplateError(Kind kind, int line, const std::string& detail)
    : std::runtime_error(FormatMessage(kind, line, detail)), kind_(kind), line_(line), detail_(detail) {}

ChatTemplate::ChatTemplate(std::string_view source, ChatTemplateLimits limits)
    : template_(std::make_unique<const jinja::Template>(source, limits)) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                                 const ChatTemplateTokens& tokens, const nlohmann::ordered_json& documents) const {
  return template_->Render(BuildContext(messages, tools, add_generation_prompt, extra_kwargs, tokens, documents));
}

}  // namespace vllm
