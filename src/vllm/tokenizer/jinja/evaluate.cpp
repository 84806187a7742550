// Expression evaluation of the Renderer (see renderer.h).
#include "operations.h"
#include "renderer.h"

namespace vllm::jinja {

void Renderer::Step(int line) {
  current_line_ = line;
  WorkBudget::Charge(1);
}

Renderer::DepthGuard::DepthGuard(Renderer& r) : renderer(r) {
  if (++renderer.eval_depth_ > kMaxEvalDepth) {
    throw RenderError("template evaluation nests deeper than " + std::to_string(kMaxEvalDepth) + " levels");
  }
}

Value Renderer::Eval(const Expr& expr, Scope& scope) {
  Step(expr.line);
  const DepthGuard guard(*this);
  const auto& ops = expr.operands;
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.value;
    case ExprKind::kName: {
      const Value* value = scope.Find(expr.name);
      return value != nullptr ? *value : Value::Undefined("'" + expr.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict: return EvalCollection(expr, scope);
    case ExprKind::kGetAttr: return GetAttribute(Eval(*ops[0], scope), expr.name);
    case ExprKind::kGetItem: {
      const Value object = Eval(*ops[0], scope);
      return GetItem(object, Eval(*ops[1], scope));
    }
    case ExprKind::kSlice: return EvalSlice(expr, scope);
    case ExprKind::kCall: {
      const Value callee = Eval(*ops[0], scope);
      CallArgs args = EvalArgs(expr.call, scope);
      Step(expr.line);
      return CallValue(callee, args);
    }
    case ExprKind::kFilter: return EvalFilter(expr, scope, std::nullopt);
    case ExprKind::kTest: return EvalTest(expr, scope);
    case ExprKind::kNeg: return Negate(Eval(*ops[0], scope));
    case ExprKind::kPos: return Positive(Eval(*ops[0], scope));
    case ExprKind::kNot: return Value::Bool(!Eval(*ops[0], scope).Truthy());
    case ExprKind::kBinary: {
      const Value lhs = Eval(*ops[0], scope);
      const Value rhs = Eval(*ops[1], scope);
      Step(expr.line);
      return BinaryOperation(expr.binary_op, lhs, rhs);
    }
    case ExprKind::kAnd: {
      Value lhs = Eval(*ops[0], scope);
      return lhs.Truthy() ? Eval(*ops[1], scope) : lhs;
    }
    case ExprKind::kOr: {
      Value lhs = Eval(*ops[0], scope);
      return lhs.Truthy() ? lhs : Eval(*ops[1], scope);
    }
    case ExprKind::kConcat: return EvalConcat(expr, scope);
    case ExprKind::kCompare: return EvalCompare(expr, scope);
    case ExprKind::kCondExpr: {
      if (Eval(*ops[1], scope).Truthy()) return Eval(*ops[0], scope);
      if (ops[2]) return Eval(*ops[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(expr.line) +
                              " evaluated to false and no else section was defined");
    }
  }
  return Value();
}

Value Renderer::EvalSlice(const Expr& expr, Scope& scope) {
  const Value object = Eval(*expr.operands[0], scope);
  auto bound = [&](const ExprPtr& e) { return e ? Eval(*e, scope) : Value::None(); };
  const Value start = bound(expr.operands[1]), stop = bound(expr.operands[2]), step = bound(expr.operands[3]);
  return Slice(object, start, stop, step);
}

// a ~ b ~ c: the str() of each, joined (no Markup escaping: autoescape is off).
Value Renderer::EvalConcat(const Expr& expr, Scope& scope) {
  std::string out;
  for (const ExprPtr& part : expr.operands) {
    out += ToStr(Eval(*part, scope));
    if (out.size() > kMaxValueSize) throw RenderError("string concatenation result too large");
  }
  return Value::String(std::move(out));
}

Value Renderer::EvalCollection(const Expr& expr, Scope& scope) {
  if (expr.kind == ExprKind::kDict) {
    ValueDict dict;
    for (size_t i = 0; i + 1 < expr.operands.size(); i += 2) {
      const Value key = Eval(*expr.operands[i], scope);
      if (!key.IsString()) throw RenderError("dict literal keys must be strings here, got " + key.TypeName());
      dict.Set(key.AsString(), Eval(*expr.operands[i + 1], scope));
    }
    return Value::Dict(std::move(dict));
  }
  ValueList items;
  items.reserve(expr.operands.size());
  for (const ExprPtr& item : expr.operands) items.push_back(Eval(*item, scope));
  return expr.kind == ExprKind::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
}

CallArgs Renderer::EvalArgs(const CallSite& call, Scope& scope) {
  CallArgs args;
  args.positional.reserve(call.args.size());
  for (const ExprPtr& arg : call.args) args.positional.push_back(Eval(*arg, scope));
  for (const auto& [name, arg] : call.kwargs) args.keyword.emplace_back(name, Eval(*arg, scope));
  return args;
}

// A filter; in a filter block or block set the innermost input is the captured body.
Value Renderer::EvalFilter(const Expr& expr, Scope& scope, const std::optional<Value>& chain_input) {
  const ExprPtr& input_expr = expr.operands[0];
  Value input;
  if (!input_expr) {
    input = *chain_input;
  } else if (chain_input && input_expr->kind == ExprKind::kFilter) {
    input = EvalFilter(*input_expr, scope, chain_input);
  } else {
    input = Eval(*input_expr, scope);
  }
  CallArgs args = EvalArgs(expr.call, scope);
  Step(expr.line);
  if (expr.filter == nullptr) throw RenderError("no filter named '" + expr.name + "'");
  return expr.filter(input, args);
}

Value Renderer::EvalTest(const Expr& expr, Scope& scope) {
  const Value input = Eval(*expr.operands[0], scope);
  CallArgs args = EvalArgs(expr.call, scope);
  Step(expr.line);
  if (expr.test == nullptr) throw RenderError("no test named '" + expr.name + "'");
  return Value::Bool(expr.test(input, args));
}

// Chained comparisons as in Python: a < b < c is a < b and b < c.
Value Renderer::EvalCompare(const Expr& expr, Scope& scope) {
  Value left = Eval(*expr.operands[0], scope);
  for (size_t i = 0; i < expr.compare_ops.size(); ++i) {
    Value right = Eval(*expr.operands[i + 1], scope);
    bool holds = false;
    switch (expr.compare_ops[i]) {
      case CompareOp::kEq: holds = Equals(left, right); break;
      case CompareOp::kNe: holds = !Equals(left, right); break;
      case CompareOp::kLt: holds = Compare(left, right, "<") < 0; break;
      case CompareOp::kLe: holds = Compare(left, right, "<=") <= 0; break;
      case CompareOp::kGt: holds = Compare(left, right, ">") > 0; break;
      case CompareOp::kGe: holds = Compare(left, right, ">=") >= 0; break;
      case CompareOp::kIn: holds = Contains(right, left); break;
      case CompareOp::kNotIn: holds = !Contains(right, left); break;
    }
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

}  // namespace vllm::jinja
