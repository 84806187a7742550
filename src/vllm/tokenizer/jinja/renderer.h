// Executes a parsed template: statements in renderer.cpp, expressions in evaluate.cpp.
// One Renderer serves one render call.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ast.h"
#include "value.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm::jinja {

// Variables of one scope; lookups walk to the parents, which children own. A scope
// that defines a macro is also kept by the renderer until the render ends: the macro
// holds a plain pointer to it, so a macro stored in its own scope makes no cycle.
struct Scope : std::enable_shared_from_this<Scope> {
  explicit Scope(std::shared_ptr<Scope> parent_scope) : parent(std::move(parent_scope)) {}
  const Value* Find(std::string_view name) const;

  ValueDict vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

inline ScopePtr ChildScope(Scope& parent) { return std::make_shared<Scope>(parent.shared_from_this()); }

class Renderer {
 public:
  explicit Renderer(const ChatTemplateLimits& limits) : limits_(limits) {}

  // Throws ChatTemplateError(kRender / kRaised) with the line being evaluated.
  std::string Run(const Body& body, const ValueDict& context);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Statements (renderer.cpp).
  Flow ExecBody(const Body& body, Scope& scope, std::string& out);
  Flow Exec(const Stmt& stmt, Scope& scope, std::string& out);
  Flow ExecIf(const Stmt& stmt, Scope& scope, std::string& out);
  Flow ExecFor(const Stmt& stmt, Scope& scope, std::string& out);
  void ExecSetBlock(const Stmt& stmt, Scope& scope);
  void ExecCallBlock(const Stmt& stmt, Scope& scope, std::string& out);
  void ExecFilterBlock(const Stmt& stmt, Scope& scope, std::string& out);
  Flow ExecWith(const Stmt& stmt, Scope& scope, std::string& out);
  std::string Capture(const Body& body, Scope& scope);
  void Assign(const AssignTarget& target, const Value& value, Scope& scope);
  Value MakeMacro(const Stmt& macro, Scope& scope);
  Value CallMacro(const Stmt& macro, Scope& defining_scope, CallArgs& args);
  void Append(std::string& out, std::string_view text);

  // Expressions (evaluate.cpp).
  Value Eval(const Expr& expr, Scope& scope);
  Value EvalFilter(const Expr& expr, Scope& scope, const std::optional<Value>& chain_input);
  Value EvalTest(const Expr& expr, Scope& scope);
  Value EvalCompare(const Expr& expr, Scope& scope);
  Value EvalCollection(const Expr& expr, Scope& scope);
  Value EvalSlice(const Expr& expr, Scope& scope);
  Value EvalConcat(const Expr& expr, Scope& scope);
  CallArgs EvalArgs(const CallSite& call, Scope& scope);
  void Step(int line);

  // Bounds the C++ recursion of one render (nested expressions inside nested macro
  // calls), so that no template can overflow the stack.
  static constexpr int kMaxEvalDepth = 2000;
  struct DepthGuard {
    explicit DepthGuard(Renderer& r);
    ~DepthGuard() { --renderer.eval_depth_; }
    Renderer& renderer;
  };

  const ChatTemplateLimits& limits_;
  std::vector<ScopePtr> macro_scopes_;
  std::vector<std::weak_ptr<Namespace>> namespaces_;
  size_t output_bytes_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int current_line_ = 0;
};

}  // namespace vllm::jinja
