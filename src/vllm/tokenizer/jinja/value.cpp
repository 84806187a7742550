#include "value.h"

#include <algorithm>

#include "py_format.h"
#include "py_string.h"

namespace vllm::jinja {

namespace {
thread_local WorkBudget* active_budget = nullptr;
}  // namespace

WorkBudget::WorkBudget(int64_t max_units) : max_units_(max_units), previous_(active_budget) { active_budget = this; }

WorkBudget::~WorkBudget() { active_budget = previous_; }

void WorkBudget::Charge(int64_t units) {
  WorkBudget* budget = active_budget;
  if (budget == nullptr || units == 0) return;
  budget->used_ += units;
  if (budget->used_ > budget->max_units_) {
    throw RenderError("render exceeded " + std::to_string(budget->max_units_) +
                      " evaluation steps (runaway template?)");
  }
}

size_t ValueDict::Position(std::string_view key) const {
  if (!index_.empty()) {
    const auto it = index_.find(std::string(key));
    return it == index_.end() ? items_.size() : it->second;
  }
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].first == key) return i;
  }
  return items_.size();
}

const Value* ValueDict::Find(std::string_view key) const {
  const size_t i = Position(key);
  return i < items_.size() ? &items_[i].second : nullptr;
}

size_t ValueDict::size() const { return items_.size(); }

void ValueDict::Set(std::string key, Value value) {
  if (const size_t i = Position(key); i < items_.size()) {
    items_[i].second = std::move(value);
    return;
  }
  items_.emplace_back(std::move(key), std::move(value));
  if (!index_.empty()) {
    index_.emplace(items_.back().first, items_.size() - 1);
  } else if (items_.size() >= kIndexedSize) {
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  }
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}

Value Value::Integer(Int i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}

// Building values charges their size: a byte of text or an item costs a fraction of
// an evaluation step.
Value Value::String(std::string s, bool markup) {
  WorkBudget::Charge(static_cast<int64_t>(s.size() >> 6));
  Value v;
  v.kind_ = Kind::kString;
  v.markup_ = markup;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(ValueList items) {
  WorkBudget::Charge(static_cast<int64_t>(items.size() >> 4));
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::Dict(ValueDict dict) {
  WorkBudget::Charge(static_cast<int64_t>(dict.size() >> 4));
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<const ValueDict>(std::move(dict));
  return v;
}

Value Value::NewNamespace(ValueDict attributes) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<Namespace>(Namespace{std::move(attributes)});
  return v;
}

Value Value::Loop(LoopInfo info) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.data_ = std::make_shared<const LoopInfo>(std::move(info));
  return v;
}

Value Value::Function(std::string name, NativeFunction call) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

Int Value::AsInt() const { return IsBool() ? Int(AsBool()) : std::get<Int>(data_); }

double Value::AsFloat() const {
  if (IsFloat()) return std::get<double>(data_);
  return static_cast<double>(AsInt());
}

std::string Value::UndefinedHint() const {
  const auto* hint = std::get_if<StringPtr>(&data_);
  if (hint == nullptr || (*hint)->empty()) return "undefined value";
  return **hint;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return AsBool();
    case Kind::kInt: return AsInt() != 0;
    case Kind::kFloat: return AsFloat() != 0.0;
    case Kind::kString: return !AsString().empty();
    case Kind::kList: return !AsList().empty();
    case Kind::kDict: return AsDict().size() != 0;
    case Kind::kNamespace:
    case Kind::kLoop:
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return markup_ ? "Markup" : "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kLoop: return "LoopContext";
    case Kind::kCallable: return "function";
  }
  return "object";
}

bool Value::SameAs(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool: return AsBool() == other.AsBool();
    case Kind::kInt: return AsInt() == other.AsInt();
    case Kind::kFloat: return AsFloat() == other.AsFloat();
    default: return data_ == other.data_;
  }
}

std::string IntToString(Int i) {
  if (i == 0) return "0";
  const bool negative = i < 0;
  // Work on the negative value: it also holds the most negative Int.
  Int n = negative ? i : -i;
  std::string digits;
  while (n != 0) {
    digits.push_back(static_cast<char>('0' - static_cast<int>(n % 10)));
    n /= 10;
  }
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

// repr() of everything but containers and namespaces.
std::string ScalarRepr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return value.AsBool() ? "True" : "False";
    case Value::Kind::kInt: return IntToString(value.AsInt());
    case Value::Kind::kFloat: return FloatRepr(value.AsFloat());
    case Value::Kind::kString:
      return value.IsMarkup() ? "Markup(" + py::Repr(value.AsString()) + ")" : py::Repr(value.AsString());
    case Value::Kind::kLoop: {
      const LoopInfo& loop = value.AsLoop();
      return "<LoopContext " + std::to_string(loop.index0 + 1) + "/" + std::to_string(loop.items->size()) + ">";
    }
    case Value::Kind::kCallable: return "<function " + value.AsCallable().name + ">";
    default: return "";
  }
}

namespace {

void CheckTextSize(const std::string& out, size_t max_bytes) {
  if (out.size() > max_bytes) {
    throw RenderError("the text of a value exceeds " + std::to_string(max_bytes) + " bytes");
  }
}

// repr() appended to `out`, refusing to grow it past max_bytes (a huge list prints
// no faster than the limit allows).
void AppendRepr(const Value& value, std::string& out, size_t max_bytes) {
  switch (value.kind()) {
    case Value::Kind::kList: {
      const ValueList& items = value.AsList();
      out += value.IsTuple() ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        AppendRepr(items[i], out, max_bytes);
        CheckTextSize(out, max_bytes);
      }
      out += value.IsTuple() ? (items.size() == 1 ? ",)" : ")") : "]";
      return;
    }
    case Value::Kind::kDict: {
      out += "{";
      bool first = true;
      for (const auto& [k, v] : value.AsDict().items()) {
        out += (first ? "" : ", ") + py::Repr(k) + ": ";
        AppendRepr(v, out, max_bytes);
        CheckTextSize(out, max_bytes);
        first = false;
      }
      out += "}";
      return;
    }
    case Value::Kind::kNamespace: {
      // A namespace can hold itself (set ns.me = ns): print the inner one as {...}, as Python does.
      thread_local std::vector<const Namespace*> in_progress;
      const Namespace* ns = &value.AsNamespace();
      if (std::find(in_progress.begin(), in_progress.end(), ns) != in_progress.end()) {
        out += "<Namespace {...}>";
        return;
      }
      in_progress.push_back(ns);
      out += "<Namespace ";
      try {
        AppendRepr(Value::Dict(ns->attributes), out, max_bytes);
      } catch (...) {
        in_progress.pop_back();
        throw;
      }
      in_progress.pop_back();
      out += ">";
      return;
    }
    default: out += ScalarRepr(value);
  }
}

}  // namespace

std::string Repr(const Value& value, size_t max_bytes) {
  std::string out;
  AppendRepr(value, out, max_bytes);
  CheckTextSize(out, max_bytes);
  return out;
}

std::string ToStr(const Value& value, size_t max_bytes) {
  if (value.IsUndefined()) return "";
  if (value.IsString()) return value.AsString();
  return Repr(value, max_bytes);
}

bool Equals(const Value& a, const Value& b) {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsFloat() || b.IsFloat()) return a.AsFloat() == b.AsFloat();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.AsString() == b.AsString();
    case Value::Kind::kList:
      if (a.IsTuple() != b.IsTuple()) return false;
      WorkBudget::Charge(static_cast<int64_t>(a.AsList().size() >> 4));
      return std::equal(a.AsList().begin(), a.AsList().end(), b.AsList().begin(), b.AsList().end(), Equals);
    case Value::Kind::kDict: {
      if (a.AsDict().size() != b.AsDict().size()) return false;
      WorkBudget::Charge(static_cast<int64_t>(a.AsDict().size() >> 2));
      for (const auto& [k, v] : a.AsDict().items()) {
        const Value* other = b.AsDict().Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    }
    default: return a.SameAs(b);
  }
}

int Compare(const Value& a, const Value& b, std::string_view op) {
  if (a.IsUndefined()) ThrowUndefined(a);
  if (b.IsUndefined()) ThrowUndefined(b);
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsFloat() || b.IsFloat()) {
      const double x = a.AsFloat(), y = b.AsFloat();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const Int x = a.AsInt(), y = b.AsInt();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.IsString() && b.IsString()) {
    const int c = a.AsString().compare(b.AsString());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.IsList() && b.IsList() && a.IsTuple() == b.IsTuple()) {
    const ValueList& x = a.AsList();
    const ValueList& y = b.AsList();
    WorkBudget::Charge(static_cast<int64_t>(std::min(x.size(), y.size()) >> 4));
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw RenderError("'" + std::string(op) + "' not supported between instances of '" + a.TypeName() + "' and '" +
                    b.TypeName() + "'");
}

std::string ObjectDescription(const Value& value) {
  if (value.IsNone()) return "'None'";
  return "'" + value.TypeName() + " object'";
}

void ThrowUndefined(const Value& undefined) { throw RenderError(undefined.UndefinedHint()); }

}  // namespace vllm::jinja
