// Builtin filters: jinja2's (as of 3.1) that chat templates use, with their Python
// semantics, plus transformers' `tojson` (json.dumps, ensure_ascii=False, keys in
// input order, no HTML escaping). Filters outside this set are unknown: an error.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "builtins.h"
#include "operations.h"
#include "py_format.h"
#include "py_string.h"

namespace vllm::jinja {
namespace {

// jinja2's soft_str: str(), keeping Markup as Markup.
Value SoftStr(const Value& v) { return v.IsString() ? v : Value::String(ToStr(v)); }

// Python float(str): None when the text is not a float literal.
std::optional<double> ParseFloat(const std::string& text) {
  std::string s = py::Strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool between_digits = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                                std::isdigit(static_cast<unsigned char>(s[i + 1]));
    if (s[i] == '_' && between_digits) continue;
    if (s[i] == '_' || s[i] == 'x' || s[i] == 'X' || s[i] == 'p' || s[i] == 'P') return std::nullopt;
    clean.push_back(s[i]);
  }
  if (clean.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return value;
}

// Python int(str, base) for bases 2..36 (a 0x / 0o / 0b prefix matching the base is
// allowed); None when invalid.
std::optional<Int> ParseInt(const std::string& text, int base) {
  std::string s = py::Strip(text, std::nullopt, true, true);
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char prefix = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 1])));
    const int prefix_base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 0;
    if (prefix_base != 0 && prefix_base == base) i += 2;
  }
  if (i >= s.size()) return std::nullopt;
  Int value = 0;
  bool last_underscore = true;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !last_underscore) {
      last_underscore = true;
      continue;
    }
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value)) return std::nullopt;
    last_underscore = false;
  }
  if (last_underscore) return std::nullopt;
  return negative ? -value : value;
}

std::vector<Value> Items(const Value& v) { return *Iterate(v); }

// An integer argument clamped to [lo, hi]; errors name the filter and the parameter.
Int IntParam(const Value& v, const char* filter, const char* param, Int lo, Int hi) {
  if (!v.IsInt() && !v.IsBool()) {
    throw RenderError(std::string(filter) + ": '" + param + "' must be an integer, not " + v.TypeName());
  }
  return std::clamp<Int>(v.AsInt(), lo, hi);
}

// Attribute lookup used by attribute= arguments: "a.b" and "0" address nested items.
Value LookupPath(const Value& item, const Value& attribute) {
  if (!attribute.IsString()) return GetItem(item, attribute);
  Value current = item;
  for (const std::string& part : py::Split(attribute.AsString(), std::string("."), -1)) {
    const bool numeric = !part.empty() && part.size() < 19 &&
                         std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (numeric) {
      current = GetItem(current, Value::Integer(std::stoll(part)));
    } else {
      current = GetItem(current, Value::String(part));
    }
  }
  return current;
}

// A sort of n items costs n log n comparisons (with their keys) of the work budget.
void ChargeSort(size_t n) {
  int64_t log2 = 1;
  while ((size_t{1} << log2) < n) ++log2;
  WorkBudget::Charge(static_cast<int64_t>(n) * log2 >> 2);
}

// Sort key: lowercased strings unless case-sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.IsString() ? Value::String(py::Lower(v.AsString())) : v;
}

Value Abs(const Value& input, CallArgs& args) {
  BindArgs("abs", args, {});
  if (input.IsFloat()) return Value::Float(std::fabs(input.AsFloat()));
  if (!input.IsNumber()) throw RenderError("bad operand type for abs(): '" + input.TypeName() + "'");
  return input.AsInt() < 0 ? Negate(input) : Value::Integer(input.AsInt());
}

Value Attr(const Value& input, CallArgs& args) {
  auto a = BindArgs("attr", args, {{"name"}});
  if (!a[0].IsString()) throw RenderError("attr: the attribute name must be a string");
  if (input.IsUndefined()) ThrowUndefined(input);
  if (input.IsNamespace() || input.IsLoop()) return GetAttribute(input, a[0].AsString());
  if (std::optional<Value> method = LookupMethod(input, a[0].AsString())) return *method;
  return Value::Undefined(ObjectDescription(input) + " has no attribute '" + a[0].AsString() + "'");
}

Value Capitalize(const Value& input, CallArgs& args) {
  BindArgs("capitalize", args, {});
  return Value::String(py::Capitalize(ToStr(input)), input.IsMarkup());
}

Value Default(const Value& input, CallArgs& args) {
  auto a = BindArgs("default", args, {{"default_value", Value::String("")}, {"boolean", Value::Bool(false)}});
  if (input.IsUndefined() || (a[1].Truthy() && !input.Truthy())) return a[0];
  return input;
}

Value DictSort(const Value& input, CallArgs& args) {
  auto a = BindArgs("dictsort", args, {{"case_sensitive", Value::Bool(false)}, {"by", Value::String("key")},
                                       {"reverse", Value::Bool(false)}});
  if (!input.IsDict()) throw RenderError("dictsort: expected a dict, got " + input.TypeName());
  const bool by_value = a[1].IsString() && a[1].AsString() == "value";
  if (!by_value && !(a[1].IsString() && a[1].AsString() == "key")) throw RenderError("You can only sort by either 'key' or 'value'");
  ValueList pairs;
  for (const auto& [key, value] : input.AsDict().items()) pairs.push_back(Value::Tuple({Value::String(key), value}));
  const bool case_sensitive = a[0].Truthy();
  ChargeSort(pairs.size());
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const size_t i = by_value ? 1 : 0;
    return Compare(SortKey(x.AsList()[i], case_sensitive), SortKey(y.AsList()[i], case_sensitive), "<") < 0;
  });
  if (a[2].Truthy()) std::reverse(pairs.begin(), pairs.end());
  return Value::List(std::move(pairs));
}

Value Escape(const Value& input, CallArgs& args) {
  BindArgs("escape", args, {});
  if (input.IsMarkup()) return input;
  return Value::String(py::HtmlEscape(ToStr(input)), true);
}

Value First(const Value& input, CallArgs& args) {
  BindArgs("first", args, {});
  const auto items = Iterate(input);
  return items->empty() ? Value::Undefined("No first item, sequence was empty.") : items->front();
}

Value Last(const Value& input, CallArgs& args) {
  BindArgs("last", args, {});
  if (!input.IsString() && !input.IsList() && !input.IsDict() && !input.IsUndefined()) {
    throw RenderError("'" + input.TypeName() + "' object is not reversible");
  }
  const auto items = Iterate(input);
  return items->empty() ? Value::Undefined("No last item, sequence was empty.") : items->back();
}

Value ToFloat(const Value& input, CallArgs& args) {
  auto a = BindArgs("float", args, {{"default", Value::Float(0.0)}});
  if (input.IsNumber()) return Value::Float(input.AsFloat());
  if (input.IsString()) {
    if (std::optional<double> parsed = ParseFloat(input.AsString())) return Value::Float(*parsed);
  }
  return a[0];
}

Value ToInt(const Value& input, CallArgs& args) {
  auto a = BindArgs("int", args, {{"default", Value::Integer(0)}, {"base", Value::Integer(10)}});
  if (input.IsInt() || input.IsBool()) return Value::Integer(input.AsInt());
  std::optional<double> as_float;
  if (input.IsFloat()) as_float = input.AsFloat();
  if (input.IsString()) {
    const int base = a[1].IsInt() ? static_cast<int>(a[1].AsInt()) : 10;
    if (base >= 2 && base <= 36) {
      if (std::optional<Int> parsed = ParseInt(input.AsString(), base)) return Value::Integer(*parsed);
    }
    as_float = ParseFloat(input.AsString());
  }
  if (!as_float || std::isnan(*as_float)) return a[0];
  if (std::isinf(*as_float)) throw RenderError("cannot convert float infinity to integer");
  if (std::fabs(*as_float) >= 1e38) throw RenderError("integer overflow (results beyond 128 bits are not supported)");
  return Value::Integer(static_cast<Int>(std::trunc(*as_float)));
}

Value Format(const Value& input, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    throw RenderError("format: can't handle positional and keyword arguments at the same time");
  }
  Value params;
  if (!args.keyword.empty()) {
    ValueDict dict;
    for (auto& [k, v] : args.keyword) dict.Set(k, v);
    params = Value::Dict(std::move(dict));
  } else {
    params = Value::Tuple(args.positional);
  }
  return Value::String(PercentFormat(ToStr(input), params), input.IsMarkup());
}

Value Indent(const Value& input, CallArgs& args) {
  auto a = BindArgs("indent", args, {{"width", Value::Integer(4)}, {"first", Value::Bool(false)}, {"blank", Value::Bool(false)}});
  const std::string indention =
      a[0].IsString() ? a[0].AsString() : std::string(static_cast<size_t>(IntParam(a[0], "indent", "width", 0, 4096)), ' ');
  const std::string text = ToStr(input);
  if (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) > kMaxListItems) throw RenderError("indent: too many lines");
  const std::vector<std::string> lines = py::SplitLines(text + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent_line = i > 0 && (a[2].Truthy() || !lines[i].empty());
    out += (indent_line ? indention : "") + lines[i];
    CheckBuiltSize(out, "indent");
  }
  if (a[1].Truthy()) out = indention + out;
  return Value::String(std::move(out), input.IsMarkup());
}

Value ItemsFilter(const Value& input, CallArgs& args) {
  BindArgs("items", args, {});
  if (input.IsUndefined()) return Value::List({});
  if (!input.IsDict()) throw RenderError("Can only get item pairs from a mapping.");
  return ItemPairs(input.AsDict());
}

Value Join(const Value& input, CallArgs& args) {
  auto a = BindArgs("join", args, {{"d", Value::String("")}, {"attribute", Value::None()}});
  std::string out;
  const auto items = Iterate(input);
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) out += ToStr(a[0]);
    out += ToStr(a[1].IsNone() ? (*items)[i] : LookupPath((*items)[i], a[1]));
    CheckBuiltSize(out, "join");
  }
  return Value::String(std::move(out));
}

Value LengthFilter(const Value& input, CallArgs& args) {
  BindArgs("length", args, {});
  return Value::Integer(static_cast<Int>(Length(input)));
}

Value ListFilter(const Value& input, CallArgs& args) {
  BindArgs("list", args, {});
  return Value::List(Items(input));
}

Value Lower(const Value& input, CallArgs& args) {
  BindArgs("lower", args, {});
  return Value::String(py::Lower(ToStr(input)), input.IsMarkup());
}

Value Upper(const Value& input, CallArgs& args) {
  BindArgs("upper", args, {});
  return Value::String(py::Upper(ToStr(input)), input.IsMarkup());
}

Value Title(const Value& input, CallArgs& args) {
  BindArgs("title", args, {});
  return Value::String(py::Title(ToStr(input)), input.IsMarkup());
}

Value Map(const Value& input, CallArgs& args) {
  ValueList out;
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [name, value] : args.keyword) {
    if (name == "attribute") attribute = &value;
    else if (name == "default") fallback = &value;
  }
  if (attribute != nullptr) {
    for (const Value& item : Items(input)) {
      Value v = LookupPath(item, *attribute);
      out.push_back(v.IsUndefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].IsString()) throw RenderError("map: expected a filter name or attribute=");
  const std::string name = args.positional[0].AsString();
  const FilterFunction filter = FindFilter(name);
  if (filter == nullptr) throw RenderError("no filter named '" + name + "'");
  for (const Value& item : Items(input)) {
    CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
    out.push_back(filter(item, rest));
  }
  return Value::List(std::move(out));
}

template <bool kMax>
Value MinMax(const Value& input, CallArgs& args) {
  auto a = BindArgs(kMax ? "max" : "min", args, {{"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}});
  const auto items = Items(input);
  WorkBudget::Charge(static_cast<int64_t>(items.size() >> 2));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& v) { return SortKey(a[1].IsNone() ? v : LookupPath(v, a[1]), a[0].Truthy()); };
  const Value* best = &items[0];
  for (const Value& item : items) {
    const int c = Compare(key(item), key(*best), kMax ? ">" : "<");
    if (kMax ? c > 0 : c < 0) best = &item;
  }
  return *best;
}

Value Replace(const Value& input, CallArgs& args) {
  auto a = BindArgs("replace", args, {{"old"}, {"new"}, {"count", Value::None()}});
  const int64_t count = a[2].IsNone() ? -1 : static_cast<int64_t>(IntParam(a[2], "replace", "count", -1, Int(1) << 62));
  return Value::String(ReplaceChecked(ToStr(input), ToStr(a[0]), ToStr(a[1]), count), input.IsMarkup());
}

Value Reverse(const Value& input, CallArgs& args) {
  BindArgs("reverse", args, {});
  if (input.IsString()) {
    std::u32string cps = py::DecodeUtf8(input.AsString());
    std::reverse(cps.begin(), cps.end());
    return Value::String(py::EncodeUtf8(cps), input.IsMarkup());
  }
  ValueList items = Items(input);
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Value Round(const Value& input, CallArgs& args) {
  auto a = BindArgs("round", args, {{"precision", Value::Integer(0)}, {"method", Value::String("common")}});
  if (!input.IsNumber()) throw RenderError("round: expected a number, got " + input.TypeName());
  const int precision = static_cast<int>(IntParam(a[0], "round", "precision", -300, 300));
  const std::string method = ToStr(a[1]);
  const double value = input.AsFloat();
  if (method == "common") {
    if (input.IsInt() || input.IsBool()) return Value::Integer(input.AsInt());  // round(int, n) stays an int
    if (!std::isfinite(value) || precision < 0) return Value::Float(value);
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", std::min(precision, 300), value);
    return Value::Float(std::strtod(buffer, nullptr));
  }
  if (method != "ceil" && method != "floor") throw RenderError("method must be 'common', 'ceil' or 'floor'");
  const double scale = std::pow(10.0, precision);
  return Value::Float((method == "ceil" ? std::ceil(value * scale) : std::floor(value * scale)) / scale);
}

Value Safe(const Value& input, CallArgs& args) {
  BindArgs("safe", args, {});
  return Value::String(ToStr(input), true);
}

// select / reject / selectattr / rejectattr: keep items whose test (or truthiness) matches.
Value SelectOrReject(const Value& input, CallArgs& args, bool select, bool by_attribute) {
  std::vector<Value>& positional = args.positional;
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (positional.empty()) throw RenderError("selectattr/rejectattr: missing attribute");
    attribute = positional[next++];
  }
  TestFunction test = nullptr;
  if (next < positional.size()) {
    const std::string name = ToStr(positional[next++]);
    test = FindTest(name);
    if (test == nullptr) throw RenderError("no test named '" + name + "'");
  }
  ValueList out;
  for (const Value& item : Items(input)) {
    const Value subject = by_attribute ? LookupPath(item, attribute) : item;
    CallArgs test_args{std::vector<Value>(positional.begin() + static_cast<std::ptrdiff_t>(next), positional.end()), args.keyword};
    const bool passed = test != nullptr ? test(subject, test_args) : subject.Truthy();
    if (passed == select) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value Select(const Value& input, CallArgs& args) { return SelectOrReject(input, args, true, false); }
Value Reject(const Value& input, CallArgs& args) { return SelectOrReject(input, args, false, false); }
Value SelectAttr(const Value& input, CallArgs& args) { return SelectOrReject(input, args, true, true); }
Value RejectAttr(const Value& input, CallArgs& args) { return SelectOrReject(input, args, false, true); }

Value Sort(const Value& input, CallArgs& args) {
  auto a = BindArgs("sort", args, {{"reverse", Value::Bool(false)}, {"case_sensitive", Value::Bool(false)},
                                   {"attribute", Value::None()}});
  ValueList items = Items(input);
  ChargeSort(items.size());
  auto key = [&](const Value& v) { return SortKey(a[2].IsNone() ? v : LookupPath(v, a[2]), a[1].Truthy()); };
  const bool descending = a[0].Truthy();
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return descending ? Compare(key(y), key(x), "<") < 0 : Compare(key(x), key(y), "<") < 0;
  });
  return Value::List(std::move(items));
}

Value String(const Value& input, CallArgs& args) {
  BindArgs("string", args, {});
  return SoftStr(input);
}

Value Sum(const Value& input, CallArgs& args) {
  auto a = BindArgs("sum", args, {{"attribute", Value::None()}, {"start", Value::Integer(0)}});
  Value total = a[1];
  for (const Value& item : Items(input)) total = BinaryOperation(BinaryOp::kAdd, total, a[0].IsNone() ? item : LookupPath(item, a[0]));
  return total;
}

Value ToJson(const Value& input, CallArgs& args) {
  auto a = BindArgs("tojson", args, {{"ensure_ascii", Value::Bool(false)}, {"indent", Value::None()},
                                     {"separators", Value::None()}, {"sort_keys", Value::Bool(false)}});
  JsonDumpOptions options;
  options.ensure_ascii = a[0].Truthy();
  if (a[1].IsString()) options.indent = a[1].AsString();
  else if (a[1].IsInt()) options.indent = std::string(static_cast<size_t>(std::clamp<Int>(a[1].AsInt(), 0, 4096)), ' ');
  else if (!a[1].IsNone()) throw RenderError("tojson: indent must be an int, a str or None");
  if (!a[2].IsNone()) {
    if (!a[2].IsList() || a[2].AsList().size() != 2 || !a[2].AsList()[0].IsString() || !a[2].AsList()[1].IsString()) {
      throw RenderError("tojson: separators must be a pair of strings");
    }
    options.separators = std::make_pair(a[2].AsList()[0].AsString(), a[2].AsList()[1].AsString());
  }
  options.sort_keys = a[3].Truthy();
  return Value::String(JsonDumps(input, options));
}

Value Trim(const Value& input, CallArgs& args) {
  auto a = BindArgs("trim", args, {{"chars", Value::None()}});
  const std::optional<std::string> chars = a[0].IsNone() ? std::nullopt : std::optional<std::string>(ToStr(a[0]));
  return Value::String(py::Strip(ToStr(input), chars, true, true), input.IsMarkup());
}

// The key Python's set() would hash for a value: equal numbers (1, 1.0, True) share
// one; lists and dicts are unhashable.
std::string HashKey(const Value& v) {
  if (v.IsList() && !v.IsTuple()) throw RenderError("unhashable type: 'list'");
  if (v.IsDict() || v.IsNamespace()) throw RenderError("unhashable type: '" + v.TypeName() + "'");
  if (v.IsNumber()) {
    const double d = v.AsFloat();
    if (v.IsFloat() && d != std::trunc(d)) return "n" + FloatRepr(d);
    if (v.IsFloat() && std::fabs(d) < 1e38) return "n" + IntToString(static_cast<Int>(d));
    return v.IsFloat() ? "n" + FloatRepr(d) : "n" + IntToString(v.AsInt());
  }
  return (v.IsString() ? "s" : "o") + Repr(v);
}

Value Unique(const Value& input, CallArgs& args) {
  auto a = BindArgs("unique", args, {{"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}});
  ValueList out;
  std::set<std::string> seen;
  for (const Value& item : Items(input)) {
    const Value key = SortKey(a[1].IsNone() ? item : LookupPath(item, a[1]), a[0].Truthy());
    if (seen.insert(HashKey(key)).second) out.push_back(item);
  }
  return Value::List(std::move(out));
}

const std::map<std::string, FilterFunction, std::less<>>& Filters() {
  static const std::map<std::string, FilterFunction, std::less<>> filters = {
      {"abs", Abs}, {"attr", Attr}, {"capitalize", Capitalize}, {"count", LengthFilter}, {"d", Default},
      {"default", Default}, {"dictsort", DictSort}, {"e", Escape}, {"escape", Escape}, {"first", First},
      {"float", ToFloat}, {"format", Format}, {"indent", Indent}, {"int", ToInt}, {"items", ItemsFilter},
      {"join", Join}, {"last", Last}, {"length", LengthFilter}, {"list", ListFilter}, {"lower", Lower},
      {"map", Map}, {"max", MinMax<true>}, {"min", MinMax<false>}, {"reject", Reject}, {"rejectattr", RejectAttr},
      {"replace", Replace}, {"reverse", Reverse}, {"round", Round}, {"safe", Safe}, {"select", Select},
      {"selectattr", SelectAttr}, {"sort", Sort}, {"string", String}, {"sum", Sum}, {"title", Title},
      {"tojson", ToJson}, {"trim", Trim}, {"unique", Unique}, {"upper", Upper},
  };
  return filters;
}

}  // namespace

FilterFunction FindFilter(std::string_view name) {
  const auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : it->second;
}

}  // namespace vllm::jinja
