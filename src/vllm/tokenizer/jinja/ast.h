// The parsed form of a Jinja template: expressions and statements, built once by
// the parser and only read while rendering (one template renders concurrently).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "value.h"

namespace vllm::jinja {

// Builtin filters and tests take the evaluated input and the call's arguments.
using FilterFunction = Value (*)(const Value& input, CallArgs& args);
using TestFunction = bool (*)(const Value& input, CallArgs& args);

enum class ExprKind {
  kLiteral,   // value
  kName,      // name
  kList,      // operands: items
  kTuple,     // operands: items
  kDict,      // operands: key0, value0, key1, value1, ...
  kGetAttr,   // operands[0].name
  kGetItem,   // operands[0][operands[1]]
  kSlice,     // operands[0][operands[1]:operands[2]:operands[3]], bounds may be null
  kCall,      // operands[0](call)
  kFilter,    // operands[0] | name(call); operands[0] is null for the chain of a filter block
  kTest,      // operands[0] is name(call)
  kNeg,       // -operands[0]
  kPos,       // +operands[0]
  kNot,       // not operands[0]
  kBinary,    // operands[0] binary_op operands[1]
  kAnd,       // operands[0] and operands[1] (Python: returns an operand)
  kOr,        // operands[0] or operands[1]
  kConcat,    // operands[0] ~ operands[1] ~ ...
  kCompare,   // operands[0] compare_ops[0] operands[1] compare_ops[1] operands[2] ... (chained)
  kCondExpr,  // operands[0] if operands[1] else operands[2] (else may be null)
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct CallSite {
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> operands;
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  CallSite call;
  // Resolved at parse time; null when the name is unknown inside a conditional branch
  // (jinja2 then fails only if the branch runs).
  FilterFunction filter = nullptr;
  TestFunction test = nullptr;
};

// Left side of `set`, `for` and `with`: a name, names to unpack, or namespace.attribute.
struct AssignTarget {
  std::vector<std::string> names;  // one name, or several for a tuple target
  bool is_tuple = false;
  std::string attribute;           // set ns.attribute = ...: names[0] is the namespace
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (condition, body)..., else_body
  kFor,          // for target in expr [if loop_filter]: body, else_body
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter]: body endset
  kMacro,        // macro name(params = defaults): body
  kCallBlock,    // call(params) expr: body (body is `caller`)
  kFilterBlock,  // filter filter: body
  kWith,         // with params[i] = defaults[i]...: body
  kBreak,
  kContinue,
  kScope,        // {% generation %}: body rendered as is
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  AssignTarget target;
  ExprPtr loop_filter;
  ExprPtr filter;  // kSetBlock / kFilterBlock: a kFilter chain whose innermost input is null
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // macro: defaults of the last params; with: one value per param
};

}  // namespace vllm::jinja
