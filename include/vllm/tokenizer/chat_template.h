// Chat templates: a model's Jinja chat template (tokenizer_config.json
// `chat_template`, or GGUF `tokenizer.chat_template`) rendered the way HF
// transformers' apply_chat_template renders it, byte for byte.
//
// transformers renders with jinja2's ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True, extensions=[loopcontrols]), its own `tojson` (json.dumps with
// ensure_ascii=False, separators ", " and ": ", keys in input order), the globals
// raise_exception(message) and strftime_now(format), default Undefined (undefined
// names are falsy and print as ""), and the variables messages, tools, documents
// (None), add_generation_prompt, the tokenizer's special tokens and any extra
// keyword arguments (enable_thinking, ...). The Jinja subset here covers what chat
// templates use; anything outside it is an error naming the construct and the
// template line, never silently ignored.
//
// Messages and tools are ordered_json: the order of object keys is part of the
// output (tojson of tool schemas, iteration over tool-call arguments).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace vllm {

namespace jinja {
class Template;
}

// Why rendering failed. kSyntax: the template does not parse (thrown by the
// constructor). kRender: evaluation failed (undefined attribute used, type error,
// a limit reached). kRaised: the template called raise_exception(message). kInput:
// the arguments of Render are malformed (messages not an array, ...).
class ChatTemplateError : public std::runtime_error {
 public:
  enum class Kind { kSyntax, kRender, kRaised, kInput };
  // line 0: no template position applies.
  ChatTemplateError(Kind kind, int line, const std::string& detail);

  Kind kind() const { return kind_; }
  int line() const { return line_; }
  // The message without the "chat template ..." prefix and the position; for
  // kRaised it is exactly the template's message.
  const std::string& detail() const { return detail_; }

 private:
  Kind kind_;
  int line_;
  std::string detail_;
};

// Special-token strings exposed to the template (HF passes the tokenizer's
// special_tokens_map). An absent token is an undefined variable, as in HF.
struct ChatTemplateTokens {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
};

// Bounds that keep hostile templates and inputs from exhausting the process (a
// render past one of them is a ChatTemplateError, kRender). Single values are also
// bounded: strings to 64 MiB, lists built by the template to 2^20 items.
struct ChatTemplateLimits {
  size_t max_output_bytes = size_t{1} << 30;
  int max_call_depth = 100;         // macro / call-block recursion
  // Work units of one render: one per evaluated node, plus bulk work inside a node
  // (a unit per 64 bytes of text built, per 16 list items copied or searched, ...).
  // Real templates use a few per message; 2e8 is seconds of work.
  int64_t max_steps = 200'000'000;
};

class ChatTemplate {
 public:
  // Parses the template once; throws ChatTemplateError(kSyntax) naming line and column.
  explicit ChatTemplate(std::string_view source, ChatTemplateLimits limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // messages: array of message objects; tools: null or an array; extra_kwargs: null
  // or an object of further template variables (e.g. {"enable_thinking": false});
  // documents: null or an array (retrieval documents, transformers' `documents`).
  // Thread-safe: a parsed template can render concurrently.
  std::string Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                     const ChatTemplateTokens& tokens, const nlohmann::ordered_json& documents = nullptr) const;

 private:
  std::unique_ptr<const jinja::Template> template_;
};

}  // namespace vllm
