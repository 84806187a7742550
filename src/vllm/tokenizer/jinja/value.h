// The values a Jinja template computes with, modelled on the Python objects jinja2
// sees when transformers renders a chat template: None, bool, int, float, str (with
// markupsafe's Markup flag), list, dict (insertion-ordered, string keys), jinja2's
// Undefined, namespace(), the `loop` object and callables (globals, macros, bound
// methods). Containers are shared and immutable, as in jinja2's immutable sandbox;
// only a namespace's attributes can change, and every copy sees the change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace vllm::jinja {

// Python ints are unbounded; 128 bits hold every integer JSON input can carry
// (nlohmann reads at most uint64) and arithmetic checks for overflow.
using Int = __int128;

class Value;
using ValueList = std::vector<Value>;

// A Python dict restricted to string keys, keeping insertion order. Small dicts are
// searched in order; from kIndexedSize entries on, a hash index keeps lookups O(1)
// (JSON input may carry objects with very many keys).
class ValueDict {
 public:
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);  // replaces in place, or appends
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const;

 private:
  static constexpr size_t kIndexedSize = 16;
  size_t Position(std::string_view key) const;  // items_.size() when absent
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, size_t> index_;  // key -> position in items_, when indexed
};

// Arguments of a call, after evaluation: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Value(CallArgs&)>;

struct Callable {
  std::string name;
  NativeFunction call;
};

struct Namespace {
  ValueDict attributes;
};

// The state behind `loop` in one iteration of a for loop.
struct LoopInfo {
  std::shared_ptr<const ValueList> items;
  size_t index0 = 0;
  int64_t depth0 = 0;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kLoop, kCallable
  };

  Value() = default;  // Undefined
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Integer(Int i);
  static Value Float(double d);
  static Value String(std::string s, bool markup = false);
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  static Value Dict(ValueDict dict);
  static Value NewNamespace(ValueDict attributes);
  static Value Loop(LoopInfo info);
  static Value Function(std::string name, NativeFunction call);

  Kind kind() const { return kind_; }
  bool IsUndefined() const { return kind_ == Kind::kUndefined; }
  bool IsNone() const { return kind_ == Kind::kNone; }
  bool IsBool() const { return kind_ == Kind::kBool; }
  bool IsInt() const { return kind_ == Kind::kInt; }
  bool IsFloat() const { return kind_ == Kind::kFloat; }
  bool IsString() const { return kind_ == Kind::kString; }
  // Lists and tuples share a kind; a tuple prints as (a, b) and never equals a list.
  bool IsList() const { return kind_ == Kind::kList; }
  bool IsTuple() const { return kind_ == Kind::kList && tuple_; }
  bool IsDict() const { return kind_ == Kind::kDict; }
  bool IsNamespace() const { return kind_ == Kind::kNamespace; }
  bool IsLoop() const { return kind_ == Kind::kLoop; }
  bool IsCallable() const { return kind_ == Kind::kCallable; }
  // Python's numbers.Number: bool, int and float.
  bool IsNumber() const { return IsBool() || IsInt() || IsFloat(); }
  // A str that went through `safe` or `escape` (markupsafe.Markup).
  bool IsMarkup() const { return IsString() && markup_; }

  bool AsBool() const { return std::get<bool>(data_); }
  Int AsInt() const;        // bool or int
  double AsFloat() const;   // bool, int or float
  const std::string& AsString() const { return *std::get<StringPtr>(data_); }
  const ValueList& AsList() const { return *std::get<ListPtr>(data_); }
  std::shared_ptr<const ValueList> SharedList() const { return std::get<ListPtr>(data_); }
  const ValueDict& AsDict() const { return *std::get<DictPtr>(data_); }
  Namespace& AsNamespace() const { return *std::get<NamespacePtr>(data_); }
  std::shared_ptr<Namespace> SharedNamespace() const { return std::get<NamespacePtr>(data_); }
  const LoopInfo& AsLoop() const { return *std::get<LoopPtr>(data_); }
  const Callable& AsCallable() const { return *std::get<CallablePtr>(data_); }
  // What was undefined, as jinja2 words it ("'x' is undefined").
  std::string UndefinedHint() const;

  // Python truthiness (Undefined is falsy).
  bool Truthy() const;
  // The Python type name used in error messages: 'str', 'int', 'NoneType', ...
  std::string TypeName() const;
  // True when both values are the same object (Python `is`).
  bool SameAs(const Value& other) const;

 private:
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ValueList>;
  using DictPtr = std::shared_ptr<const ValueDict>;
  using NamespacePtr = std::shared_ptr<Namespace>;
  using LoopPtr = std::shared_ptr<const LoopInfo>;
  using CallablePtr = std::shared_ptr<const Callable>;

  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  bool tuple_ = false;
  std::variant<std::monostate, bool, Int, double, StringPtr, ListPtr, DictPtr, NamespacePtr, LoopPtr, CallablePtr>
      data_;
};

// An error while rendering (a Python exception in jinja2). The renderer adds the
// template line before it reaches the caller.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The work limit of a render. The renderer counts one unit per node it evaluates, and
// bulk work inside one node is charged to the same count: building a long string or
// list, searching or comparing long lists, sorting. So the limit bounds the time of a
// render whatever the template does. A render opens a WorkBudget on its thread for its
// duration; outside one (converting JSON input, say) nothing is counted.
class WorkBudget {
 public:
  explicit WorkBudget(int64_t max_units);
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;

  // Adds `units` to the budget open on this thread; throws RenderError past its limit.
  static void Charge(int64_t units);

 private:
  int64_t used_ = 0;
  int64_t max_units_;
  WorkBudget* previous_;
};

// raise_exception(message) called by the template.
class TemplateRaised : public RenderError {
 public:
  using RenderError::RenderError;
};

// Strings and the text of values longer than this are refused (a template cannot
// make one value exhaust memory; rendered prompts are far smaller).
inline constexpr size_t kMaxValueSize = size_t{1} << 26;

// str(value) as Python prints it; Undefined prints as "". Throws RenderError when the
// text would exceed max_bytes.
std::string ToStr(const Value& value, size_t max_bytes = kMaxValueSize);
// repr(value).
std::string Repr(const Value& value, size_t max_bytes = kMaxValueSize);
// Python ==.
bool Equals(const Value& a, const Value& b);
// Python ordering (<, <=, >, >=): negative, zero or positive. Throws RenderError for
// types Python refuses to order ("'<' not supported between instances of ...").
int Compare(const Value& a, const Value& b, std::string_view op);
// "'dict object'", "'None'": how jinja2 names an object in undefined-attribute messages.
std::string ObjectDescription(const Value& value);
// Throws RenderError with the Undefined's hint (jinja2's UndefinedError).
[[noreturn]] void ThrowUndefined(const Value& undefined);
// Decimal text of an Int.
std::string IntToString(Int i);

}  // namespace vllm::jinja
