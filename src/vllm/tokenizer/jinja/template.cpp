#include "template.h"

#include "lexer.h"
#include "parser.h"
#include "renderer.h"

namespace vllm::jinja {

Template::Template(std::string_view source, ChatTemplateLimits limits)
    : body_(Parse(Tokenize(source))), limits_(limits) {}

std::string Template::Render(const ValueDict& context) const { return Renderer(limits_).Run(body_, context); }

}  // namespace vllm::jinja
