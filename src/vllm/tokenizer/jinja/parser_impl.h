// The Parser class shared by parser.cpp (statements) and parser_expressions.cpp
// (expressions). Internal to the Jinja engine; the entry point is Parse() in parser.h.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ast.h"
#include "lexer.h"
#include "parser.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm::jinja::parser_detail {

inline ExprPtr MakeExpr(ExprKind kind, int line) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

inline StmtPtr MakeStmt(StmtKind kind, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = kind;
  stmt->line = line;
  return stmt;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body ParseTemplate();

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


  // ---- statements (parser.cpp) ----
  Body Subparse(const std::vector<std::string_view>& end_tags);
  [[noreturn]] void FailUnclosed(const std::vector<std::string_view>& end_tags) const;

  // parse_statements: ':'? '%}' body, stopping at one of end_tags (left current).
  Body ParseStatements(const std::vector<std::string_view>& end_tags, bool drop_end_tag);
  StmtPtr ParseStatement();
  StmtPtr ParseTag(const Token& tag);
  StmtPtr ParseIf();
  StmtPtr ParseFor();
  StmtPtr ParseSet();

  // Targets of set / for: name, name, ... (and ns.attr for set).
  AssignTarget ParseAssignTarget(const std::vector<std::string_view>& extra_end, bool with_namespace);
  void ParseSignature(Stmt& stmt);
  StmtPtr ParseMacro();
  StmtPtr ParseCallBlock();
  StmtPtr ParseFilterBlock();
  StmtPtr ParseWith();
  StmtPtr ParsePrint();
  StmtPtr ParseScope(std::string_view end_tag);


  // ---- expressions (parser_expressions.cpp) ----
  bool IsTupleEnd(const std::vector<std::string_view>& extra_end) const;

  // Expressions separated by commas form a tuple; one expression without a comma is itself.
  ExprPtr ParseTuple(bool with_condexpr, const std::vector<std::string_view>& extra_end, bool explicit_parentheses);
  ExprPtr ParseExpression(bool with_condexpr) { return with_condexpr ? ParseCondExpr() : ParseOr(); }

  ExprPtr ParseCondExpr();
  ExprPtr MakePair(ExprKind kind, ExprPtr lhs, ExprPtr rhs, int line);
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr MakeBinary(BinaryOp op, ExprPtr lhs, ExprPtr rhs, int line);
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParseList();
  ExprPtr ParseDict();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseFilterExpr(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node);
  // One subscript: an expression, or a slice start:stop:step (which takes `node` as its object).
  ExprPtr ParseSubscribed(ExprPtr& node, int line);
  CallSite ParseCallArgs();
  ExprPtr ParseCall(ExprPtr node);
  std::string ParseDottedName();
  ExprPtr ParseFilter(ExprPtr node, bool start_inline);
  ExprPtr ParseTest(ExprPtr node);

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<bool> soft_frames_;
  std::vector<bool> loop_frames_;
  std::vector<std::pair<std::string, int>> open_blocks_;  // tag name, line
  std::vector<std::pair<const Expr*, bool>> unknown_;      // unknown filter/test, inside a soft frame
};

}  // namespace vllm::jinja::parser_detail
