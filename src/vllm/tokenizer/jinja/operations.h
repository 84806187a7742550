// Python semantics of the operations a template performs on values, as jinja2's
// immutable sandbox applies them: attribute and item lookup (methods first for `.`,
// items first for `[]`, missing ones giving Undefined), slicing, arithmetic,
// membership, iteration, len() and calls. Errors are RenderError with Python's words.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ast.h"
#include "value.h"

namespace vllm::jinja {

// Lists longer than this made by repetition or concatenation are refused (strings
// are bounded by kMaxValueSize): a template must not build a huge value in one step.
inline constexpr size_t kMaxListItems = size_t{1} << 20;

// obj.name
Value GetAttribute(const Value& object, const std::string& name);
// obj[key]
Value GetItem(const Value& object, const Value& key);
// obj[start:stop:step]; absent bounds are None.
Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step);

Value BinaryOperation(BinaryOp op, const Value& lhs, const Value& rhs);
Value Negate(const Value& operand);
Value Positive(const Value& operand);

// `item in container`.
bool Contains(const Value& container, const Value& item);
// The items `for x in value` visits: list items, str characters, dict keys;
// Undefined visits nothing. Throws for values that are not iterable.
std::shared_ptr<const ValueList> Iterate(const Value& value);
// dict.items(): a list of (key, value) tuples in insertion order.
Value ItemPairs(const ValueDict& dict);
// len(value); Undefined has length 0.
size_t Length(const Value& value);
// callee(args).
Value CallValue(const Value& callee, CallArgs& args);

// str.replace with Python's semantics, refusing results past kMaxValueSize.
std::string ReplaceChecked(std::string_view s, std::string_view old_part, std::string_view new_part, int64_t count);
// Throws when text built piece by piece has grown past kMaxValueSize.
void CheckBuiltSize(const std::string& text, std::string_view what);

// A bound method of a str, dict or list (`"a".upper`), if Python has one of that name.
std::optional<Value> LookupMethod(const Value& receiver, const std::string& name);

}  // namespace vllm::jinja
