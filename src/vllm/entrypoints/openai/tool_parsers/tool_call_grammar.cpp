#include "tool_call_grammar.h"

#include <algorithm>
#include <vector>

#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::openai {
namespace {

namespace so = structured_output;
using ojson = nlohmann::ordered_json;

[[noreturn]] void Fail(const std::string& message) { throw so::StructuredOutputError("tools: " + message); }

so::JsonSchemaOptions EmbeddedJsonOptions() {
  so::JsonSchemaOptions options;
  options.max_whitespace = 1;
  return options;
}

std::string NameOf(const ojson& tool) {
  if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
      !tool["function"].contains("name") || !tool["function"]["name"].is_string()) {
    Fail("a tool without function.name");
  }
  const std::string name = tool["function"]["name"].get<std::string>();
  if (name.empty() || name.find_first_of("<>\n") != std::string::npos) {
    Fail("the function name '" + name + "' cannot be written in a tool call (empty, or with '<', '>' or a newline)");
  }
  return name;
}

// The tool's parameters schema; a tool without one takes no arguments.
ojson ParametersOf(const ojson& tool) {
  const ojson& function = tool["function"];
  if (!function.contains("parameters") || function["parameters"].is_null()) {
    return ojson{{"type", "object"}, {"properties", ojson::object()}};
  }
  return function["parameters"];
}

so::Expr HermesCall(so::GrammarBuilder& b, const std::string& name, const ojson& parameters) {
  const so::Expr arguments = so::Expr::Rule(b.AddRule("arguments", so::JsonSchemaExpr(b, parameters, EmbeddedJsonOptions())));
  return so::Expr::Seq({so::Expr::Literal("<tool_call>\n{\"name\": " + ojson(name).dump() + ", \"arguments\": "),
                        arguments, so::Expr::Literal("}\n</tool_call>")});
}

// A qwen3_coder value of a "string" parameter: raw text (docs in the header).
so::Expr RawStringValue(so::GrammarBuilder& b, const std::string& where, const ojson& schema) {
  for (const char* keyword : {"pattern", "format", "const"}) {
    if (schema.contains(keyword)) Fail(where + " uses '" + keyword + "', which qwen3_coder string values do not support");
  }
  if (schema.contains("enum")) {
    std::vector<so::Expr> options;
    for (const ojson& value : schema["enum"]) {
      if (!value.is_string() || value.get<std::string>().find('<') != std::string::npos) {
        Fail(where + ": enum values of a qwen3_coder string parameter must be strings without '<'");
      }
      options.push_back(so::Expr::Literal(value.get<std::string>()));
    }
    if (options.empty()) Fail(where + ": an empty enum");
    return so::Expr::Alt(std::move(options));
  }
  const auto count = [&](const char* keyword, int32_t fallback) {
    if (!schema.contains(keyword)) return fallback;
    if (!schema[keyword].is_number_unsigned()) Fail(where + "/" + keyword + " must be a non-negative integer");
    return static_cast<int32_t>(std::min<uint64_t>(schema[keyword].get<uint64_t>(), 1 << 20));
  };
  const int32_t min = count("minLength", 0), max = count("maxLength", -1);
  if (max >= 0 && max < min) Fail(where + ": maxLength < minLength");
  const so::Expr character = so::Expr::Utf8(so::ComplementCodepoints({{'<', '<'}}));
  return so::Expr::Rule(b.AddRule("text", so::Expr::Repeat(character, min, max)));
}

so::Expr Qwen3CoderCall(so::GrammarBuilder& b, const std::string& name, const ojson& parameters) {
  std::vector<so::Expr> parts = {so::Expr::Literal("<tool_call>\n<function=" + name + ">\n")};
  if (parameters.contains("properties")) {
    const ojson& properties = parameters["properties"];
    if (!properties.is_object()) Fail(name + ": parameters.properties must be an object");
    std::vector<std::string> required;
    if (parameters.contains("required") && parameters["required"].is_array()) {
      for (const ojson& r : parameters["required"]) required.push_back(r.get<std::string>());
    }
    for (const auto& [key, schema] : properties.items()) {
      if (key.empty() || key.find_first_of("<>\n") != std::string::npos) {
        Fail(name + ": the parameter name '" + key + "' cannot be written in a qwen3_coder call");
      }
      const std::string where = name + "/properties/" + key;
      const bool is_string = schema.is_object() && schema.contains("type") && schema["type"] == "string";
      const so::Expr value = is_string ? RawStringValue(b, where, schema)
                                       : so::Expr::Rule(b.AddRule("value", so::JsonSchemaExpr(b, schema, EmbeddedJsonOptions())));
      so::Expr parameter = so::Expr::Seq({so::Expr::Literal("<parameter=" + key + ">\n"), value,
                                          so::Expr::Literal("\n</parameter>\n")});
      const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
      parts.push_back(is_required ? std::move(parameter) : so::Expr::Optional(std::move(parameter)));
    }
  }
  parts.push_back(so::Expr::Literal("</function>\n</tool_call>"));
  return so::Expr::Seq(std::move(parts));
}

}  // namespace

std::shared_ptr<const so::Grammar> ToolCallGrammar(const std::string& parser, const ojson& tools,
                                                   const std::optional<std::string>& function) {
  if (parser != "hermes" && parser != "qwen3_coder") Fail("no grammar for the tool-call parser '" + parser + "'");
  if (!tools.is_array() || tools.empty()) Fail("tool_choice needs a non-empty tools list");
  so::GrammarBuilder b;
  std::vector<so::Expr> calls;
  for (const ojson& tool : tools) {
    const std::string name = NameOf(tool);
    if (function && name != *function) continue;
    const ojson parameters = ParametersOf(tool);
    calls.push_back(parser == "hermes" ? HermesCall(b, name, parameters) : Qwen3CoderCall(b, name, parameters));
  }
  if (calls.empty()) Fail("tool_choice names the function '" + function.value_or("") + "', which tools do not list");
  const so::Expr call = so::Expr::Rule(b.AddRule("call", so::Expr::Alt(std::move(calls))));
  const so::Expr root = function ? call : so::Expr::Seq({call, so::Expr::Star(so::Expr::Seq({so::Expr::Byte('\n'), call}))});
  return std::make_shared<const so::Grammar>(b.Build(b.AddRule("root", root), "tool calls"));
}

}  // namespace vllm::openai
