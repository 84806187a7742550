// JSON schema -> grammar. One rule per object member and per $ref target; the rest
// inline, so that a string's characters live in a rule of their own referenced from
// one place, which keeps their token masks context-independent (mask_cache.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "integer_range.h"
#include "number_range.h"
#include "regex.h"
#include "tokenizer/utf8.h"
#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::structured_output {

namespace {

using json = nlohmann::ordered_json;

// Keywords that only describe: they never change which documents are valid.
const std::set<std::string> kAnnotations = {"title",   "description", "default",  "examples",   "$schema",
                                            "$id",     "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",   "definitions"};
// Numeric bounds (on integers any value; on numbers integral values, refused otherwise by name).
constexpr const char* kBounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::map<std::string, std::set<std::string>> kTypeKeywords = {
    {"string", {"minLength", "maxLength", "pattern", "format"}},
    {"integer", {std::begin(kBounds), std::end(kBounds)}},
    {"number", {std::begin(kBounds), std::end(kBounds)}},
    {"boolean", {}},
    {"null", {}},
    {"object", {"properties", "required", "additionalProperties", "minProperties", "maxProperties"}},
    {"array", {"items", "minItems", "maxItems"}},
};
const std::set<std::string> kGeneralKeywords = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};

// Formats as regexes over the decoded string.
const std::map<std::string, std::string> kFormats = {
    {"date", R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))"},
    {"time", R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"date-time",
     R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"ipv4", R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"},
};

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Where(const std::string& pointer) { return "#" + pointer; }

bool JsonHasType(const json& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  return v.is_array();
}

class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(GrammarBuilder& builder, const json& root, const JsonSchemaOptions& options)
      : b_(builder), root_(root), options_(options) {}

  Grammar CompileSchema() {
    const int32_t root = b_.AddRule("root", Schema(root_, ""));
    return b_.Build(root, "json_schema");
  }

  Expr Document() { return Schema(root_, ""); }

  Grammar CompileAnyObject() {
    AnyValue();
    return b_.Build(b_.AddRule("root", Expr::Rule(any_object_)), "json_object");
  }

 private:
  [[noreturn]] static void Fail(const std::string& message, const std::string& pointer) {
    throw StructuredOutputError("json_schema: " + message + " at " + Where(pointer));
  }

  Expr Ws() const {
    ByteSet ws;
    for (char c : {' ', '\t', '\n', '\r'}) ws.Add(static_cast<uint8_t>(c));
    if (options_.max_whitespace == 0) return Expr::Empty();
    return Expr::Repeat(Expr::Bytes(ws), 0, options_.max_whitespace);
  }
  Expr Punct(char c) const { return Expr::Seq({Ws(), Expr::Byte(static_cast<uint8_t>(c)), Ws()}); }

  // The whole JSON grammar for values without constraints, defined once.
  Expr AnyValue() {
    if (any_value_ >= 0) return Expr::Rule(any_value_);
    any_value_ = b_.DeclareRule("value");
    any_object_ = b_.DeclareRule("object");
    const int32_t array = b_.DeclareRule("array");
    const int32_t member = b_.AddRule("member", Expr::Seq({PlainString(), Punct(':'), Expr::Rule(any_value_)}));
    b_.DefineRule(any_object_, Expr::Seq({Expr::Byte('{'), Ws(),
                                          Expr::Optional(Expr::Seq({Expr::Rule(member),
                                                                    Expr::Star(Expr::Seq({Punct(','), Expr::Rule(member)}))})),
                                          Ws(), Expr::Byte('}')}));
    b_.DefineRule(array, Expr::Seq({Expr::Byte('['), Ws(),
                                    Expr::Optional(Expr::Seq({Expr::Rule(any_value_),
                                                              Expr::Star(Expr::Seq({Punct(','), Expr::Rule(any_value_)}))})),
                                    Ws(), Expr::Byte(']')}));
    b_.DefineRule(any_value_, Expr::Alt({Expr::Rule(any_object_), Expr::Rule(array), PlainString(), Number(false),
                                         Expr::Literal("true"), Expr::Literal("false"), Expr::Literal("null")}));
    return Expr::Rule(any_value_);
  }

  // A string without constraints: one shared rule.
  Expr PlainString() {
    if (plain_string_ < 0) plain_string_ = b_.AddRule("string", StringOf(0, -1));
    return Expr::Rule(plain_string_);
  }

  static Expr StringOf(int32_t min, int32_t max) {
    return Expr::Seq({Expr::Byte('"'), Expr::Repeat(JsonChar(), min, max), Expr::Byte('"')});
  }

  // One character of a JSON string: itself, a short escape or \uXXXX (no surrogates,
  // so that every escape decodes to one character).
  static Expr JsonChar() {
    ByteSet hex, short_escape;
    for (char c : std::string("0123456789abcdefABCDEF")) hex.Add(static_cast<uint8_t>(c));
    for (char c : std::string("\"\\/bfnrt")) short_escape.Add(static_cast<uint8_t>(c));
    ByteSet below_d, d, low_oct, e_f;
    for (char c : std::string("0123456789abcABC")) below_d.Add(static_cast<uint8_t>(c));
    for (char c : std::string("dD")) d.Add(static_cast<uint8_t>(c));
    low_oct.AddRange('0', '7');
    for (char c : std::string("efEF")) e_f.Add(static_cast<uint8_t>(c));
    const Expr h = Expr::Bytes(hex);
    const Expr unicode = Expr::Alt({Expr::Seq({Expr::Bytes(below_d), h, h, h}), Expr::Seq({Expr::Bytes(d), Expr::Bytes(low_oct), h, h}),
                                    Expr::Seq({Expr::Bytes(e_f), h, h, h})});
    return Expr::Alt({Expr::Utf8(ComplementCodepoints({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}})),
                      Expr::Seq({Expr::Byte('\\'), Expr::Alt({Expr::Bytes(short_escape), Expr::Seq({Expr::Byte('u'), unicode})})})});
  }

  // Numbers: one shared rule per kind. The integer part has at most 100 digits and
  // an exponent at most 2, so every number the grammar admits fits a double and
  // parses with C++ JSON readers (nlohmann refuses 1e999 as an overflow).
  Expr Number(bool integer) {
    int32_t& rule = integer ? integer_rule_ : number_rule_;
    if (rule >= 0) return Expr::Rule(rule);
    ByteSet digit, nonzero, exp, sign;
    digit.AddRange('0', '9');
    nonzero.AddRange('1', '9');
    exp.Add('e');
    exp.Add('E');
    sign.Add('+');
    sign.Add('-');
    std::vector<Expr> parts = {
        Expr::Optional(Expr::Byte('-')),
        Expr::Alt({Expr::Byte('0'), Expr::Seq({Expr::Bytes(nonzero), Expr::Repeat(Expr::Bytes(digit), 0, 99)})})};
    if (!integer) {
      parts.push_back(Expr::Optional(Expr::Seq({Expr::Byte('.'), Expr::Repeat(Expr::Bytes(digit), 1, -1)})));
      parts.push_back(Expr::Optional(
          Expr::Seq({Expr::Bytes(exp), Expr::Optional(Expr::Bytes(sign)), Expr::Repeat(Expr::Bytes(digit), 1, 2)})));
    }
    rule = b_.AddRule(integer ? "integer" : "number", Expr::Seq(std::move(parts)));
    return Expr::Rule(rule);
  }

  void CheckKeywords(const json& s, const std::string& pointer, const std::set<std::string>& allowed) const {
    for (const auto& item : s.items()) {
      const std::string& key = item.key();  // not a structured binding: clang 14's lambdas cannot capture one
      if (kAnnotations.count(key) || allowed.count(key)) continue;
      const bool known = kGeneralKeywords.count(key) ||
                         std::any_of(kTypeKeywords.begin(), kTypeKeywords.end(),
                                     [&](const auto& t) { return t.second.count(key) > 0; });
      Fail(std::string(known ? "keyword \"" : "unsupported keyword \"") + key + "\"" +
               (known ? " is not supported together with the other keywords of this schema" : ""),
           pointer + "/" + PointerToken(key));
    }
  }

  Expr Schema(const json& s, const std::string& pointer) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) Fail("the schema false admits no value", pointer);
      return AnyValue();
    }
    if (!s.is_object()) Fail("a schema must be an object or a boolean, not " + std::string(s.type_name()), pointer);
    if (s.contains("$ref")) {
      CheckKeywords(s, pointer, {"$ref"});
      return Ref(s["$ref"], pointer + "/$ref");
    }
    for (const char* combinator : {"anyOf", "oneOf"}) {
      if (!s.contains(combinator)) continue;
      CheckKeywords(s, pointer, {combinator});
      const json& options = s[combinator];
      if (!options.is_array() || options.empty()) Fail(std::string(combinator) + " must be a non-empty array", pointer);
      std::vector<Expr> alts;
      for (size_t i = 0; i < options.size(); ++i) {
        alts.push_back(Schema(options[i], pointer + "/" + combinator + "/" + std::to_string(i)));
      }
      return Expr::Alt(std::move(alts));
    }
    if (s.contains("allOf")) {
      CheckKeywords(s, pointer, {"allOf"});
      const json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) Fail("allOf with other than one schema is not supported", pointer + "/allOf");
      return Schema(all[0], pointer + "/allOf/0");
    }
    const std::vector<std::string> types = Types(s, pointer);
    if (s.contains("const") || s.contains("enum")) return Enumerated(s, types, pointer);
    std::set<std::string> allowed = {"type"};
    for (const std::string& t : types) allowed.insert(kTypeKeywords.at(t).begin(), kTypeKeywords.at(t).end());
    CheckKeywords(s, pointer, allowed);
    if (types.empty()) return AnyValue();
    std::vector<Expr> alts;
    for (const std::string& t : types) alts.push_back(Typed(t, s, pointer));
    return Expr::Alt(std::move(alts));
  }

  // The types a schema allows: its "type", or the one its keywords imply; empty = any.
  std::vector<std::string> Types(const json& s, const std::string& pointer) const {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      for (const json& one : t.is_array() ? t : json::array({t})) {
        if (!one.is_string() || !kTypeKeywords.count(one.get<std::string>())) {
          Fail("\"type\" must name JSON types (string, integer, number, boolean, null, object, array), not " + one.dump(),
               pointer + "/type");
        }
        types.push_back(one.get<std::string>());
      }
      if (types.empty()) Fail("an empty \"type\" list admits no value", pointer + "/type");
      return types;
    }
    // A bound alone says nothing of the type (non-numbers pass it): not guessed.
    if (const char* bound = FirstBound(s)) {
      Fail(std::string("\"") + bound + "\" without \"type\": \"integer\" or \"number\" is not supported",
           pointer + "/" + bound);
    }
    for (const auto& [type, keywords] : kTypeKeywords) {
      for (const std::string& k : keywords) {
        if (s.contains(k)) return {type};
      }
    }
    return types;
  }

  Expr Enumerated(const json& s, const std::vector<std::string>& types, const std::string& pointer) {
    CheckKeywords(s, pointer, {"type", "const", "enum"});
    const bool is_const = s.contains("const");
    const json values = is_const ? json::array({s["const"]}) : s["enum"];
    const std::string where = pointer + (is_const ? "/const" : "/enum");
    if (!values.is_array()) Fail("enum must be an array", where);
    std::vector<Expr> alts;
    for (const json& v : values) {
      if (types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) { return JsonHasType(v, t); })) {
        alts.push_back(Expr::Literal(v.dump()));
      }
    }
    if (alts.empty()) Fail("no value of the enum or const has the schema's type: nothing can match", where);
    return Expr::Alt(std::move(alts));
  }

  Expr Ref(const json& ref, const std::string& pointer) {
    if (!ref.is_string()) Fail("$ref must be a string", pointer);
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return Expr::Rule(it->second);
    if (target.empty() || target[0] != '#') Fail("$ref \"" + target + "\" is not supported (only local refs \"#...\")", pointer);
    const json* node = nullptr;
    try {
      node = &root_.at(json::json_pointer(target.substr(1)));
    } catch (const json::exception&) {
      Fail("$ref \"" + target + "\" does not resolve within the schema", pointer);
    }
    const size_t slash = target.rfind('/');
    const int32_t rule = b_.DeclareRule(slash == std::string::npos ? "root_ref" : target.substr(slash + 1));
    refs_.emplace(target, rule);
    b_.DefineRule(rule, Schema(*node, target.substr(1)));
    return Expr::Rule(rule);
  }

  static int32_t Count(const json& s, const char* key, int32_t fallback, const std::string& pointer) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000) {
      Fail(std::string(key) + " must be a non-negative integer up to 100000", pointer + "/" + key);
    }
    return static_cast<int32_t>(v.get<int64_t>());
  }

  Expr Typed(const std::string& type, const json& s, const std::string& pointer) {
    if (type == "string") return String(s, pointer);
    if (type == "integer") return HasBounds(s) ? IntegerBounds(s, pointer) : Number(true);
    if (type == "number") return HasBounds(s) ? NumberBounds(s, pointer) : Number(false);
    if (type == "boolean") return Expr::Alt({Expr::Literal("true"), Expr::Literal("false")});
    if (type == "null") return Expr::Literal("null");
    if (type == "object") return Object(s, pointer);
    return Array(s, pointer);
  }

  static bool HasBounds(const json& s) { return FirstBound(s) != nullptr; }
  static const char* FirstBound(const json& s) {
    for (const char* key : kBounds) {
      if (s.contains(key)) return key;
    }
    return nullptr;
  }

  // minimum / maximum (inclusive) and exclusiveMinimum / exclusiveMaximum (numbers, as
  // since draft 6) as the integers they allow: [ceil(min), floor(max)], exclusive
  // bounds one further in.
  // The value of bound `key` of s: a number within +-10^18 (magnitudes stay in int64).
  static double BoundValue(const json& s, const char* key, const std::string& where) {
    constexpr double kLimit = 1e18;
    const json& v = s[key];
    if (!v.is_number()) {
      Fail(std::string(key) + " must be a number" + (v.is_boolean() ? " (draft 4's boolean form is not supported)" : ""),
           where);
    }
    const double value = v.get<double>();
    if (!(std::abs(value) <= kLimit)) Fail(std::string(key) + " must be within +-10^18", where);
    return value;
  }

  static Expr IntegerBounds(const json& s, const std::string& pointer) {
    std::optional<int64_t> lo, hi;
    for (const char* key : kBounds) {
      if (!s.contains(key)) continue;
      const json& v = s[key];
      const std::string where = pointer + "/" + key;
      const double value = BoundValue(s, key, where);
      const std::string name = key;
      const bool lower = name == "minimum" || name == "exclusiveMinimum", exclusive = name.rfind("exclusive", 0) == 0;
      int64_t bound;
      if (v.is_number_integer()) {
        bound = v.get<int64_t>() + (exclusive ? (lower ? 1 : -1) : 0);
      } else if (lower) {
        bound = static_cast<int64_t>(exclusive ? std::floor(value) + 1 : std::ceil(value));
      } else {
        bound = static_cast<int64_t>(exclusive ? std::ceil(value) - 1 : std::floor(value));
      }
      if (lower) lo = lo ? std::max(*lo, bound) : bound;
      else hi = hi ? std::min(*hi, bound) : bound;
    }
    if (lo && hi && *lo > *hi) Fail("no integer lies within the bounds: nothing can match", pointer);
    return IntegerRange(lo, hi);
  }

  // The same keywords on numbers (number_range.h), each bound the decimal of its
  // shortest spelling: the tightest lower and upper bound (at equal values the
  // exclusive one). Bounded numbers are spelled without an exponent.
  static Expr NumberBounds(const json& s, const std::string& pointer) {
    std::optional<NumberBound> lo, hi;
    for (const char* key : kBounds) {
      if (!s.contains(key)) continue;
      const std::string where = pointer + "/" + key;
      BoundValue(s, key, where);  // a number within +-10^18
      const std::string name = key;
      const std::optional<NumberBound> bound = DecimalOf(s[key].dump(), name.rfind("exclusive", 0) == 0);
      if (!bound) Fail(std::string(key) + " " + s[key].dump() + " has more than 40 fraction digits", where);
      if (name == "minimum" || name == "exclusiveMinimum") {
        const int order = lo ? CompareDecimals(*bound, *lo) : 1;
        if (order > 0 || (order == 0 && bound->exclusive)) lo = bound;
      } else {
        const int order = hi ? CompareDecimals(*bound, *hi) : -1;
        if (order < 0 || (order == 0 && bound->exclusive)) hi = bound;
      }
    }
    std::optional<Expr> range = NumberRange(lo, hi);
    if (!range) Fail("no number lies within the bounds: nothing can match", pointer);
    return std::move(*range);
  }

  Expr String(const json& s, const std::string& pointer) {
    const int32_t min = Count(s, "minLength", 0, pointer), max = Count(s, "maxLength", -1, pointer);
    if (max >= 0 && max < min) Fail("maxLength < minLength: nothing can match", pointer);
    const bool bounded = s.contains("minLength") || s.contains("maxLength");
    for (const char* key : {"pattern", "format"}) {
      if (!s.contains(key)) continue;
      if (bounded || (s.contains("pattern") && s.contains("format"))) {
        Fail(std::string("\"") + key + "\" together with minLength/maxLength or another of pattern/format is not supported",
             pointer + "/" + key);
      }
      const std::string where = pointer + "/" + key;
      if (!s[key].is_string()) Fail(std::string(key) + " must be a string", where);
      std::string regex = s[key].get<std::string>();
      if (std::string(key) == "format") {
        auto it = kFormats.find(regex);
        if (it == kFormats.end()) {
          Fail("unsupported format \"" + regex + "\" (supported: date, time, date-time, uuid, ipv4)", where);
        }
        regex = it->second;
      }
      return Expr::Seq({Expr::Byte('"'), RegexToExpr(regex, true, "json_schema " + Where(where)), Expr::Byte('"')});
    }
    if (!bounded) return PlainString();
    return StringOf(min, max);
  }

  Expr Object(const json& s, const std::string& pointer) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) Fail("properties must be an object", pointer + "/properties");
    std::set<std::string> required;
    if (s.contains("required")) {
      for (const json& r : s["required"]) {
        if (!r.is_string()) Fail("required must list property names", pointer + "/required");
        if (!props.contains(r.get<std::string>())) {
          Fail("required property \"" + r.get<std::string>() + "\" is not in properties (not supported)",
               pointer + "/required");
        }
        required.insert(r.get<std::string>());
      }
    }
    // Where "additionalProperties" is absent, `strict` decides for objects that list
    // properties; an object schema without them admits any members.
    json additional = s.contains("additionalProperties") ? s["additionalProperties"]
                                                         : json(!(options_.strict && s.contains("properties")));
    std::optional<Expr> extra_member;
    if (!(additional.is_boolean() && !additional.get<bool>())) {
      const Expr value = Schema(additional, pointer + "/additionalProperties");
      std::vector<std::u32string> declared;
      for (const auto& [key, unused] : props.items()) declared.push_back(Codepoints(key));
      const Expr key = declared.empty() ? PlainString()
                                        : Expr::Seq({Expr::Byte('"'), KeyNotIn(declared, 0), Expr::Byte('"')});
      extra_member = Expr::Rule(b_.AddRule("extra_member", Expr::Seq({key, Punct(':'), value})));
    }
    std::vector<std::pair<std::string, const json*>> members;
    for (const auto& [key, value] : props.items()) members.emplace_back(key, &value);
    if (s.contains("minProperties") || s.contains("maxProperties")) {
      return CountedObject(s, pointer, members, required, extra_member);
    }
    // Members in the order of "properties". After(i): the rest from property i on,
    // given that one member is already written (so each starts with a comma); First(i):
    // the same with no member written yet.
    const Expr tail = extra_member ? Expr::Star(Expr::Seq({Punct(','), *extra_member})) : Expr::Empty();
    Expr after = tail;
    Expr first = extra_member ? Expr::Optional(Expr::Seq({*extra_member, tail})) : Expr::Empty();
    for (size_t k = members.size(); k-- > 0;) {
      const std::string& key = members[k].first;
      const Expr member = Member(key, *members[k].second, pointer);
      const int32_t after_rule = b_.AddRule("after_" + key, Expr::Empty());
      const int32_t first_rule = b_.AddRule("first_" + key, Expr::Empty());
      const Expr with_comma = Expr::Seq({Punct(','), member, after});
      const Expr without_comma = Expr::Seq({member, after});
      if (required.count(key)) {
        b_.DefineRule(after_rule, with_comma);
        b_.DefineRule(first_rule, without_comma);
      } else {
        b_.DefineRule(after_rule, Expr::Alt({with_comma, after}));
        b_.DefineRule(first_rule, Expr::Alt({without_comma, first}));
      }
      after = Expr::Rule(after_rule);
      first = Expr::Rule(first_rule);
    }
    return Expr::Seq({Expr::Byte('{'), Ws(), first, Ws(), Expr::Byte('}')});
  }

  Expr Member(const std::string& key, const json& schema, const std::string& pointer) {
    return Expr::Rule(b_.AddRule("prop_" + key, Expr::Seq({Expr::Literal(json(key).dump()), Punct(':'),
                                                           Schema(schema, pointer + "/properties/" + PointerToken(key))})));
  }

  // An object with minProperties / maxProperties: the members in the order of
  // "properties", then extra members; State(k, c) = the rest from property k on with c
  // declared members written (c > 0: the next starts with a comma). maxProperties counts
  // every member. minProperties counts the declared ones only: nothing keeps the names
  // of extra members apart (two "" members are one member once parsed), so they cannot
  // make up the minimum; a minimum above the declared properties is refused. Both
  // bounds are at most kMaxCountedProperties.
  static constexpr int32_t kMaxCountedProperties = 64;
  Expr CountedObject(const json& s, const std::string& pointer,
                     const std::vector<std::pair<std::string, const json*>>& members,
                     const std::set<std::string>& required, const std::optional<Expr>& extra) {
    for (const char* key : {"minProperties", "maxProperties"}) {
      if (s.contains(key) && Count(s, key, 0, pointer) > kMaxCountedProperties) {
        Fail(std::string(key) + " above " + std::to_string(kMaxCountedProperties) + " is not supported",
             pointer + "/" + key);
      }
    }
    const int32_t lo = Count(s, "minProperties", 0, pointer), hi = Count(s, "maxProperties", -1, pointer);
    if (hi >= 0 && hi < lo) Fail("maxProperties < minProperties: nothing can match", pointer);
    const int32_t n = static_cast<int32_t>(members.size());
    if (lo > n) {
      Fail("minProperties " + std::to_string(lo) + " above the " + std::to_string(n) +
               " declared properties is not supported (extra members' names cannot be kept distinct)",
           pointer + "/minProperties");
    }
    const int32_t top = hi >= 0 ? std::min(hi, n) : n;  // declared members that can be written
    std::vector<std::vector<std::optional<Expr>>> state(static_cast<size_t>(n) + 1,
                                                        std::vector<std::optional<Expr>>(static_cast<size_t>(top) + 1));
    const auto comma = [&](int32_t c) { return c > 0 ? Punct(',') : Expr::Empty(); };
    const auto as_rule = [&](std::vector<Expr> options, int32_t k, int32_t c) -> std::optional<Expr> {
      if (options.empty()) return std::nullopt;
      Expr e = options.size() == 1 ? std::move(options[0]) : Expr::Alt(std::move(options));
      return Expr::Rule(b_.AddRule("props_" + std::to_string(k) + "_" + std::to_string(c), std::move(e)));
    };
    for (int32_t c = 0; c <= top; ++c) {  // after the declared members: up to hi - c extra ones
      if (c < lo) continue;
      const int32_t room = hi >= 0 ? hi - c : -1;
      std::vector<Expr> options = {Expr::Empty()};
      if (extra && room != 0) {
        const Expr more = Expr::Repeat(Expr::Seq({Punct(','), *extra}), 0, room < 0 ? -1 : room - 1);
        options.push_back(c > 0 ? Expr::Seq({Punct(','), *extra, more}) : Expr::Seq({*extra, more}));
      }
      state[static_cast<size_t>(n)][static_cast<size_t>(c)] = as_rule(std::move(options), n, c);
    }
    for (int32_t k = n; k-- > 0;) {
      const Expr member = Member(members[static_cast<size_t>(k)].first, *members[static_cast<size_t>(k)].second, pointer);
      const bool is_required = required.count(members[static_cast<size_t>(k)].first) > 0;
      for (int32_t c = 0; c <= std::min(k, top); ++c) {
        std::vector<Expr> options;
        const auto& next = state[static_cast<size_t>(k) + 1];
        if (c + 1 <= top && next[static_cast<size_t>(c) + 1]) {
          options.push_back(Expr::Seq({comma(c), member, *next[static_cast<size_t>(c) + 1]}));
        }
        if (!is_required && next[static_cast<size_t>(c)]) options.push_back(*next[static_cast<size_t>(c)]);
        state[static_cast<size_t>(k)][static_cast<size_t>(c)] = as_rule(std::move(options), k, c);
      }
    }
    if (!state[0][0]) Fail("no object has a member count within minProperties / maxProperties here", pointer);
    return Expr::Seq({Expr::Byte('{'), Ws(), *state[0][0], Ws(), Expr::Byte('}')});
  }

  static std::u32string Codepoints(const std::string& key) {
    std::u32string out;
    for (size_t i = 0; i < key.size();) {
      const utf8::Sequence seq = utf8::ScanSequence(key, i);
      out += seq.kind == utf8::Sequence::kValid ? seq.code_point : U'\uFFFD';
      i += std::max<size_t>(seq.length, 1);
    }
    return out;
  }

  // The content of a key string other than the `keys` (from character `depth` on), in
  // canonical spelling (JsonStringChars: each character has one encoding), so that a
  // declared property cannot come back as an extra member. A trie over characters:
  // stop where no key ends, leave the trie with a character no key continues with,
  // or follow one that some key does. The characters after leaving stay inline (not
  // one shared rule): their cache entries then reach past the key's closing quote,
  // which leaves far fewer uncertain tokens to check per step.
  static Expr KeyNotIn(const std::vector<std::u32string>& keys, size_t depth) {
    bool a_key_ends = false;
    std::map<uint32_t, std::vector<std::u32string>> next;
    for (const std::u32string& k : keys) {
      if (k.size() == depth) {
        a_key_ends = true;
      } else {
        next[k[depth]].push_back(k);
      }
    }
    std::vector<Expr> options;
    if (!a_key_ends) options.push_back(Expr::Empty());
    CodepointRanges continued;
    for (const auto& [cp, unused] : next) continued.emplace_back(cp, cp);
    options.push_back(Expr::Seq({JsonStringChars(ComplementCodepoints(continued)),
                                 Expr::Star(JsonStringChars({{0, 0x10FFFF}}))}));
    for (const auto& [cp, rest] : next) {
      options.push_back(Expr::Seq({JsonStringChars({{cp, cp}}), KeyNotIn(rest, depth + 1)}));
    }
    return Expr::Alt(std::move(options));
  }

  Expr Array(const json& s, const std::string& pointer) {
    int32_t min = Count(s, "minItems", 0, pointer), max = Count(s, "maxItems", -1, pointer);
    if (max >= 0 && max < min) Fail("maxItems < minItems: nothing can match", pointer);
    Expr item = AnyValue();
    if (s.contains("items")) {
      const json& items = s["items"];
      if (items.is_boolean() && !items.get<bool>()) {
        if (min > 0) Fail("items false with minItems > 0: nothing can match", pointer + "/items");
        max = 0;
      } else {
        item = Expr::Rule(b_.AddRule("item", Schema(items, pointer + "/items")));
      }
    }
    const Expr open = Expr::Seq({Expr::Byte('['), Ws()}), close = Expr::Seq({Ws(), Expr::Byte(']')});
    if (max == 0) return Expr::Seq({open, close});
    const Expr more = Expr::Repeat(Expr::Seq({Punct(','), item}), std::max(min - 1, 0), max < 0 ? -1 : max - 1);
    const Expr body = Expr::Seq({item, more});
    return Expr::Seq({open, min == 0 ? Expr::Optional(body) : body, close});
  }

  GrammarBuilder& b_;
  const json& root_;
  JsonSchemaOptions options_;
  std::map<std::string, int32_t> refs_;
  int32_t any_value_ = -1;
  int32_t any_object_ = -1;
  int32_t plain_string_ = -1;
  int32_t integer_rule_ = -1;
  int32_t number_rule_ = -1;
};

}  // namespace

Grammar GrammarFromJsonSchema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  GrammarBuilder builder;
  return JsonSchemaCompiler(builder, schema, options).CompileSchema();
}

Expr JsonSchemaExpr(GrammarBuilder& builder, const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return JsonSchemaCompiler(builder, schema, options).Document();
}

Grammar GrammarFromJsonSchema(std::string_view schema_json, const JsonSchemaOptions& options) {
  nlohmann::ordered_json schema;
  try {
    schema = json::parse(schema_json);
  } catch (const json::parse_error& e) {
    throw StructuredOutputError(std::string("json_schema: the schema is not valid JSON: ") + e.what());
  }
  return GrammarFromJsonSchema(schema, options);
}

Grammar GrammarFromJsonObject(const JsonSchemaOptions& options) {
  const nlohmann::ordered_json none;
  GrammarBuilder builder;
  return JsonSchemaCompiler(builder, none, options).CompileAnyObject();
}

}  // namespace vllm::structured_output
