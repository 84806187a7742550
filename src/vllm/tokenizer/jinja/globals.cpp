// Global functions of the render environment and Python-style argument binding.
#include <ctime>
#include <limits>

#include "builtins.h"
#include "operations.h"
#include "py_string.h"

namespace vllm::jinja {
namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr Int kMaxRange = 100000;

// dict(*args, **kwargs) as namespace() and dict() take it: an optional mapping or
// iterable of pairs, then keyword arguments.
ValueDict DictFromArgs(std::string_view function, CallArgs& args) {
  if (args.positional.size() > 1) {
    throw RenderError(std::string(function) + "() expected at most 1 positional argument, got " +
                      std::to_string(args.positional.size()));
  }
  ValueDict dict;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.IsUndefined()) ThrowUndefined(source);  // Python's dict() asks it for .keys
    if (source.IsDict()) {
      dict = source.AsDict();
    } else {
      const std::shared_ptr<const ValueList> pairs = Iterate(source);
      for (const Value& pair : *pairs) {
        const auto parts = Iterate(pair);
        if (parts->size() != 2 || !(*parts)[0].IsString()) {
          throw RenderError(std::string(function) + "(): each item must be a (str, value) pair");
        }
        dict.Set((*parts)[0].AsString(), (*parts)[1]);
      }
    }
  }
  for (auto& [name, value] : args.keyword) dict.Set(name, value);
  return dict;
}

Value Range(CallArgs& args) {
  if (!args.keyword.empty()) throw RenderError("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) throw RenderError("range expected 1 to 3 arguments");
  for (const Value& v : args.positional) {
    if (!v.IsInt() && !v.IsBool()) throw RenderError("'" + v.TypeName() + "' object cannot be interpreted as an integer");
  }
  const auto& p = args.positional;
  const Int start = p.size() == 1 ? 0 : p[0].AsInt();
  const Int stop = p.size() == 1 ? p[0].AsInt() : p[1].AsInt();
  const Int step = p.size() == 3 ? p[2].AsInt() : 1;
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  // Number of items, computed without overflow: huge bounds are simply a range too big.
  const bool ascending = step > 0;
  Int span = 0;
  const bool empty = ascending ? stop <= start : start <= stop;
  const bool overflow = !empty && (ascending ? __builtin_sub_overflow(stop, start, &span)
                                             : __builtin_sub_overflow(start, stop, &span));
  const Int stride = ascending ? step : (step == std::numeric_limits<Int>::min() ? 0 : -step);
  const Int length = empty ? 0 : (overflow || stride == 0) ? kMaxRange + 1 : (span - 1) / stride + 1;
  if (length > kMaxRange) {
    throw RenderError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  ValueList items;
  for (Int i = 0; i < length; ++i) items.push_back(Value::Integer(start + i * step));
  return Value::List(std::move(items));
}

Value RaiseException(CallArgs& args) {
  const std::vector<Value> a = BindArgs("raise_exception", args, {{"message"}});
  throw TemplateRaised(ToStr(a[0]));
}

Value StrftimeNow(CallArgs& args) {
  const std::vector<Value> a = BindArgs("strftime_now", args, {{"format"}});
  if (!a[0].IsString()) throw RenderError("strftime_now: the format must be a string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[512];
  const size_t n = std::strftime(buffer, sizeof(buffer), a[0].AsString().c_str(), &local);
  return Value::String(std::string(buffer, n));
}

}  // namespace

ValueDict GlobalFunctions(std::vector<std::weak_ptr<Namespace>>& created_namespaces) {
  ValueDict globals;
  globals.Set("namespace", Value::Function("namespace", [&created_namespaces](CallArgs& args) {
    Value ns = Value::NewNamespace(DictFromArgs("namespace", args));
    created_namespaces.push_back(ns.SharedNamespace());
    return ns;
  }));
  globals.Set("dict", Value::Function("dict", [](CallArgs& args) { return Value::Dict(DictFromArgs("dict", args)); }));
  globals.Set("range", Value::Function("range", Range));
  globals.Set("raise_exception", Value::Function("raise_exception", RaiseException));
  globals.Set("strftime_now", Value::Function("strftime_now", StrftimeNow));
  return globals;
}

std::vector<Value> BindArgs(std::string_view function, CallArgs& args, std::initializer_list<Param> params) {
  const std::string name(function);
  if (args.positional.size() > params.size()) {
    throw RenderError(name + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                      std::to_string(args.positional.size()) + " given)");
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (auto& [key, value] : args.keyword) {
    size_t index = 0;
    for (const Param& p : params) {
      if (p.name == key) break;
      ++index;
    }
    if (index == params.size()) throw RenderError(name + "() got an unexpected keyword argument '" + key + "'");
    if (bound[index]) throw RenderError(name + "() got multiple values for argument '" + key + "'");
    bound[index] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  size_t i = 0;
  for (const Param& p : params) {
    if (!bound[i] && !p.default_value) {
      throw RenderError(name + "() missing required argument '" + std::string(p.name) + "'");
    }
    out.push_back(bound[i] ? *bound[i] : *p.default_value);
    ++i;
  }
  return out;
}

}  // namespace vllm::jinja
