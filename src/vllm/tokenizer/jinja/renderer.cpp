#include "renderer.h"

#include "builtins.h"
#include "operations.h"

namespace vllm::jinja {

const Value* Scope::Find(std::string_view name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent.get()) {
    if (const Value* value = scope->vars.Find(name)) return value;
  }
  return nullptr;
}

std::string Renderer::Run(const Body& body, const ValueDict& context) {
  // Empties every namespace when the render ends, however it ends (see GlobalFunctions).
  struct NamespaceReleaser {
    ~NamespaceReleaser() {
      for (const std::weak_ptr<Namespace>& weak : namespaces) {
        if (const std::shared_ptr<Namespace> ns = weak.lock()) ns->attributes = ValueDict();
      }
    }
    std::vector<std::weak_ptr<Namespace>>& namespaces;
  } releaser{namespaces_};
  const WorkBudget budget(limits_.max_steps);
  auto globals = std::make_shared<Scope>(nullptr);
  globals->vars = GlobalFunctions(namespaces_);
  auto top = std::make_shared<Scope>(globals);
  for (const auto& [name, value] : context.items()) top->vars.Set(name, value);
  std::string out;
  try {
    ExecBody(body, *top, out);
  } catch (const TemplateRaised& e) {
    throw ChatTemplateError(ChatTemplateError::Kind::kRaised, current_line_, e.what());
  } catch (const RenderError& e) {
    throw ChatTemplateError(ChatTemplateError::Kind::kRender, current_line_, e.what());
  } catch (const std::bad_alloc&) {
    throw ChatTemplateError(ChatTemplateError::Kind::kRender, current_line_, "out of memory while rendering");
  } catch (const std::exception& e) {
    // A value of an unexpected type reaching a builtin: still an error of this
    // template and these inputs, never a crash of the caller.
    throw ChatTemplateError(ChatTemplateError::Kind::kRender, current_line_,
                            std::string("internal error while rendering: ") + e.what());
  }
  return out;
}

void Renderer::Append(std::string& out, std::string_view text) {
  WorkBudget::Charge(static_cast<int64_t>(text.size() >> 6));
  output_bytes_ += text.size();
  if (output_bytes_ > limits_.max_output_bytes) {
    throw RenderError("rendered output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  out.append(text);
}

Renderer::Flow Renderer::ExecBody(const Body& body, Scope& scope, std::string& out) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = Exec(*stmt, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::Exec(const Stmt& stmt, Scope& scope, std::string& out) {
  Step(stmt.line);
  const DepthGuard guard(*this);
  switch (stmt.kind) {
    case StmtKind::kText: Append(out, stmt.text); return Flow::kNormal;
    case StmtKind::kOutput:
      Append(out, ToStr(Eval(*stmt.expr, scope), limits_.max_output_bytes - output_bytes_));
      return Flow::kNormal;
    case StmtKind::kIf: return ExecIf(stmt, scope, out);
    case StmtKind::kFor: return ExecFor(stmt, scope, out);
    case StmtKind::kSet: Assign(stmt.target, Eval(*stmt.expr, scope), scope); return Flow::kNormal;
    case StmtKind::kSetBlock: ExecSetBlock(stmt, scope); return Flow::kNormal;
    case StmtKind::kMacro: scope.vars.Set(stmt.name, MakeMacro(stmt, scope)); return Flow::kNormal;
    case StmtKind::kCallBlock: ExecCallBlock(stmt, scope, out); return Flow::kNormal;
    case StmtKind::kFilterBlock: ExecFilterBlock(stmt, scope, out); return Flow::kNormal;
    case StmtKind::kWith: return ExecWith(stmt, scope, out);
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: return ExecBody(stmt.body, *ChildScope(scope), out);
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::ExecIf(const Stmt& stmt, Scope& scope, std::string& out) {
  for (const auto& [condition, body] : stmt.branches) {
    if (Eval(*condition, scope).Truthy()) return ExecBody(body, scope, out);
  }
  return ExecBody(stmt.else_body, scope, out);
}

Renderer::Flow Renderer::ExecFor(const Stmt& stmt, Scope& scope, std::string& out) {
  std::shared_ptr<const ValueList> items = Iterate(Eval(*stmt.expr, scope));
  if (stmt.loop_filter) {
    // The `if` clause filters before iterating: loop.index and loop.length count kept items.
    ValueList kept;
    for (const Value& item : *items) {
      Step(stmt.line);
      const ScopePtr test_scope = ChildScope(scope);
      Assign(stmt.target, item, *test_scope);
      if (Eval(*stmt.loop_filter, *test_scope).Truthy()) kept.push_back(item);
    }
    items = std::make_shared<const ValueList>(std::move(kept));
  }
  for (size_t i = 0; i < items->size(); ++i) {
    Step(stmt.line);
    const ScopePtr iteration = ChildScope(scope);
    Assign(stmt.target, (*items)[i], *iteration);
    iteration->vars.Set("loop", Value::Loop(LoopInfo{items, i, 0}));
    if (ExecBody(stmt.body, *iteration, out) == Flow::kBreak) break;
  }
  if (items->empty()) return ExecBody(stmt.else_body, scope, out);
  return Flow::kNormal;
}

void Renderer::Assign(const AssignTarget& target, const Value& value, Scope& scope) {
  if (!target.attribute.empty()) {
    const Value* ns = scope.Find(target.names[0]);
    if (ns == nullptr || !ns->IsNamespace()) {
      throw RenderError("cannot assign attribute '" + target.attribute + "' on '" + target.names[0] +
                        "': it is not a namespace()");
    }
    ns->AsNamespace().attributes.Set(target.attribute, value);
    return;
  }
  if (!target.is_tuple) {
    scope.vars.Set(target.names[0], value);
    return;
  }
  const std::shared_ptr<const ValueList> parts = Iterate(value);
  if (parts->size() != target.names.size()) {
    throw RenderError(std::string(parts->size() < target.names.size() ? "not enough" : "too many") +
                      " values to unpack (expected " + std::to_string(target.names.size()) + ", got " +
                      std::to_string(parts->size()) + ")");
  }
  for (size_t i = 0; i < parts->size(); ++i) scope.vars.Set(target.names[i], (*parts)[i]);
}

std::string Renderer::Capture(const Body& body, Scope& scope) {
  std::string captured;
  ExecBody(body, *ChildScope(scope), captured);
  return captured;
}

void Renderer::ExecSetBlock(const Stmt& stmt, Scope& scope) {
  Value value = Value::String(Capture(stmt.body, scope));
  if (stmt.filter) value = EvalFilter(*stmt.filter, scope, value);
  Assign(stmt.target, value, scope);
}

void Renderer::ExecFilterBlock(const Stmt& stmt, Scope& scope, std::string& out) {
  const Value captured = Value::String(Capture(stmt.body, scope));
  Append(out, ToStr(EvalFilter(*stmt.filter, scope, captured)));
}

Renderer::Flow Renderer::ExecWith(const Stmt& stmt, Scope& scope, std::string& out) {
  const ScopePtr inner = ChildScope(scope);
  std::vector<Value> values;
  for (const ExprPtr& value : stmt.defaults) values.push_back(Eval(*value, scope));
  for (size_t i = 0; i < values.size(); ++i) inner->vars.Set(stmt.params[i], values[i]);
  return ExecBody(stmt.body, *inner, out);
}

Value Renderer::MakeMacro(const Stmt& macro, Scope& scope) {
  macro_scopes_.push_back(scope.shared_from_this());
  Scope* defining_scope = &scope;
  return Value::Function(macro.name, [this, &macro, defining_scope](CallArgs& args) {
    return CallMacro(macro, *defining_scope, args);
  });
}

// A macro call: parameters bound like Python's (missing ones are Undefined, defaults
// evaluated in the macro's scope), `caller` passed by a call block, body captured.
Value Renderer::CallMacro(const Stmt& macro, Scope& defining_scope, CallArgs& args) {
  if (++call_depth_ > limits_.max_call_depth) {
    throw RenderError("macro '" + macro.name + "' nests deeper than " + std::to_string(limits_.max_call_depth) +
                      " calls (runaway recursion?)");
  }
  const ScopePtr scope = ChildScope(defining_scope);
  if (args.positional.size() > macro.params.size()) {
    throw RenderError("macro '" + macro.name + "' takes not more than " + std::to_string(macro.params.size()) +
                      " argument(s)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) scope->vars.Set(macro.params[i], args.positional[i]);
  for (auto& [name, value] : args.keyword) {
    const bool known = std::find(macro.params.begin(), macro.params.end(), name) != macro.params.end();
    if (!known && name != "caller") throw RenderError("macro '" + macro.name + "' takes no keyword argument '" + name + "'");
    if (known && scope->vars.Find(name) != nullptr) {
      throw RenderError("macro '" + macro.name + "' got multiple values for argument '" + name + "'");
    }
    scope->vars.Set(name, value);
  }
  const size_t first_default = macro.params.size() - macro.defaults.size();
  for (size_t i = 0; i < macro.params.size(); ++i) {
    if (scope->vars.Find(macro.params[i]) != nullptr) continue;
    scope->vars.Set(macro.params[i], i >= first_default ? Eval(*macro.defaults[i - first_default], *scope)
                                                        : Value::Undefined("parameter '" + macro.params[i] +
                                                                           "' was not provided"));
  }
  std::string out;
  ExecBody(macro.body, *scope, out);
  --call_depth_;
  return Value::String(std::move(out));
}

void Renderer::ExecCallBlock(const Stmt& stmt, Scope& scope, std::string& out) {
  const Expr& call = *stmt.expr;
  Value callee = Eval(*call.operands[0], scope);
  CallArgs args = EvalArgs(call.call, scope);
  // `caller` is a macro whose body is the call block's body.
  args.keyword.emplace_back("caller", MakeMacro(stmt, scope));
  Append(out, ToStr(CallValue(callee, args)));
}

}  // namespace vllm::jinja
