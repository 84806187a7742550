#include "operations.h"

#include <cmath>

#include "py_format.h"
#include "py_string.h"

namespace vllm::jinja {
namespace {

Value MissingAttribute(const Value& object, const std::string& name) {
  return Value::Undefined(ObjectDescription(object) + " has no attribute '" + name + "'");
}

Value MissingElement(const Value& object, const Value& key) {
  return Value::Undefined(ObjectDescription(object) + " has no element " + Repr(key));
}

Value LoopAttribute(const Value& loop_value, const std::string& name) {
  const LoopInfo& loop = loop_value.AsLoop();
  const ValueList& items = *loop.items;
  const auto index0 = static_cast<Int>(loop.index0);
  const auto length = static_cast<Int>(items.size());
  if (name == "index0") return Value::Integer(index0);
  if (name == "index") return Value::Integer(index0 + 1);
  if (name == "revindex0") return Value::Integer(length - index0 - 1);
  if (name == "revindex") return Value::Integer(length - index0);
  if (name == "first") return Value::Bool(index0 == 0);
  if (name == "last") return Value::Bool(index0 + 1 == length);
  if (name == "length") return Value::Integer(length);
  if (name == "depth0") return Value::Integer(loop.depth0);
  if (name == "depth") return Value::Integer(loop.depth0 + 1);
  if (name == "previtem") {
    return loop.index0 > 0 ? items[loop.index0 - 1] : Value::Undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return loop.index0 + 1 < items.size() ? items[loop.index0 + 1] : Value::Undefined("there is no next item");
  }
  if (name == "cycle") {
    const size_t index = loop.index0;
    return Value::Function("loop.cycle", [index](CallArgs& args) {
      if (args.positional.empty()) throw RenderError("no items for cycling given");
      return args.positional[index % args.positional.size()];
    });
  }
  return MissingAttribute(loop_value, name);
}

// Python's slice.indices(): normalized start, stop and step for a sequence of `length`.
struct SliceRange {
  int64_t start, stop, step;
};

int64_t SliceBound(const Value& bound, const char* what) {
  if (!bound.IsInt() && !bound.IsBool()) {
    throw RenderError(std::string("slice ") + what + " must be an integer or None, not " + bound.TypeName());
  }
  const Int v = bound.AsInt();
  const Int limit = Int(1) << 62;
  return static_cast<int64_t>(v > limit ? limit : v < -limit ? -limit : v);
}

SliceRange NormalizeSlice(const Value& start, const Value& stop, const Value& step, int64_t length) {
  SliceRange r{0, 0, step.IsNone() ? 1 : SliceBound(step, "step")};
  if (r.step == 0) throw RenderError("slice step cannot be zero");
  const int64_t lower = r.step > 0 ? 0 : -1;
  const int64_t upper = r.step > 0 ? length : length - 1;
  auto adjust = [&](const Value& bound, int64_t fallback, const char* what) {
    if (bound.IsNone()) return fallback;
    int64_t v = SliceBound(bound, what);
    if (v < 0) v = std::max(v + length, lower);
    return std::min(v, upper);
  };
  r.start = adjust(start, r.step > 0 ? lower : upper, "start");
  r.stop = adjust(stop, r.step > 0 ? upper : lower, "stop");
  return r;
}

template <typename Visit>
void ForEachSliceIndex(const SliceRange& r, Visit visit) {
  for (int64_t i = r.start; r.step > 0 ? i < r.stop : i > r.stop; i += r.step) visit(static_cast<size_t>(i));
}

[[noreturn]] void UnsupportedOperands(std::string_view op, const Value& lhs, const Value& rhs) {
  throw RenderError("unsupported operand type(s) for " + std::string(op) + ": '" + lhs.TypeName() + "' and '" +
                    rhs.TypeName() + "'");
}

[[noreturn]] void ThrowOverflow() { throw RenderError("integer overflow (results beyond 128 bits are not supported)"); }

Int CheckedAdd(Int a, Int b) {
  Int out;
  if (__builtin_add_overflow(a, b, &out)) ThrowOverflow();
  return out;
}

Int CheckedSub(Int a, Int b) {
  Int out;
  if (__builtin_sub_overflow(a, b, &out)) ThrowOverflow();
  return out;
}

Int CheckedMul(Int a, Int b) {
  Int out;
  if (__builtin_mul_overflow(a, b, &out)) ThrowOverflow();
  return out;
}

Value Repeat(const Value& sequence, Int times) {
  const size_t count = times < 0 ? 0 : static_cast<size_t>(std::min<Int>(times, Int(kMaxValueSize) + 1));
  if (count == 0) return sequence.IsString() ? Value::String("", sequence.IsMarkup())
                                             : sequence.IsTuple() ? Value::Tuple({}) : Value::List({});
  if (sequence.IsString()) {
    const std::string& s = sequence.AsString();
    if (!s.empty() && count > kMaxValueSize / s.size()) throw RenderError("string repetition result too large");
    std::string out;
    out.reserve(s.size() * count);
    for (size_t i = 0; i < count; ++i) out += s;
    return Value::String(std::move(out), sequence.IsMarkup());
  }
  const ValueList& items = sequence.AsList();
  if (!items.empty() && count > kMaxListItems / items.size()) throw RenderError("list repetition result too large");
  ValueList out;
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return sequence.IsTuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

bool BothIntegral(const Value& a, const Value& b) {
  return (a.IsInt() || a.IsBool()) && (b.IsInt() || b.IsBool());
}

Value Add(const Value& lhs, const Value& rhs) {
  if (BothIntegral(lhs, rhs)) {
    return Value::Integer(CheckedAdd(lhs.AsInt(), rhs.AsInt()));
  }
  if (lhs.IsNumber() && rhs.IsNumber()) return Value::Float(lhs.AsFloat() + rhs.AsFloat());
  if (lhs.IsString() && rhs.IsString()) {
    // markupsafe: Markup + str escapes the plain side and stays Markup.
    const bool markup = lhs.IsMarkup() || rhs.IsMarkup();
    const std::string left = markup && !lhs.IsMarkup() ? py::HtmlEscape(lhs.AsString()) : lhs.AsString();
    const std::string right = markup && !rhs.IsMarkup() ? py::HtmlEscape(rhs.AsString()) : rhs.AsString();
    if (left.size() + right.size() > kMaxValueSize) throw RenderError("string concatenation result too large");
    return Value::String(left + right, markup);
  }
  if (lhs.IsList() && rhs.IsList() && lhs.IsTuple() == rhs.IsTuple()) {
    if (lhs.AsList().size() + rhs.AsList().size() > kMaxListItems) throw RenderError("list concatenation result too large");
    ValueList out = lhs.AsList();
    out.insert(out.end(), rhs.AsList().begin(), rhs.AsList().end());
    return lhs.IsTuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  if (lhs.IsString()) throw RenderError("can only concatenate str (not \"" + rhs.TypeName() + "\") to str");
  if (lhs.IsList() && !lhs.IsTuple()) throw RenderError("can only concatenate list (not \"" + rhs.TypeName() + "\") to list");
  UnsupportedOperands("+", lhs, rhs);
}

Value FloorDivide(const Value& lhs, const Value& rhs) {
  if (BothIntegral(lhs, rhs)) {
    const Int a = lhs.AsInt(), b = rhs.AsInt();
    if (b == 0) throw RenderError("integer division or modulo by zero");
    if (b == -1) return Value::Integer(CheckedSub(0, a));
    Int q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return Value::Integer(q);
  }
  // CPython's float_floor_div.
  const double a = lhs.AsFloat(), b = rhs.AsFloat();
  if (b == 0.0) throw RenderError("float floor division by zero");
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return Value::Float(std::copysign(0.0, a / b));
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return Value::Float(floored);
}

Value Modulo(const Value& lhs, const Value& rhs) {
  if (lhs.IsString()) return Value::String(PercentFormat(lhs.AsString(), rhs), lhs.IsMarkup());
  if (!lhs.IsNumber() || !rhs.IsNumber()) UnsupportedOperands("%", lhs, rhs);
  if (BothIntegral(lhs, rhs)) {
    const Int a = lhs.AsInt(), b = rhs.AsInt();
    if (b == 0) throw RenderError("integer modulo by zero");
    if (b == -1) return Value::Integer(0);
    Int m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return Value::Integer(m);
  }
  const double a = lhs.AsFloat(), b = rhs.AsFloat();
  if (b == 0.0) throw RenderError("float modulo");
  double m = std::fmod(a, b);
  if (m != 0.0 && ((m < 0) != (b < 0))) m += b;
  if (m == 0.0) m = std::copysign(0.0, b);
  return Value::Float(m);
}

Value Power(const Value& lhs, const Value& rhs) {
  if (!lhs.IsNumber() || !rhs.IsNumber()) UnsupportedOperands("** or pow()", lhs, rhs);
  if (BothIntegral(lhs, rhs) && rhs.AsInt() >= 0) {
    Int base = lhs.AsInt(), exponent = rhs.AsInt(), result = 1;
    while (exponent > 0) {
      if (exponent & 1) result = CheckedMul(result, base);
      exponent >>= 1;
      if (exponent > 0) base = CheckedMul(base, base);
    }
    return Value::Integer(result);
  }
  const double a = lhs.AsFloat(), b = rhs.AsFloat();
  if (a == 0.0 && b < 0) throw RenderError("0.0 cannot be raised to a negative power");
  return Value::Float(std::pow(a, b));
}

Value Arithmetic(BinaryOp op, const Value& lhs, const Value& rhs) {
  switch (op) {
    case BinaryOp::kSub: {
      if (!lhs.IsNumber() || !rhs.IsNumber()) UnsupportedOperands("-", lhs, rhs);
      if (BothIntegral(lhs, rhs)) {
        return Value::Integer(CheckedSub(lhs.AsInt(), rhs.AsInt()));
      }
      return Value::Float(lhs.AsFloat() - rhs.AsFloat());
    }
    case BinaryOp::kMul: {
      if ((lhs.IsString() || lhs.IsList()) && BothIntegral(rhs, rhs)) return Repeat(lhs, rhs.AsInt());
      if ((rhs.IsString() || rhs.IsList()) && BothIntegral(lhs, lhs)) return Repeat(rhs, lhs.AsInt());
      if (!lhs.IsNumber() || !rhs.IsNumber()) UnsupportedOperands("*", lhs, rhs);
      if (BothIntegral(lhs, rhs)) {
        return Value::Integer(CheckedMul(lhs.AsInt(), rhs.AsInt()));
      }
      return Value::Float(lhs.AsFloat() * rhs.AsFloat());
    }
    case BinaryOp::kDiv: {
      if (!lhs.IsNumber() || !rhs.IsNumber()) UnsupportedOperands("/", lhs, rhs);
      if (rhs.AsFloat() == 0.0) throw RenderError("division by zero");
      return Value::Float(lhs.AsFloat() / rhs.AsFloat());
    }
    case BinaryOp::kFloorDiv:
      if (!lhs.IsNumber() || !rhs.IsNumber()) UnsupportedOperands("//", lhs, rhs);
      return FloorDivide(lhs, rhs);
    case BinaryOp::kMod: return Modulo(lhs, rhs);
    case BinaryOp::kPow: return Power(lhs, rhs);
    case BinaryOp::kAdd: return Add(lhs, rhs);
  }
  UnsupportedOperands("?", lhs, rhs);
}

}  // namespace

std::string ReplaceChecked(std::string_view s, std::string_view old_part, std::string_view new_part, int64_t count) {
  WorkBudget::Charge(static_cast<int64_t>(s.size() >> 6));
  if (new_part.size() > old_part.size()) {
    int64_t occurrences = old_part.empty() ? static_cast<int64_t>(py::CodePointCount(s)) + 1 : py::Count(s, old_part);
    if (count >= 0) occurrences = std::min(occurrences, count);
    const auto growth = static_cast<double>(occurrences) * static_cast<double>(new_part.size() - old_part.size());
    if (static_cast<double>(s.size()) + growth > static_cast<double>(kMaxValueSize)) {
      throw RenderError("replace() result too large (over " + std::to_string(kMaxValueSize) + " bytes)");
    }
  }
  return py::Replace(s, old_part, new_part, count);
}

void CheckBuiltSize(const std::string& text, std::string_view what) {
  if (text.size() > kMaxValueSize) {
    throw RenderError(std::string(what) + " result too large (over " + std::to_string(kMaxValueSize) + " bytes)");
  }
}

Value GetAttribute(const Value& object, const std::string& name) {
  if (object.IsUndefined()) ThrowUndefined(object);
  if (object.IsNamespace()) {
    const Value* value = object.AsNamespace().attributes.Find(name);
    return value != nullptr ? *value : MissingAttribute(object, name);
  }
  if (object.IsLoop()) return LoopAttribute(object, name);
  if (name.empty() || name[0] != '_') {
    if (std::optional<Value> method = LookupMethod(object, name)) return *method;
  }
  if (object.IsDict()) {
    const Value* value = object.AsDict().Find(name);
    if (value != nullptr) return *value;
  }
  return MissingAttribute(object, name);
}

Value GetItem(const Value& object, const Value& key) {
  if (object.IsUndefined()) ThrowUndefined(object);
  if (object.IsDict() && key.IsString()) {
    if (const Value* value = object.AsDict().Find(key.AsString())) return *value;
  }
  if ((object.IsList() || object.IsString()) && (key.IsInt() || key.IsBool())) {
    const auto length = static_cast<Int>(Length(object));
    Int index = key.AsInt();
    if (index < 0) index += length;
    if (index >= 0 && index < length) {
      if (object.IsList()) return object.AsList()[static_cast<size_t>(index)];
      WorkBudget::Charge(static_cast<int64_t>(object.AsString().size() >> 6));
      return Value::String(py::EncodeUtf8(py::DecodeUtf8(object.AsString()).substr(static_cast<size_t>(index), 1)));
    }
    return MissingElement(object, key);
  }
  if (key.IsString()) {
    if (object.IsNamespace() || object.IsLoop()) return GetAttribute(object, key.AsString());
    const std::string& name = key.AsString();
    if (name.empty() || name[0] != '_') {
      if (std::optional<Value> method = LookupMethod(object, name)) return *method;
    }
    return MissingAttribute(object, name);
  }
  return MissingElement(object, key);
}

Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.IsUndefined()) ThrowUndefined(object);
  if (object.IsString()) {
    WorkBudget::Charge(static_cast<int64_t>(object.AsString().size() >> 6));
    const std::u32string cps = py::DecodeUtf8(object.AsString());
    std::u32string out;
    ForEachSliceIndex(NormalizeSlice(start, stop, step, static_cast<int64_t>(cps.size())),
                      [&](size_t i) { out.push_back(cps[i]); });
    return Value::String(py::EncodeUtf8(out), object.IsMarkup());
  }
  if (object.IsList()) {
    const ValueList& items = object.AsList();
    ValueList out;
    ForEachSliceIndex(NormalizeSlice(start, stop, step, static_cast<int64_t>(items.size())),
                      [&](size_t i) { out.push_back(items[i]); });
    return object.IsTuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  return Value::Undefined(ObjectDescription(object) + " is not subscriptable");
}

Value BinaryOperation(BinaryOp op, const Value& lhs, const Value& rhs) {
  if (lhs.IsUndefined()) ThrowUndefined(lhs);
  if (rhs.IsUndefined()) ThrowUndefined(rhs);
  return Arithmetic(op, lhs, rhs);
}

Value Negate(const Value& operand) {
  if (operand.IsUndefined()) ThrowUndefined(operand);
  if (operand.IsFloat()) return Value::Float(-operand.AsFloat());
  if (!operand.IsNumber()) throw RenderError("bad operand type for unary -: '" + operand.TypeName() + "'");
  return Value::Integer(CheckedSub(0, operand.AsInt()));
}

Value Positive(const Value& operand) {
  if (operand.IsUndefined()) ThrowUndefined(operand);
  if (!operand.IsNumber()) throw RenderError("bad operand type for unary +: '" + operand.TypeName() + "'");
  return operand.IsBool() ? Value::Integer(operand.AsInt()) : operand;
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.IsString()) {
        throw RenderError("'in <string>' requires string as left operand, not " + item.TypeName());
      }
      WorkBudget::Charge(static_cast<int64_t>(container.AsString().size() >> 6));
      return container.AsString().find(item.AsString()) != std::string::npos;
    case Value::Kind::kList:
      WorkBudget::Charge(static_cast<int64_t>(container.AsList().size() >> 4));
      for (const Value& element : container.AsList()) {
        if (Equals(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.IsString() && container.AsDict().Find(item.AsString()) != nullptr;
    default: throw RenderError("argument of type '" + container.TypeName() + "' is not iterable");
  }
}

std::shared_ptr<const ValueList> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return std::make_shared<const ValueList>();
    case Value::Kind::kList: return value.SharedList();
    case Value::Kind::kString: {
      if (value.AsString().size() > kMaxListItems) {
        throw RenderError("a string of " + std::to_string(value.AsString().size()) + " bytes is too long to iterate");
      }
      ValueList chars;
      for (char32_t cp : py::DecodeUtf8(value.AsString())) chars.push_back(Value::String(py::EncodeUtf8(std::u32string(1, cp))));
      return std::make_shared<const ValueList>(std::move(chars));
    }
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [key, unused] : value.AsDict().items()) keys.push_back(Value::String(key));
      return std::make_shared<const ValueList>(std::move(keys));
    }
    default: throw RenderError("'" + value.TypeName() + "' object is not iterable");
  }
}

Value ItemPairs(const ValueDict& dict) {
  ValueList pairs;
  for (const auto& [key, value] : dict.items()) pairs.push_back(Value::Tuple({Value::String(key), value}));
  return Value::List(std::move(pairs));
}

size_t Length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString:
      WorkBudget::Charge(static_cast<int64_t>(value.AsString().size() >> 8));
      return py::CodePointCount(value.AsString());
    case Value::Kind::kList: return value.AsList().size();
    case Value::Kind::kDict: return value.AsDict().size();
    case Value::Kind::kLoop: return value.AsLoop().items->size();
    default: throw RenderError("object of type '" + value.TypeName() + "' has no len()");
  }
}

Value CallValue(const Value& callee, CallArgs& args) {
  if (callee.IsUndefined()) ThrowUndefined(callee);
  if (!callee.IsCallable()) throw RenderError("'" + callee.TypeName() + "' object is not callable");
  return callee.AsCallable().call(args);
}

}  // namespace vllm::jinja
