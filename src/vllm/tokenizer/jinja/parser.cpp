#include "parser.h"

#include <algorithm>

#include "builtins.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm::jinja {
namespace {

ExprPtr MakeExpr(ExprKind kind, int line) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

StmtPtr MakeStmt(StmtKind kind, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = kind;
  stmt->line = line;
  return stmt;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body ParseTemplate() {
    Body body = Subparse({});
    if (Current().type != TokenType::kEnd) Fail(Current(), "unexpected " + DescribeToken(Current()));
    for (const auto& [expr, soft] : unknown_) {
      if (!soft) Fail(expr->line, std::string("no ") + (expr->kind == ExprKind::kFilter ? "filter" : "test") +
                                      " named '" + expr->name + "'");
    }
    return body;
  }

 private:
  // ---- token stream ----
  const Token& Current() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& Next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  static bool IsName(const Token& t, std::string_view name) { return t.type == TokenType::kName && t.text == name; }
  static bool IsOp(const Token& t, std::string_view op) { return t.type == TokenType::kOperator && t.text == op; }
  bool SkipName(std::string_view name) { return IsName(Current(), name) ? (Next(), true) : false; }
  bool SkipOp(std::string_view op) { return IsOp(Current(), op) ? (Next(), true) : false; }

  [[noreturn]] void Fail(int line, const std::string& message) const {
    throw ChatTemplateError(ChatTemplateError::Kind::kSyntax, line, message);
  }
  [[noreturn]] void Fail(const Token& token, const std::string& message) const {
    throw ChatTemplateError(ChatTemplateError::Kind::kSyntax, token.line,
                            "column " + std::to_string(token.column) + ": " + message);
  }

  const Token& ExpectName() {
    if (Current().type != TokenType::kName) Fail(Current(), "expected a name, got " + DescribeToken(Current()));
    return Next();
  }
  void ExpectOp(std::string_view op) {
    if (!IsOp(Current(), op)) Fail(Current(), "expected '" + std::string(op) + "', got " + DescribeToken(Current()));
    Next();
  }
  void Expect(TokenType type, const std::string& what) {
    if (Current().type != type) Fail(Current(), "expected " + what + ", got " + DescribeToken(Current()));
    Next();
  }

  // Depth guard for recursive descent: hostile input cannot overflow the stack.
  struct NestingGuard {
    explicit NestingGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.Fail(parser.Current(), "template nests deeper than " +
                                                                           std::to_string(kMaxNesting) + " levels");
    }
    ~NestingGuard() { --parser.depth_; }
    Parser& parser;
  };

  // Unknown filters and tests are allowed in an if-branch or inline-if (a "soft"
  // frame in jinja2); loops, macros and blocks start a frame that is not soft.
  struct FrameGuard {
    FrameGuard(Parser& p, bool soft, bool loop) : parser(p) {
      parser.soft_frames_.push_back(soft);
      parser.loop_frames_.push_back(loop);
    }
    ~FrameGuard() {
      parser.soft_frames_.pop_back();
      parser.loop_frames_.pop_back();
    }
    Parser& parser;
  };
  bool InSoftFrame() const { return !soft_frames_.empty() && soft_frames_.back(); }
  bool InLoop() const { return !loop_frames_.empty() && loop_frames_.back(); }

  // ---- statements ----
  Body Subparse(const std::vector<std::string_view>& end_tags) {
    NestingGuard guard(*this);
    Body body;
    while (Current().type != TokenType::kEnd) {
      const Token& token = Current();
      if (token.type == TokenType::kText) {
        auto stmt = MakeStmt(StmtKind::kText, token.line);
        stmt->text = Next().text;
        body.push_back(std::move(stmt));
      } else if (token.type == TokenType::kVariableBegin) {
        Next();
        auto stmt = MakeStmt(StmtKind::kOutput, token.line);
        stmt->expr = ParseTuple(true, {}, false);
        Expect(TokenType::kVariableEnd, "'}}'");
        body.push_back(std::move(stmt));
      } else {
        Expect(TokenType::kBlockBegin, "'{%'");
        const Token& tag = Current();
        if (tag.type == TokenType::kName &&
            std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end()) {
          return body;
        }
        body.push_back(ParseStatement());
        Expect(TokenType::kBlockEnd, "'%}'");
      }
    }
    if (!end_tags.empty()) FailUnclosed(end_tags);
    return body;
  }

  [[noreturn]] void FailUnclosed(const std::vector<std::string_view>& end_tags) const {
    std::string wanted;
    for (std::string_view tag : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
    Fail(open_blocks_.empty() ? Current().line : open_blocks_.back().second,
         "unexpected end of template: '" + (open_blocks_.empty() ? "" : open_blocks_.back().first) +
             "' block is never closed (expected " + wanted + ")");
  }

  // parse_statements: ':'? '%}' body, stopping at one of end_tags (left current).
  Body ParseStatements(const std::vector<std::string_view>& end_tags, bool drop_end_tag) {
    SkipOp(":");
    Expect(TokenType::kBlockEnd, "'%}'");
    Body body = Subparse(end_tags);
    if (drop_end_tag) Next();
    return body;
  }

  StmtPtr ParseStatement() {
    const Token& tag = Current();
    if (tag.type != TokenType::kName) Fail(tag, "expected a tag name, got " + DescribeToken(tag));
    open_blocks_.emplace_back(tag.text, tag.line);
    StmtPtr stmt = ParseTag(tag);
    open_blocks_.pop_back();
    return stmt;
  }

  StmtPtr ParseTag(const Token& tag) {
    const std::string& name = tag.text;
    if (name == "if") return ParseIf();
    if (name == "for") return ParseFor();
    if (name == "set") return ParseSet();
    if (name == "macro") return ParseMacro();
    if (name == "call") return ParseCallBlock();
    if (name == "filter") return ParseFilterBlock();
    if (name == "with") return ParseWith();
    if (name == "print") return ParsePrint();
    if (name == "generation") return ParseScope("endgeneration");
    if (name == "break" || name == "continue") {
      if (!InLoop()) Fail(tag, "'" + name + "' outside of a for loop");
      Next();
      return MakeStmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, tag.line);
    }
    static constexpr std::string_view kUnsupported[] = {"block", "extends", "include", "import", "from", "autoescape", "do"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), name) != std::end(kUnsupported)) {
      Fail(tag, "the '" + name + "' tag is not supported in chat templates");
    }
    std::string message = "unknown tag '" + name + "'";
    if (open_blocks_.size() > 1) {
      const auto& [block, line] = open_blocks_[open_blocks_.size() - 2];
      message += " (the innermost open block is '" + block + "' from line " + std::to_string(line) + ")";
    }
    Fail(tag, message);
  }

  StmtPtr ParseIf() {
    auto stmt = MakeStmt(StmtKind::kIf, Next().line);
    FrameGuard frame(*this, true, InLoop());
    while (true) {
      ExprPtr condition = ParseTuple(false, {}, false);
      Body body = ParseStatements({"elif", "else", "endif"}, false);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      const Token& end = Next();
      if (end.text == "elif") continue;
      if (end.text == "else") stmt->else_body = ParseStatements({"endif"}, true);
      return stmt;
    }
  }

  StmtPtr ParseFor() {
    auto stmt = MakeStmt(StmtKind::kFor, Next().line);
    stmt->target = ParseAssignTarget({"in"}, false);
    if (!SkipName("in")) Fail(Current(), "expected 'in' in for loop, got " + DescribeToken(Current()));
    stmt->expr = ParseTuple(false, {"recursive"}, false);
    if (SkipName("if")) stmt->loop_filter = ParseExpression(true);
    if (IsName(Current(), "recursive")) Fail(Current(), "recursive for loops are not supported");
    {
      FrameGuard frame(*this, false, true);
      stmt->body = ParseStatements({"endfor", "else"}, false);
    }
    if (Next().text == "else") stmt->else_body = ParseStatements({"endfor"}, true);
    return stmt;
  }

  StmtPtr ParseSet() {
    const int line = Next().line;
    AssignTarget target = ParseAssignTarget({}, true);
    if (SkipOp("=")) {
      auto stmt = MakeStmt(StmtKind::kSet, line);
      stmt->target = std::move(target);
      stmt->expr = ParseTuple(true, {}, false);
      return stmt;
    }
    auto stmt = MakeStmt(StmtKind::kSetBlock, line);
    if (target.is_tuple) Fail(line, "a block set assigns one name");
    stmt->target = std::move(target);
    if (IsOp(Current(), "|")) stmt->filter = ParseFilter(nullptr, false);
    FrameGuard frame(*this, false, false);
    stmt->body = ParseStatements({"endset"}, true);
    return stmt;
  }

  // Targets of set / for: name, name, ... (and ns.attr for set).
  AssignTarget ParseAssignTarget(const std::vector<std::string_view>& extra_end, bool with_namespace) {
    AssignTarget target;
    while (true) {
      const Token& name = ExpectName();
      if (with_namespace && IsOp(Current(), ".")) {
        Next();
        target.names.push_back(name.text);
        target.attribute = ExpectName().text;
      } else {
        if (name.text == "true" || name.text == "false" || name.text == "none" || name.text == "True" ||
            name.text == "False" || name.text == "None") {
          Fail(name, "cannot assign to '" + name.text + "'");
        }
        target.names.push_back(name.text);
      }
      if (!IsOp(Current(), ",")) break;
      Next();
      target.is_tuple = true;
      if (IsTupleEnd(extra_end) || IsOp(Current(), "=")) break;
    }
    if (!target.attribute.empty() && target.names.size() > 1) Fail(Current(), "cannot unpack into a namespace attribute");
    return target;
  }

  void ParseSignature(Stmt& stmt) {
    ExpectOp("(");
    while (!IsOp(Current(), ")")) {
      if (!stmt.params.empty()) ExpectOp(",");
      if (IsOp(Current(), ")")) break;
      stmt.params.push_back(ExpectName().text);
      if (SkipOp("=")) {
        stmt.defaults.push_back(ParseExpression(true));
      } else if (!stmt.defaults.empty()) {
        Fail(Current(), "non-default argument follows default argument");
      }
    }
    ExpectOp(")");
  }

  StmtPtr ParseMacro() {
    auto stmt = MakeStmt(StmtKind::kMacro, Next().line);
    stmt->name = ExpectName().text;
    ParseSignature(*stmt);
    FrameGuard frame(*this, false, false);
    stmt->body = ParseStatements({"endmacro"}, true);
    return stmt;
  }

  StmtPtr ParseCallBlock() {
    auto stmt = MakeStmt(StmtKind::kCallBlock, Next().line);
    stmt->name = "caller";
    if (IsOp(Current(), "(")) ParseSignature(*stmt);
    stmt->expr = ParseExpression(true);
    if (stmt->expr->kind != ExprKind::kCall) Fail(stmt->line, "a call block needs a call expression");
    FrameGuard frame(*this, false, false);
    stmt->body = ParseStatements({"endcall"}, true);
    return stmt;
  }

  StmtPtr ParseFilterBlock() {
    auto stmt = MakeStmt(StmtKind::kFilterBlock, Next().line);
    stmt->filter = ParseFilter(nullptr, true);
    FrameGuard frame(*this, false, false);
    stmt->body = ParseStatements({"endfilter"}, true);
    return stmt;
  }

  StmtPtr ParseWith() {
    auto stmt = MakeStmt(StmtKind::kWith, Next().line);
    while (Current().type != TokenType::kBlockEnd) {
      if (!stmt->params.empty()) ExpectOp(",");
      stmt->params.push_back(ExpectName().text);
      ExpectOp("=");
      stmt->defaults.push_back(ParseExpression(true));
    }
    FrameGuard frame(*this, false, InLoop());
    stmt->body = ParseStatements({"endwith"}, true);
    return stmt;
  }

  StmtPtr ParsePrint() {
    auto stmt = MakeStmt(StmtKind::kOutput, Next().line);
    stmt->expr = ParseTuple(true, {}, false);
    return stmt;
  }

  StmtPtr ParseScope(std::string_view end_tag) {
    auto stmt = MakeStmt(StmtKind::kScope, Next().line);
    stmt->body = ParseStatements({end_tag}, true);
    return stmt;
  }

  // ---- expressions ----
  bool IsTupleEnd(const std::vector<std::string_view>& extra_end) const {
    const Token& t = Current();
    if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || IsOp(t, ")")) return true;
    return t.type == TokenType::kName && std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
  }

  // Expressions separated by commas form a tuple; one expression without a comma is itself.
  ExprPtr ParseTuple(bool with_condexpr, const std::vector<std::string_view>& extra_end, bool explicit_parentheses) {
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

  ExprPtr ParseExpression(bool with_condexpr) { return with_condexpr ? ParseCondExpr() : ParseOr(); }

  ExprPtr ParseCondExpr() {
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

  ExprPtr MakePair(ExprKind kind, ExprPtr lhs, ExprPtr rhs, int line) {
    auto expr = MakeExpr(kind, line);
    expr->operands.push_back(std::move(lhs));
    expr->operands.push_back(std::move(rhs));
    return expr;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName(Current(), "or")) {
      const int line = Next().line;
      left = MakePair(ExprKind::kOr, std::move(left), ParseAnd(), line);
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName(Current(), "and")) {
      const int line = Next().line;
      left = MakePair(ExprKind::kAnd, std::move(left), ParseNot(), line);
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (!IsName(Current(), "not")) return ParseCompare();
    NestingGuard guard(*this);
    auto expr = MakeExpr(ExprKind::kNot, Next().line);
    expr->operands.push_back(ParseNot());
    return expr;
  }

  ExprPtr ParseCompare() {
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

  ExprPtr MakeBinary(BinaryOp op, ExprPtr lhs, ExprPtr rhs, int line) {
    auto expr = MakePair(ExprKind::kBinary, std::move(lhs), std::move(rhs), line);
    expr->binary_op = op;
    return expr;
  }

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp(Current(), "+") || IsOp(Current(), "-")) {
      const Token& op = Next();
      left = MakeBinary(op.text == "+" ? BinaryOp::kAdd : BinaryOp::kSub, std::move(left), ParseConcat(), op.line);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ExprPtr first = ParseMath2();
    if (!IsOp(Current(), "~")) return first;
    auto concat = MakeExpr(ExprKind::kConcat, Current().line);
    concat->operands.push_back(std::move(first));
    while (SkipOp("~")) concat->operands.push_back(ParseMath2());
    return concat;
  }

  ExprPtr ParseMath2() {
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

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp(Current(), "**")) {
      const int line = Next().line;
      left = MakeBinary(BinaryOp::kPow, std::move(left), ParseUnary(true), line);
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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

  ExprPtr ParseList() {
    auto list = MakeExpr(ExprKind::kList, Next().line);
    while (!IsOp(Current(), "]")) {
      if (!list->operands.empty()) ExpectOp(",");
      if (IsOp(Current(), "]")) break;
      list->operands.push_back(ParseExpression(true));
    }
    ExpectOp("]");
    return list;
  }

  ExprPtr ParseDict() {
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

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(Current(), ".") || IsOp(Current(), "[")) node = ParseSubscript(std::move(node));
      else if (IsOp(Current(), "(")) node = ParseCall(std::move(node));
      else return node;
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp(Current(), "|")) node = ParseFilter(std::move(node), false);
      else if (IsName(Current(), "is")) node = ParseTest(std::move(node));
      else if (IsOp(Current(), "(")) node = ParseCall(std::move(node));
      else return node;
    }
  }

  ExprPtr ParseSubscript(ExprPtr node) {
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

  // One subscript: an expression, or a slice start:stop:step (which takes `node` as its object).
  ExprPtr ParseSubscribed(ExprPtr& node, int line) {
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

  CallSite ParseCallArgs() {
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

  ExprPtr ParseCall(ExprPtr node) {
    auto call = MakeExpr(ExprKind::kCall, Current().line);
    call->call = ParseCallArgs();
    call->operands.push_back(std::move(node));
    return call;
  }

  std::string ParseDottedName() {
    std::string name = ExpectName().text;
    while (SkipOp(".")) name += "." + ExpectName().text;
    return name;
  }

  ExprPtr ParseFilter(ExprPtr node, bool start_inline) {
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

  ExprPtr ParseTest(ExprPtr node) {
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

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<bool> soft_frames_;
  std::vector<bool> loop_frames_;
  std::vector<std::pair<std::string, int>> open_blocks_;  // tag name, line
  std::vector<std::pair<const Expr*, bool>> unknown_;      // unknown filter/test, inside a soft frame
};

}  // namespace

Body Parse(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace vllm::jinja
