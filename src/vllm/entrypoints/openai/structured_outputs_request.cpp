#include "structured_outputs_request.h"

#include "vllm/engine/structured_output_manager.h"
#include "vllm/entrypoints/openai/protocol.h"
#include "vllm/entrypoints/sampling_params_json.h"

namespace vllm::openai {
namespace {

using ojson = nlohmann::ordered_json;

bool Present(const ojson& object, const char* key) { return object.contains(key) && !object[key].is_null(); }

[[noreturn]] void WrongType(const std::string& field, const char* expected, const ojson& value) {
  BadRequest(WrongTypeMessage(field, expected, nlohmann::json::parse(value.dump())), field);
}

// A schema given as an object or as its JSON text (vLLM takes both).
std::string SchemaText(const ojson& value, const std::string& field) {
  if (value.is_object() || value.is_boolean()) return value.dump();
  if (value.is_string()) return value.get<std::string>();
  WrongType(field, "a JSON schema (an object or its JSON text)", value);
}

std::string Text(const ojson& value, const std::string& field) {
  if (!value.is_string()) WrongType(field, "a string", value);
  return value.get<std::string>();
}

std::vector<std::string> Choices(const ojson& value, const std::string& field) {
  if (!value.is_array() || value.empty()) WrongType(field, "a non-empty list of strings", value);
  std::vector<std::string> choices;
  for (const ojson& choice : value) choices.push_back(Text(choice, field));
  return choices;
}

bool Flag(const ojson& value, const std::string& field) {
  if (!value.is_boolean()) WrongType(field, "true or false", value);
  return value.get<bool>();
}

// The one constraint of a request: a second one is a 400 naming it.
class Collector {
 public:
  StructuredOutputsParams& Take(const std::string& field) {
    if (result_.params && result_.params->NumConstraints() > 0) {
      BadRequest("'" + field + "' and '" + result_.field +
                     "' both constrain the output; send one structured output per request",
                 field);
    }
    if (!result_.params) result_.params.emplace();
    result_.field = field;
    return *result_.params;
  }
  StructuredOutputsParams& Options() {
    if (!result_.params) result_.params.emplace();
    return *result_.params;
  }
  RequestStructuredOutputs Done() {
    if (result_.params && result_.params->NumConstraints() == 0) {
      BadRequest("structured_outputs sets no constraint: give one of json, regex, choice, grammar, json_object",
                 "structured_outputs");
    }
    return std::move(result_);
  }

 private:
  RequestStructuredOutputs result_;
};

void ReadResponseFormat(const ojson& format, Collector& out) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    WrongType("response_format", "an object with a type (text, json_object or json_schema)", format);
  }
  const std::string type = format["type"].get<std::string>();
  for (const auto& [key, value] : format.items()) {
    if (key != "type" && key != "json_schema") {
      BadRequest("unknown field '" + key + "' of response_format (OpenAI's are type and json_schema)", "response_format");
    }
  }
  if (type == "text") return;
  if (type == "json_object") {
    out.Take("response_format").json_object = true;
    return;
  }
  if (type != "json_schema") {
    BadRequest("response_format type '" + type + "' is not supported: send text, json_object or json_schema",
               "response_format");
  }
  if (!Present(format, "json_schema") || !format["json_schema"].is_object()) {
    BadRequest("response_format of type json_schema needs a json_schema object with the schema", "response_format");
  }
  const ojson& spec = format["json_schema"];
  for (const auto& [key, value] : spec.items()) {
    if (key != "name" && key != "schema" && key != "strict" && key != "description") {
      BadRequest("unknown field '" + key + "' of response_format.json_schema (OpenAI's are name, description, schema "
                 "and strict)",
                 "response_format");
    }
  }
  if (Present(spec, "strict")) Flag(spec["strict"], "response_format");
  // OpenAI's default when the schema is left out: any JSON value matches.
  out.Take("response_format").json = Present(spec, "schema") ? SchemaText(spec["schema"], "response_format") : "{}";
}

void ReadStructuredOutputsObject(const ojson& so, Collector& out) {
  if (!so.is_object()) WrongType("structured_outputs", "an object", so);
  const std::string field = "structured_outputs";
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    if (key == "json") {
      out.Take(field).json = SchemaText(value, field);
    } else if (key == "regex") {
      out.Take(field).regex = Text(value, field);
    } else if (key == "choice") {
      out.Take(field).choice = Choices(value, field);
    } else if (key == "grammar") {
      out.Take(field).grammar = Text(value, field);
    } else if (key == "json_object") {
      if (Flag(value, field)) out.Take(field).json_object = true;
    } else if (key == "disable_any_whitespace") {
      out.Options().disable_any_whitespace = Flag(value, field);
    } else if (key == "disable_fallback") {
      Flag(value, field);  // there is one grammar engine and it never falls back to another
    } else {
      BadRequest("structured_outputs." + key + " is not supported by vllm-cpp (supported: json, regex, choice, "
                 "grammar, json_object, disable_any_whitespace, disable_fallback)",
                 field);
    }
  }
}

}  // namespace

RequestStructuredOutputs ReadStructuredOutputs(const ojson& body) {
  Collector out;
  if (Present(body, "response_format")) ReadResponseFormat(body["response_format"], out);
  if (Present(body, "structured_outputs")) ReadStructuredOutputsObject(body["structured_outputs"], out);
  if (Present(body, "guided_json")) out.Take("guided_json").json = SchemaText(body["guided_json"], "guided_json");
  if (Present(body, "guided_regex")) out.Take("guided_regex").regex = Text(body["guided_regex"], "guided_regex");
  if (Present(body, "guided_choice")) out.Take("guided_choice").choice = Choices(body["guided_choice"], "guided_choice");
  if (Present(body, "guided_grammar")) {
    out.Take("guided_grammar").grammar = Text(body["guided_grammar"], "guided_grammar");
  }
  RequestStructuredOutputs result = out.Done();
  if (result.params) CheckStructuredOutputsCompile(*result.params, result.field);
  return result;
}

void CheckStructuredOutputsCompile(const StructuredOutputsParams& params, const std::string& field) {
  try {
    GrammarOfSpec(params);
  } catch (const structured_output::StructuredOutputError& e) {
    BadRequest(std::string(e.what()) + " (in '" + field + "')", field);
  }
}

}  // namespace vllm::openai
