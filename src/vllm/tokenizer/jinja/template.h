// A parsed Jinja template and its renderer.
//
// Scoping follows jinja2: each for-loop iteration, macro call and block has its own
// scope (a `set` inside it is not seen after it, nor by the next iteration), `if`
// has none, and macros read the scope they were defined in, at call time. Only a
// namespace() carries values out of a scope.
#pragma once

#include <string>
#include <string_view>

#include "ast.h"
#include "value.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm::jinja {

class Template {
 public:
  // Throws ChatTemplateError(kSyntax).
  explicit Template(std::string_view source, ChatTemplateLimits limits = {});

  // Renders with `context` as the template's variables, on top of the globals
  // (namespace, range, dict, raise_exception, strftime_now). Throws
  // ChatTemplateError(kRender or kRaised) naming the template line.
  std::string Render(const ValueDict& context) const;

 private:
  Body body_;
  ChatTemplateLimits limits_;
};

}  // namespace vllm::jinja
