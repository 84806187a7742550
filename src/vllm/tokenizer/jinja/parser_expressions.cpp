// Expression grammar of the Parser (see parser.h for the precedence table).
#include "builtins.h"
#include "parser_impl.h"

namespace vllm::jinja::parser_detail {

bool Parser::IsTupleEnd(const std::vector<std::string_view>& extra_end) const {
  const Token& t = Current();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || IsOp(t, ")")) return true;
  return t.type == TokenType::kName && std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
}

ExprPtr Parser::ParseTuple(bool with_condexpr, const std::vector<std::string_view>& extra_end, bool explicit_parentheses) {
  const int line = Current().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ExpectOp(",");
    if (IsTupleEnd(extra_end)) break;
    items.push_back(ParseExpression(with_condexpr));
    if (!IsOp(Current(), ",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) Fail(Current(), "expected an expression, got " + DescribeToken(Current()));
  }
  auto tuple = MakeExpr(ExprKind::kTuple, line);
  tuple->operands = std::move(items);
  return tuple;
}

ExprPtr Parser::ParseCondExpr() {
  const size_t first_unknown = unknown_.size();
  ExprPtr expr = ParseOr();
  while (IsName(Current(), "if")) {
    auto cond = MakeExpr(ExprKind::kCondExpr, Next().line);
    ExprPtr test = ParseOr();
    ExprPtr otherwise = SkipName("else") ? ParseCondExpr() : nullptr;
    cond->operands.push_back(std::move(expr));
    cond->operands.push_back(std::move(test));
    cond->operands.push_back(std::move(otherwise));
    expr = std::move(cond);
    for (size_t i = first_unknown; i < unknown_.size(); ++i) unknown_[i].second = true;
  }
  return expr;
}

ExprPtr Parser::MakePair(ExprKind kind, ExprPtr lhs, ExprPtr rhs, int line) {
  auto expr = MakeExpr(kind, line);
  expr->operands.push_back(std::move(lhs));
  expr->operands.push_back(std::move(rhs));
  return expr;
}

ExprPtr Parser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName(Current(), "or")) {
    const int line = Next().line;
    left = MakePair(ExprKind::kOr, std::move(left), ParseAnd(), line);
  }
  return left;
}

ExprPtr Parser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName(Current(), "and")) {
    const int line = Next().line;
    left = MakePair(ExprKind::kAnd, std::move(left), ParseNot(), line);
  }
  return left;
}

ExprPtr Parser::ParseNot() {
  if (!IsName(Current(), "not")) return ParseCompare();
  NestingGuard guard(*this);
  auto expr = MakeExpr(ExprKind::kNot, Next().line);
  expr->operands.push_back(ParseNot());
  return expr;
}

ExprPtr Parser::ParseCompare() {
  const int line = Current().line;
  ExprPtr first = ParseMath1();
  std::vector<CompareOp> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    static const std::pair<std::string_view, CompareOp> kOps[] = {
        {"==", CompareOp::kEq}, {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
        {"<=", CompareOp::kLe}, {">", CompareOp::kGt}, {">=", CompareOp::kGe}};
    const auto op = std::find_if(std::begin(kOps), std::end(kOps), [&](auto& p) { return IsOp(Current(), p.first); });
    if (op != std::end(kOps)) {
      Next();
      ops.push_back(op->second);
    } else if (SkipName("in")) {
      ops.push_back(CompareOp::kIn);
    } else if (IsName(Current(), "not") && IsName(Look(), "in")) {
      Next();
      Next();
      ops.push_back(CompareOp::kNotIn);
    } else {
      break;
    }
    operands.push_back(ParseMath1());
  }
  if (ops.empty()) return first;
  auto expr = MakeExpr(ExprKind::kCompare, line);
  expr->operands.push_back(std::move(first));
  for (auto& operand : operands) expr->operands.push_back(std::move(operand));
  expr->compare_ops = std::move(ops);
  return expr;
}

ExprPtr Parser::MakeBinary(BinaryOp op, ExprPtr lhs, ExprPtr rhs, int line) {
  auto expr = MakePair(ExprKind::kBinary, std::move(lhs), std::move(rhs), line);
  expr->binary_op = op;
  return expr;
}

ExprPtr Parser::ParseMath1() {
  ExprPtr left = ParseConcat();
  while (IsOp(Current(), "+") || IsOp(Current(), "-")) {
    const Token& op = Next();
    left = MakeBinary(op.text == "+" ? BinaryOp::kAdd : BinaryOp::kSub, std::move(left), ParseConcat(), op.line);
  }
  return left;
}

ExprPtr Parser::ParseConcat() {
  ExprPtr first = ParseMath2();
  if (!IsOp(Current(), "~")) return first;
  auto concat = MakeExpr(ExprKind::kConcat, Current().line);
  concat->operands.push_back(std::move(first));
  while (SkipOp("~")) concat->operands.push_back(ParseMath2());
  return concat;
}

ExprPtr Parser::ParseMath2() {
  ExprPtr left = ParsePow();
  while (true) {
    const Token& t = Current();
    BinaryOp op;
    if (IsOp(t, "*")) op = BinaryOp::kMul;
    else if (IsOp(t, "/")) op = BinaryOp::kDiv;
    else if (IsOp(t, "//")) op = BinaryOp::kFloorDiv;
    else if (IsOp(t, "%")) op = BinaryOp::kMod;
    else break;
    const int line = Next().line;
    left = MakeBinary(op, std::move(left), ParsePow(), line);
  }
  return left;
}

ExprPtr Parser::ParsePow() {
  ExprPtr left = ParseUnary(true);
  while (IsOp(Current(), "**")) {
    const int line = Next().line;
    left = MakeBinary(BinaryOp::kPow, std::move(left), ParseUnary(true), line);
  }
  return left;
}

ExprPtr Parser::ParseUnary(bool with_filter) {
  NestingGuard guard(*this);
  ExprPtr node;
  if (IsOp(Current(), "-") || IsOp(Current(), "+")) {
    const Token& op = Next();
    node = MakeExpr(op.text == "-" ? ExprKind::kNeg : ExprKind::kPos, op.line);
    node->operands.push_back(ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  if (with_filter) node = ParseFilterExpr(std::move(node));
  return node;
}

ExprPtr Parser::ParsePrimary() {
  const Token& token = Current();
  if (token.type == TokenType::kName) {
    Next();
    auto expr = MakeExpr(ExprKind::kLiteral, token.line);
    if (token.text == "true" || token.text == "True") expr->value = Value::Bool(true);
    else if (token.text == "false" || token.text == "False") expr->value = Value::Bool(false);
    else if (token.text == "none" || token.text == "None") expr->value = Value::None();
    else {
      expr->kind = ExprKind::kName;
      expr->name = token.text;
    }
    return expr;
  }
  if (token.type == TokenType::kString) {
    std::string text;
    while (Current().type == TokenType::kString) text += Next().text;
    auto expr = MakeExpr(ExprKind::kLiteral, token.line);
    expr->value = Value::String(std::move(text));
    return expr;
  }
  if (token.type == TokenType::kInteger || token.type == TokenType::kFloat) {
    Next();
    auto expr = MakeExpr(ExprKind::kLiteral, token.line);
    expr->value = token.type == TokenType::kInteger ? Value::Integer(token.int_value) : Value::Float(token.float_value);
    return expr;
  }
  if (IsOp(token, "(")) {
    Next();
    ExprPtr expr = ParseTuple(true, {}, true);
    ExpectOp(")");
    return expr;
  }
  if (IsOp(token, "[")) return ParseList();
  if (IsOp(token, "{")) return ParseDict();
  Fail(token, "unexpected " + DescribeToken(token));
}

ExprPtr Parser::ParseList() {
  auto list = MakeExpr(ExprKind::kList, Next().line);
  while (!IsOp(Current(), "]")) {
    if (!list->operands.empty()) ExpectOp(",");
    if (IsOp(Current(), "]")) break;
    list->operands.push_back(ParseExpression(true));
  }
  ExpectOp("]");
  return list;
}

ExprPtr Parser::ParseDict() {
  auto dict = MakeExpr(ExprKind::kDict, Next().line);
  while (!IsOp(Current(), "}")) {
    if (!dict->operands.empty()) ExpectOp(",");
    if (IsOp(Current(), "}")) break;
    dict->operands.push_back(ParseExpression(true));
    ExpectOp(":");
    dict->operands.push_back(ParseExpression(true));
  }
  ExpectOp("}");
  return dict;
}

ExprPtr Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(Current(), ".") || IsOp(Current(), "[")) node = ParseSubscript(std::move(node));
    else if (IsOp(Current(), "(")) node = ParseCall(std::move(node));
    else return node;
  }
}

ExprPtr Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp(Current(), "|")) node = ParseFilter(std::move(node), false);
    else if (IsName(Current(), "is")) node = ParseTest(std::move(node));
    else if (IsOp(Current(), "(")) node = ParseCall(std::move(node));
    else return node;
  }
}

ExprPtr Parser::ParseSubscript(ExprPtr node) {
  const Token& token = Next();
  if (token.text == ".") {
    const Token& attr = Current();
    if (attr.type == TokenType::kName) {
      Next();
      auto expr = MakeExpr(ExprKind::kGetAttr, token.line);
      expr->operands.push_back(std::move(node));
      expr->name = attr.text;
      return expr;
    }
    if (attr.type != TokenType::kInteger) Fail(attr, "expected a name or number after '.'");
    Next();
    auto index = MakeExpr(ExprKind::kLiteral, attr.line);
    index->value = Value::Integer(attr.int_value);
    return MakePair(ExprKind::kGetItem, std::move(node), std::move(index), token.line);
  }
  std::vector<ExprPtr> args;
  while (!IsOp(Current(), "]")) {
    if (!args.empty()) ExpectOp(",");
    args.push_back(ParseSubscribed(node, token.line));
  }
  ExpectOp("]");
  if (args.size() != 1) Fail(token, "subscripts with several indices are not supported");
  ExprPtr arg = std::move(args[0]);
  if (arg->kind == ExprKind::kSlice) return arg;
  return MakePair(ExprKind::kGetItem, std::move(node), std::move(arg), token.line);
}

ExprPtr Parser::ParseSubscribed(ExprPtr& node, int line) {
  ExprPtr start;
  if (!IsOp(Current(), ":")) {
    start = ParseExpression(true);
    if (!IsOp(Current(), ":")) return start;
  }
  Next();
  auto slice = MakeExpr(ExprKind::kSlice, line);
  ExprPtr stop, step;
  if (!IsOp(Current(), "]") && !IsOp(Current(), ",") && !IsOp(Current(), ":")) stop = ParseExpression(true);
  if (SkipOp(":") && !IsOp(Current(), "]") && !IsOp(Current(), ",")) step = ParseExpression(true);
  slice->operands.push_back(std::move(node));
  slice->operands.push_back(std::move(start));
  slice->operands.push_back(std::move(stop));
  slice->operands.push_back(std::move(step));
  return slice;
}

CallSite Parser::ParseCallArgs() {
  ExpectOp("(");
  CallSite call;
  bool require_comma = false;
  while (!IsOp(Current(), ")")) {
    if (require_comma) {
      ExpectOp(",");
      if (IsOp(Current(), ")")) break;
    }
    if (IsOp(Current(), "*") || IsOp(Current(), "**")) Fail(Current(), "*args and **kwargs in calls are not supported");
    if (Current().type == TokenType::kName && IsOp(Look(), "=")) {
      std::string key = Next().text;
      Next();
      call.kwargs.emplace_back(std::move(key), ParseExpression(true));
    } else {
      if (!call.kwargs.empty()) Fail(Current(), "positional argument follows keyword argument");
      call.args.push_back(ParseExpression(true));
    }
    require_comma = true;
  }
  ExpectOp(")");
  return call;
}

ExprPtr Parser::ParseCall(ExprPtr node) {
  auto call = MakeExpr(ExprKind::kCall, Current().line);
  call->call = ParseCallArgs();
  call->operands.push_back(std::move(node));
  return call;
}

std::string Parser::ParseDottedName() {
  std::string name = ExpectName().text;
  while (SkipOp(".")) name += "." + ExpectName().text;
  return name;
}

ExprPtr Parser::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp(Current(), "|") || start_inline) {
    if (!start_inline) Next();
    start_inline = false;
    auto filter = MakeExpr(ExprKind::kFilter, Current().line);
    filter->name = ParseDottedName();
    if (IsOp(Current(), "(")) filter->call = ParseCallArgs();
    filter->filter = FindFilter(filter->name);
    if (filter->filter == nullptr) unknown_.emplace_back(filter.get(), InSoftFrame());
    filter->operands.push_back(std::move(node));
    node = std::move(filter);
  }
  return node;
}

ExprPtr Parser::ParseTest(ExprPtr node) {
  const int line = Next().line;
  const bool negated = SkipName("not");
  auto test = MakeExpr(ExprKind::kTest, line);
  test->name = ParseDottedName();
  const Token& t = Current();
  if (IsOp(t, "(")) {
    test->call = ParseCallArgs();
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
              t.type == TokenType::kFloat || IsOp(t, "[") || IsOp(t, "{")) &&
             !IsName(t, "else") && !IsName(t, "or") && !IsName(t, "and")) {
    if (IsName(t, "is")) Fail(t, "you cannot chain multiple tests with 'is'");
    test->call.args.push_back(ParsePostfix(ParsePrimary()));
  }
  test->test = FindTest(test->name);
  if (test->test == nullptr) unknown_.emplace_back(test.get(), InSoftFrame());
  test->operands.push_back(std::move(node));
  if (!negated) return test;
  auto negation = MakeExpr(ExprKind::kNot, line);
  negation->operands.push_back(std::move(test));
  return negation;
}

}  // namespace vllm::jinja::parser_detail
