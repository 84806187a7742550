// Builtin tests (`x is defined`, `x is mapping`, ...) with jinja2's definitions.
// Note the Python facts they inherit: bool is a number, a dict is a sequence, and
// Undefined is iterable, a sequence and callable (its methods exist and fail).
#include <map>

#include "builtins.h"
#include "operations.h"
#include "py_string.h"

namespace vllm::jinja {
namespace {

Value OneArg(std::string_view test, CallArgs& args) { return BindArgs(test, args, {{"other"}})[0]; }

bool Defined(const Value& v, CallArgs& args) { return BindArgs("defined", args, {}), !v.IsUndefined(); }
bool Undefined(const Value& v, CallArgs& args) { return BindArgs("undefined", args, {}), v.IsUndefined(); }
bool None(const Value& v, CallArgs& args) { return BindArgs("none", args, {}), v.IsNone(); }
bool Boolean(const Value& v, CallArgs& args) { return BindArgs("boolean", args, {}), v.IsBool(); }
bool True(const Value& v, CallArgs& args) { return BindArgs("true", args, {}), v.IsBool() && v.AsBool(); }
bool False(const Value& v, CallArgs& args) { return BindArgs("false", args, {}), v.IsBool() && !v.AsBool(); }
bool Integer(const Value& v, CallArgs& args) { return BindArgs("integer", args, {}), v.IsInt(); }
bool Float(const Value& v, CallArgs& args) { return BindArgs("float", args, {}), v.IsFloat(); }
bool Number(const Value& v, CallArgs& args) { return BindArgs("number", args, {}), v.IsNumber(); }
bool String(const Value& v, CallArgs& args) { return BindArgs("string", args, {}), v.IsString(); }
bool Mapping(const Value& v, CallArgs& args) { return BindArgs("mapping", args, {}), v.IsDict(); }
bool Escaped(const Value& v, CallArgs& args) { return BindArgs("escaped", args, {}), v.IsMarkup(); }

bool Sequence(const Value& v, CallArgs& args) {
  BindArgs("sequence", args, {});
  return v.IsString() || v.IsList() || v.IsDict() || v.IsUndefined();
}

bool Iterable(const Value& v, CallArgs& args) {
  BindArgs("iterable", args, {});
  return v.IsString() || v.IsList() || v.IsDict() || v.IsUndefined() || v.IsLoop();
}

bool Callable(const Value& v, CallArgs& args) {
  BindArgs("callable", args, {});
  return v.IsCallable() || v.IsUndefined() || v.IsLoop();
}

bool SameAs(const Value& v, CallArgs& args) { return v.SameAs(OneArg("sameas", args)); }

// value % divisor == expected, with Python's % (floats and ints alike).
bool ModuloIs(const Value& v, const Value& divisor, int expected) {
  return Equals(BinaryOperation(BinaryOp::kMod, v, divisor), Value::Integer(expected));
}

bool Odd(const Value& v, CallArgs& args) { return BindArgs("odd", args, {}), ModuloIs(v, Value::Integer(2), 1); }
bool Even(const Value& v, CallArgs& args) { return BindArgs("even", args, {}), ModuloIs(v, Value::Integer(2), 0); }
bool DivisibleBy(const Value& v, CallArgs& args) { return ModuloIs(v, BindArgs("divisibleby", args, {{"num"}})[0], 0); }

bool Eq(const Value& v, CallArgs& args) { return Equals(v, OneArg("eq", args)); }
bool Ne(const Value& v, CallArgs& args) { return !Equals(v, OneArg("ne", args)); }
bool Lt(const Value& v, CallArgs& args) { return Compare(v, OneArg("lt", args), "<") < 0; }
bool Le(const Value& v, CallArgs& args) { return Compare(v, OneArg("le", args), "<=") <= 0; }
bool Gt(const Value& v, CallArgs& args) { return Compare(v, OneArg("gt", args), ">") > 0; }
bool Ge(const Value& v, CallArgs& args) { return Compare(v, OneArg("ge", args), ">=") >= 0; }
bool In(const Value& v, CallArgs& args) { return Contains(BindArgs("in", args, {{"seq"}})[0], v); }

bool Lower(const Value& v, CallArgs& args) { return BindArgs("lower", args, {}), py::IsLowerString(ToStr(v)); }
bool Upper(const Value& v, CallArgs& args) { return BindArgs("upper", args, {}), py::IsUpperString(ToStr(v)); }

bool IsFilter(const Value& v, CallArgs& args) {
  BindArgs("filter", args, {});
  return v.IsString() && FindFilter(v.AsString()) != nullptr;
}

bool IsTest(const Value& v, CallArgs& args) {
  BindArgs("test", args, {});
  return v.IsString() && FindTest(v.AsString()) != nullptr;
}

const std::map<std::string, TestFunction, std::less<>>& Tests() {
  static const std::map<std::string, TestFunction, std::less<>> tests = {
      {"defined", Defined}, {"undefined", Undefined}, {"none", None}, {"boolean", Boolean}, {"true", True},
      {"false", False}, {"integer", Integer}, {"float", Float}, {"number", Number}, {"string", String},
      {"mapping", Mapping}, {"sequence", Sequence}, {"iterable", Iterable}, {"callable", Callable},
      {"sameas", SameAs}, {"escaped", Escaped}, {"odd", Odd}, {"even", Even}, {"divisibleby", DivisibleBy},
      {"eq", Eq}, {"equalto", Eq}, {"==", Eq}, {"ne", Ne}, {"!=", Ne}, {"lt", Lt}, {"lessthan", Lt}, {"<", Lt},
      {"le", Le}, {"<=", Le}, {"gt", Gt}, {"greaterthan", Gt}, {">", Gt}, {"ge", Ge}, {">=", Ge}, {"in", In},
      {"lower", Lower}, {"upper", Upper}, {"filter", IsFilter}, {"test", IsTest},
  };
  return tests;
}

}  // namespace

TestFunction FindTest(std::string_view name) {
  const auto it = Tests().find(name);
  return it == Tests().end() ? nullptr : it->second;
}

}  // namespace vllm::jinja
