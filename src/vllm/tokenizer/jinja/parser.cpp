#include "parser_impl.h"

namespace vllm::jinja {
namespace parser_detail {

Body Parser::ParseTemplate() {
  Body body = Subparse({});
  if (Current().type != TokenType::kEnd) Fail(Current(), "unexpected " + DescribeToken(Current()));
  for (const auto& [expr, soft] : unknown_) {
    if (!soft) Fail(expr->line, std::string("no ") + (expr->kind == ExprKind::kFilter ? "filter" : "test") +
                                    " named '" + expr->name + "'");
  }
  return body;
}

Body Parser::Subparse(const std::vector<std::string_view>& end_tags) {
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

[[noreturn]] void Parser::FailUnclosed(const std::vector<std::string_view>& end_tags) const {
  std::string wanted;
  for (std::string_view tag : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
  Fail(open_blocks_.empty() ? Current().line : open_blocks_.back().second,
       "unexpected end of template: '" + (open_blocks_.empty() ? "" : open_blocks_.back().first) +
           "' block is never closed (expected " + wanted + ")");
}

Body Parser::ParseStatements(const std::vector<std::string_view>& end_tags, bool drop_end_tag) {
  SkipOp(":");
  Expect(TokenType::kBlockEnd, "'%}'");
  Body body = Subparse(end_tags);
  if (drop_end_tag) Next();
  return body;
}

StmtPtr Parser::ParseStatement() {
  const Token& tag = Current();
  if (tag.type != TokenType::kName) Fail(tag, "expected a tag name, got " + DescribeToken(tag));
  open_blocks_.emplace_back(tag.text, tag.line);
  StmtPtr stmt = ParseTag(tag);
  open_blocks_.pop_back();
  return stmt;
}

StmtPtr Parser::ParseTag(const Token& tag) {
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

StmtPtr Parser::ParseIf() {
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

StmtPtr Parser::ParseFor() {
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

StmtPtr Parser::ParseSet() {
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

AssignTarget Parser::ParseAssignTarget(const std::vector<std::string_view>& extra_end, bool with_namespace) {
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

void Parser::ParseSignature(Stmt& stmt) {
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

StmtPtr Parser::ParseMacro() {
  auto stmt = MakeStmt(StmtKind::kMacro, Next().line);
  stmt->name = ExpectName().text;
  ParseSignature(*stmt);
  FrameGuard frame(*this, false, false);
  stmt->body = ParseStatements({"endmacro"}, true);
  return stmt;
}

StmtPtr Parser::ParseCallBlock() {
  auto stmt = MakeStmt(StmtKind::kCallBlock, Next().line);
  stmt->name = "caller";
  if (IsOp(Current(), "(")) ParseSignature(*stmt);
  stmt->expr = ParseExpression(true);
  if (stmt->expr->kind != ExprKind::kCall) Fail(stmt->line, "a call block needs a call expression");
  FrameGuard frame(*this, false, false);
  stmt->body = ParseStatements({"endcall"}, true);
  return stmt;
}

StmtPtr Parser::ParseFilterBlock() {
  auto stmt = MakeStmt(StmtKind::kFilterBlock, Next().line);
  stmt->filter = ParseFilter(nullptr, true);
  FrameGuard frame(*this, false, false);
  stmt->body = ParseStatements({"endfilter"}, true);
  return stmt;
}

StmtPtr Parser::ParseWith() {
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

StmtPtr Parser::ParsePrint() {
  auto stmt = MakeStmt(StmtKind::kOutput, Next().line);
  stmt->expr = ParseTuple(true, {}, false);
  return stmt;
}

StmtPtr Parser::ParseScope(std::string_view end_tag) {
  auto stmt = MakeStmt(StmtKind::kScope, Next().line);
  stmt->body = ParseStatements({end_tag}, true);
  return stmt;
}

}  // namespace parser_detail

Body Parse(const std::vector<Token>& tokens) { return parser_detail::Parser(tokens).ParseTemplate(); }

}  // namespace vllm::jinja
