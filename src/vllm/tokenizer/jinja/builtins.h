// The builtin filters, tests and global functions: jinja2's defaults that chat
// templates use, transformers' `tojson`, `raise_exception` and `strftime_now`.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ast.h"
#include "value.h"

namespace vllm::jinja {

// Null when there is no filter / test of that name.
FilterFunction FindFilter(std::string_view name);
TestFunction FindTest(std::string_view name);

// The globals every render starts with: namespace, range, dict, raise_exception,
// strftime_now. Every namespace() made is recorded in `created_namespaces`: a
// namespace may hold itself, and the renderer empties them all at the end of the
// render so that no reference cycle outlives it.
ValueDict GlobalFunctions(std::vector<std::weak_ptr<Namespace>>& created_namespaces);

// One parameter of a Python signature; no default means required.
struct Param {
  std::string_view name;
  std::optional<Value> default_value;
};

// Binds call arguments to a signature, as Python does: positional first, then
// keywords; errors name the function ("replace() missing required argument 'new'").
std::vector<Value> BindArgs(std::string_view function, CallArgs& args, std::initializer_list<Param> params);

}  // namespace vllm::jinja
