// Python methods of str, dict and list that templates call (`content.split('</think>')`,
// `message.get('x')`, `d.items()`). Methods that modify a list or dict are refused as
// jinja2's immutable sandbox refuses them; Python methods outside this set are errors
// that name them rather than silently missing attributes.
#include <algorithm>
#include <map>

#include "builtins.h"
#include "operations.h"
#include "py_format.h"
#include "py_string.h"

namespace vllm::jinja {
namespace {

using Method = Value (*)(const Value& self, CallArgs& args);

std::optional<std::string> OptionalString(const Value& v, const char* function) {
  if (v.IsNone()) return std::nullopt;
  if (!v.IsString()) throw RenderError(std::string(function) + " arg must be None or str, not " + v.TypeName());
  return v.AsString();
}

int64_t IntArg(const Value& v, const char* function) {
  if (!v.IsInt() && !v.IsBool()) throw RenderError(std::string(function) + ": an integer is required, not " + v.TypeName());
  const Int i = v.AsInt();
  return static_cast<int64_t>(std::clamp<Int>(i, -(Int(1) << 62), Int(1) << 62));
}

const std::string& StrArg(const Value& v, const char* function) {
  if (!v.IsString()) throw RenderError(std::string(function) + ": expected str, got " + v.TypeName());
  return v.AsString();
}

Value StrResult(const Value& self, std::string s) { return Value::String(std::move(s), self.IsMarkup()); }

Value StrList(const Value& self, const std::vector<std::string>& parts) {
  ValueList out;
  for (const std::string& part : parts) out.push_back(StrResult(self, part));
  return Value::List(std::move(out));
}

// startswith / endswith accept a str or a tuple of str.
bool MatchesAffix(const std::string& s, const Value& affix, bool at_start, const char* function) {
  if (affix.IsList()) {
    return std::any_of(affix.AsList().begin(), affix.AsList().end(),
                       [&](const Value& a) { return MatchesAffix(s, a, at_start, function); });
  }
  if (!affix.IsString()) {
    throw RenderError(std::string(function) + " first arg must be str or a tuple of str, not " + affix.TypeName());
  }
  const std::string& a = affix.AsString();
  if (a.size() > s.size()) return false;
  return at_start ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value StartsWith(const Value& self, CallArgs& args) {
  auto a = BindArgs("startswith", args, {{"prefix"}});
  return Value::Bool(MatchesAffix(self.AsString(), a[0], true, "startswith"));
}

Value EndsWith(const Value& self, CallArgs& args) {
  auto a = BindArgs("endswith", args, {{"suffix"}});
  return Value::Bool(MatchesAffix(self.AsString(), a[0], false, "endswith"));
}

template <bool kLeft, bool kRight>
Value StripMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs(kLeft && kRight ? "strip" : kLeft ? "lstrip" : "rstrip", args, {{"chars", Value::None()}});
  return StrResult(self, py::Strip(self.AsString(), OptionalString(a[0], "strip"), kLeft, kRight));
}

template <bool kFromRight>
Value SplitMethod(const Value& self, CallArgs& args) {
  const char* name = kFromRight ? "rsplit" : "split";
  auto a = BindArgs(name, args, {{"sep", Value::None()}, {"maxsplit", Value::Integer(-1)}});
  const std::optional<std::string> sep = OptionalString(a[0], name);
  if (sep && sep->empty()) throw RenderError("empty separator");
  // At most kMaxListItems parts: a longer result is refused, not built.
  const int64_t requested = IntArg(a[1], name);
  const auto cap = static_cast<int64_t>(kMaxListItems);
  const int64_t max_split = requested < 0 || requested > cap ? cap : requested;
  WorkBudget::Charge(static_cast<int64_t>(self.AsString().size() >> 6));
  std::vector<std::string> parts =
      kFromRight ? py::RSplit(self.AsString(), sep, max_split) : py::Split(self.AsString(), sep, max_split);
  if (max_split == cap && static_cast<int64_t>(parts.size()) > cap) throw RenderError(std::string(name) + "() result too large");
  return StrList(self, parts);
}

Value SplitLinesMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs("splitlines", args, {{"keepends", Value::Bool(false)}});
  const std::string& s = self.AsString();
  if (static_cast<size_t>(std::count(s.begin(), s.end(), '\n')) > kMaxListItems) throw RenderError("splitlines() result too large");
  return StrList(self, py::SplitLines(self.AsString(), a[0].Truthy()));
}

template <std::string (*kMap)(std::string_view)>
Value CaseMethod(const Value& self, CallArgs& args) {
  BindArgs("str method", args, {});
  return StrResult(self, kMap(self.AsString()));
}

template <bool (*kPredicate)(std::string_view)>
Value PredicateMethod(const Value& self, CallArgs& args) {
  BindArgs("str predicate", args, {});
  return Value::Bool(kPredicate(self.AsString()));
}

Value ReplaceMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs("replace", args, {{"old"}, {"new"}, {"count", Value::Integer(-1)}});
  return StrResult(self, ReplaceChecked(self.AsString(), StrArg(a[0], "replace"), StrArg(a[1], "replace"), IntArg(a[2], "replace")));
}

template <bool kFromRight>
Value FindMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs(kFromRight ? "rfind" : "find", args, {{"sub"}});
  WorkBudget::Charge(static_cast<int64_t>(self.AsString().size() >> 6));
  return Value::Integer(py::Find(self.AsString(), StrArg(a[0], "find"), kFromRight));
}

Value CountMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs("count", args, {{"x"}});
  WorkBudget::Charge(static_cast<int64_t>((self.IsString() ? self.AsString().size() : self.AsList().size()) >> 4));
  if (self.IsString()) return Value::Integer(py::Count(self.AsString(), StrArg(a[0], "count")));
  return Value::Integer(static_cast<Int>(std::count_if(self.AsList().begin(), self.AsList().end(),
                                                       [&](const Value& v) { return Equals(v, a[0]); })));
}

Value JoinMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs("join", args, {{"iterable"}});
  std::string out;
  const auto items = Iterate(a[0]);
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) out += self.AsString();
    out += StrArg((*items)[i], "join");
    CheckBuiltSize(out, "join()");
  }
  return StrResult(self, std::move(out));
}

template <bool kPrefix>
Value RemoveAffixMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs(kPrefix ? "removeprefix" : "removesuffix", args, {{"affix"}});
  const std::string& s = self.AsString();
  const std::string& affix = StrArg(a[0], "removeprefix");
  if (!MatchesAffix(s, a[0], kPrefix, "removeprefix")) return self;
  return StrResult(self, kPrefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
}

template <bool kFromRight>
Value PartitionMethod(const Value& self, CallArgs& args) {
  auto a = BindArgs(kFromRight ? "rpartition" : "partition", args, {{"sep"}});
  const std::string& s = self.AsString();
  const std::string& sep = StrArg(a[0], "partition");
  if (sep.empty()) throw RenderError("empty separator");
  const size_t at = kFromRight ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos) {
    return kFromRight ? Value::Tuple({StrResult(self, ""), StrResult(self, ""), self})
                      : Value::Tuple({self, StrResult(self, ""), StrResult(self, "")});
  }
  return Value::Tuple({StrResult(self, s.substr(0, at)), StrResult(self, sep), StrResult(self, s.substr(at + sep.size()))});
}

// center / ljust / rjust / zfill: pad to a width in code points.
enum class Pad { kCenter, kLeftJustify, kRightJustify, kZeroFill };

template <Pad kPad>
Value PadMethod(const Value& self, CallArgs& args) {
  const char* name = kPad == Pad::kCenter ? "center" : kPad == Pad::kLeftJustify ? "ljust" : kPad == Pad::kRightJustify ? "rjust" : "zfill";
  auto a = kPad == Pad::kZeroFill ? BindArgs(name, args, {{"width"}})
                                  : BindArgs(name, args, {{"width"}, {"fillchar", Value::String(" ")}});
  const int64_t width = std::min<int64_t>(IntArg(a[0], name), 1 << 20);
  const std::string fill = kPad == Pad::kZeroFill ? "0" : StrArg(a[1], name);
  if (py::CodePointCount(fill) != 1) throw RenderError(std::string(name) + "() fill character must be exactly one character long");
  const std::string& s = self.AsString();
  const auto length = static_cast<int64_t>(py::CodePointCount(s));
  if (width <= length) return self;
  auto repeat = [&](int64_t n) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += fill;
    return out;
  };
  const int64_t total = width - length;
  switch (kPad) {
    case Pad::kLeftJustify: return StrResult(self, s + repeat(total));
    case Pad::kRightJustify: return StrResult(self, repeat(total) + s);
    case Pad::kCenter: {
      // CPython: the extra fill goes left when the padding and the width are both odd.
      const int64_t left = total / 2 + (total & width & 1);
      return StrResult(self, repeat(left) + s + repeat(total - left));
    }
    case Pad::kZeroFill: {
      const bool signed_text = !s.empty() && (s[0] == '+' || s[0] == '-');
      return StrResult(self, signed_text ? s.substr(0, 1) + repeat(total) + s.substr(1) : repeat(total) + s);
    }
  }
  return self;
}

Value FormatMethod(const Value& self, CallArgs& args) {
  std::string out = BraceFormat(self.AsString(), args);
  CheckBuiltSize(out, "format()");
  return StrResult(self, std::move(out));
}

Value DictGet(const Value& self, CallArgs& args) {
  auto a = BindArgs("get", args, {{"key"}, {"default", Value::None()}});
  if (!a[0].IsString()) return a[1];
  const Value* value = self.AsDict().Find(a[0].AsString());
  return value != nullptr ? *value : a[1];
}

Value DictItems(const Value& self, CallArgs& args) {
  BindArgs("items", args, {});
  return ItemPairs(self.AsDict());
}

Value DictKeys(const Value& self, CallArgs& args) {
  BindArgs("keys", args, {});
  return Value::List(*Iterate(self));
}

Value DictValues(const Value& self, CallArgs& args) {
  BindArgs("values", args, {});
  ValueList values;
  for (const auto& [key, value] : self.AsDict().items()) values.push_back(value);
  return Value::List(std::move(values));
}

Value Copy(const Value& self, CallArgs& args) {
  BindArgs("copy", args, {});
  return self;
}

Value ListIndex(const Value& self, CallArgs& args) {
  auto a = BindArgs("index", args, {{"value"}});
  const ValueList& items = self.AsList();
  for (size_t i = 0; i < items.size(); ++i) {
    if (Equals(items[i], a[0])) return Value::Integer(static_cast<Int>(i));
  }
  throw RenderError(Repr(a[0]) + " is not in list");
}

const std::map<std::string, Method, std::less<>>& StrMethods() {
  static const std::map<std::string, Method, std::less<>> methods = {
      {"startswith", StartsWith},
      {"endswith", EndsWith},
      {"strip", StripMethod<true, true>},
      {"lstrip", StripMethod<true, false>},
      {"rstrip", StripMethod<false, true>},
      {"split", SplitMethod<false>},
      {"rsplit", SplitMethod<true>},
      {"splitlines", SplitLinesMethod},
      {"upper", CaseMethod<py::Upper>},
      {"lower", CaseMethod<py::Lower>},
      {"title", CaseMethod<py::Title>},
      {"capitalize", CaseMethod<py::Capitalize>},
      {"isdigit", PredicateMethod<py::IsDigitString>},
      {"isalpha", PredicateMethod<py::IsAlphaString>},
      {"isalnum", PredicateMethod<py::IsAlnumString>},
      {"isspace", PredicateMethod<py::IsSpaceString>},
      {"islower", PredicateMethod<py::IsLowerString>},
      {"isupper", PredicateMethod<py::IsUpperString>},
      {"replace", ReplaceMethod},
      {"find", FindMethod<false>},
      {"rfind", FindMethod<true>},
      {"count", CountMethod},
      {"join", JoinMethod},
      {"removeprefix", RemoveAffixMethod<true>},
      {"removesuffix", RemoveAffixMethod<false>},
      {"partition", PartitionMethod<false>},
      {"rpartition", PartitionMethod<true>},
      {"format", FormatMethod},
      {"center", PadMethod<Pad::kCenter>},
      {"ljust", PadMethod<Pad::kLeftJustify>},
      {"rjust", PadMethod<Pad::kRightJustify>},
      {"zfill", PadMethod<Pad::kZeroFill>},
  };
  return methods;
}

const std::map<std::string, Method, std::less<>>& DictMethods() {
  static const std::map<std::string, Method, std::less<>> methods = {
      {"get", DictGet}, {"items", DictItems}, {"keys", DictKeys}, {"values", DictValues}, {"copy", Copy}};
  return methods;
}

const std::map<std::string, Method, std::less<>>& ListMethods() {
  static const std::map<std::string, Method, std::less<>> methods = {
      {"index", ListIndex}, {"count", CountMethod}, {"copy", Copy}};
  return methods;
}

// Python methods left out: present as attributes, failing with a clear error if called.
bool IsOtherPythonMethod(const Value& receiver, std::string_view name) {
  static constexpr std::string_view kStr[] = {
      "casefold", "encode", "expandtabs", "format_map", "index", "isascii", "isdecimal", "isidentifier",
      "isnumeric", "isprintable", "istitle", "maketrans", "rindex", "swapcase", "translate"};
  static constexpr std::string_view kDict[] = {"clear", "fromkeys", "pop", "popitem", "setdefault", "update"};
  static constexpr std::string_view kList[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  auto contains = [&](const auto& names) { return std::find(std::begin(names), std::end(names), name) != std::end(names); };
  if (receiver.IsString()) return contains(kStr);
  if (receiver.IsDict()) return contains(kDict);
  if (receiver.IsList()) return contains(kList);
  return false;
}

}  // namespace

std::optional<Value> LookupMethod(const Value& receiver, const std::string& name) {
  const std::map<std::string, Method, std::less<>>* table = receiver.IsString() ? &StrMethods()
                                                           : receiver.IsDict()   ? &DictMethods()
                                                           : receiver.IsList()   ? &ListMethods()
                                                                                 : nullptr;
  if (table == nullptr) return std::nullopt;
  if (const auto it = table->find(name); it != table->end()) {
    const Method method = it->second;
    return Value::Function(receiver.TypeName() + "." + name,
                           [receiver, method](CallArgs& args) { return method(receiver, args); });
  }
  if (!IsOtherPythonMethod(receiver, name)) return std::nullopt;
  const std::string qualified = receiver.TypeName() + "." + name;
  const bool modifies = !receiver.IsString();
  return Value::Function(qualified, [qualified, modifies](CallArgs&) -> Value {
    if (modifies) throw RenderError("access to attribute '" + qualified + "' is unsafe: templates cannot modify lists or dicts");
    throw RenderError(qualified + "() is not supported by this template engine");
  });
}

}  // namespace vllm::jinja
