// JSON schema front end: random schemas of the supported subset, random walks that
// sample uniformly from the token mask, and checks that (1) every finished output
// parses and validates (validator in structured_testing.h, written from the JSON
// Schema spec), (2) prefixes the matcher accepted extend, byte by byte, to a valid
// document, (3) what is not supported is an error naming the keyword and pointer.
#include <functional>

#include <gtest/gtest.h>

#include "structured_testing.h"
#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::structured_output {
namespace {

using testing::json;

// Parses and validates `text`; a failure message quotes it with the schema.
void ExpectValid(const std::string& text, const json& schema, const std::string& context) {
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception& e) {
    ADD_FAILURE() << context << ": not JSON (" << e.what() << "): " << text << "\nschema " << schema.dump();
    return;
  }
  std::string why;
  EXPECT_TRUE(testing::Validate(value, schema, schema, why))
      << context << ": " << why << "\ntext " << text << "\nschema " << schema.dump();
}

// For each schema: walks to the end (validated), and rolls back to a random prefix
// that is completed byte by byte (validated too).
void CheckRandomSchemas(const std::shared_ptr<const TokenizerInfo>& vocab, int num_schemas, int walks_per_schema,
                        uint32_t seed) {
  std::mt19937 rng(seed);
  int num_terminated = 0;
  for (int i = 0; i < num_schemas; ++i) {
    const json schema = testing::RandomRootSchema(rng);
    JsonSchemaOptions options;
    options.max_whitespace = std::array{0, 1, 2, -1}[rng() % 4];
    options.strict = rng() % 2;
    auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(schema, options), vocab);
    for (int w = 0; w < walks_per_schema; ++w) {
      GrammarMatcher m(compiled);
      const testing::WalkResult r = testing::RandomWalk(m, rng, 200);
      const std::string context = "schema " + std::to_string(i) + " walk " + std::to_string(w);
      if (r.terminated) {
        ++num_terminated;
        ExpectValid(r.text, schema, context);
        m.Rollback(1);  // the stop token
      }
      const int32_t back = m.num_accepted_tokens() == 0 ? 0 : static_cast<int32_t>(rng() % m.num_accepted_tokens());
      m.Rollback(back);
      std::string prefix;
      for (int32_t k = 0; k < m.num_accepted_tokens(); ++k) prefix += vocab->token_bytes(r.ids[k]);
      const std::optional<std::string> rest = testing::CompleteBytes(m, rng);
      ASSERT_TRUE(rest.has_value()) << context << ": no completion of " << prefix << "\nschema " << schema.dump();
      ExpectValid(prefix + *rest, schema, context + " prefix completion");
    }
  }
  // Most walks end by themselves; the rest are covered by the completions.
  EXPECT_GT(num_terminated, num_schemas * walks_per_schema / 4);
}

TEST(JsonSchemaGrammarTest, RandomSchemasOnASyntheticVocabularyValidate) {
  CheckRandomSchemas(testing::SyntheticVocab(), 200, 3, 1);
}

TEST(JsonSchemaGrammarTest, RandomSchemasOnTheQwen3VocabularyValidate) {
  auto vocab = testing::Qwen3Vocab();
  if (!vocab) GTEST_SKIP() << vllm::testing::MissingSharedData(testing::kQwen3Dir / "tokenizer.json");
  CheckRandomSchemas(vocab, 100, 3, 2);
}

TEST(JsonSchemaGrammarTest, RecursiveRefsAndToolSchemas) {
  const json tree = json::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
      "required": ["v"]}},
    "$ref": "#/$defs/node"})");
  const json tool = json::parse(R"({"type": "object", "properties": {
      "location": {"type": "string", "description": "City"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}},
    "required": ["location", "unit"], "additionalProperties": false})");
  std::mt19937 rng(3);
  for (const json& schema : {tree, tool}) {
    auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(schema), testing::SyntheticVocab());
    for (int w = 0; w < 20; ++w) {
      GrammarMatcher m(compiled);
      const testing::WalkResult r = testing::RandomWalk(m, rng, 300, 0.9);
      if (r.terminated) ExpectValid(r.text, schema, "walk " + std::to_string(w));
    }
  }
}

bool Accepts(const Grammar& g, std::string_view text) {
  auto compiled = std::make_shared<const CompiledGrammar>(Grammar(g), testing::SyntheticVocab());
  GrammarMatcher m(compiled);
  return m.AcceptBytes(text) && m.CanTerminate();
}

TEST(JsonSchemaGrammarTest, AcceptsAndRejectsDocuments) {
  const Grammar any_object = GrammarFromJsonObject();
  EXPECT_TRUE(Accepts(any_object, R"({"a": [1, -2.5e3, true, null, {"b": "c\u00e9\n"}], "": {}})"));
  EXPECT_TRUE(Accepts(any_object, "{ }"));
  EXPECT_FALSE(Accepts(any_object, "[1]"));
  EXPECT_FALSE(Accepts(any_object, R"({"a":})"));
  EXPECT_FALSE(Accepts(any_object, R"({"a": 01})"));
  EXPECT_FALSE(Accepts(any_object, R"({"a": "\ud800"})"));  // a lone surrogate escape
  EXPECT_FALSE(Accepts(any_object, "{\"a\": \"\x01\"}"));     // a raw control character

  // Properties come in the schema's order; optional ones may be left out.
  const Grammar ordered = GrammarFromJsonSchema(std::string_view(
      R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string", "maxLength": 2}},
          "required": ["a"]})"));
  EXPECT_TRUE(Accepts(ordered, R"({"b": 1, "a": "xy"})"));
  EXPECT_TRUE(Accepts(ordered, R"({"a": ""})"));
  EXPECT_FALSE(Accepts(ordered, R"({"a": "xy", "b": 1})"));
  EXPECT_FALSE(Accepts(ordered, R"({"b": 1})"));
  EXPECT_FALSE(Accepts(ordered, R"({"a": "xyz"})"));
  EXPECT_FALSE(Accepts(ordered, R"({"a": "x", "c": 1})"));  // strict: no other properties

  JsonSchemaOptions compact;
  compact.max_whitespace = 0;
  const Grammar array = GrammarFromJsonSchema(json::parse(R"({"type": "array", "items": {"type": "boolean"},
                                                              "minItems": 1, "maxItems": 2})"), compact);
  EXPECT_TRUE(Accepts(array, "[true,false]"));
  EXPECT_FALSE(Accepts(array, "[true, false]"));
  EXPECT_FALSE(Accepts(array, "[]"));
  EXPECT_FALSE(Accepts(array, "[true,true,true]"));

  // Extra members never repeat a declared name, in any spelling the grammar allows.
  const Grammar extra = GrammarFromJsonSchema(std::string_view(
      R"({"type": "object", "properties": {"ab": {"type": "integer"}, "é": {"type": "null"}},
          "additionalProperties": {"type": "string"}})"));
  EXPECT_TRUE(Accepts(extra, R"({"ab": 1, "a": "x", "abc": "y", "": "z", "è": "w", "éé": "v"})"));
  EXPECT_FALSE(Accepts(extra, R"({"ab": 1, "ab": "x"})"));
  EXPECT_FALSE(Accepts(extra, R"({"é": "x"})"));
  EXPECT_FALSE(Accepts(extra, R"({"\u0061b": "x"})"));

  const Grammar date = GrammarFromJsonSchema(std::string_view(R"({"type": "string", "format": "date"})"));
  EXPECT_TRUE(Accepts(date, R"("2024-02-29")"));
  EXPECT_FALSE(Accepts(date, R"("2024-13-01")"));
  const Grammar pattern = GrammarFromJsonSchema(std::string_view(R"({"type": "string", "pattern": "^a\"[0-9]+$"})"));
  EXPECT_TRUE(Accepts(pattern, R"("a\"12")"));
  EXPECT_FALSE(Accepts(pattern, R"("a"12")"));
}

// The message names the keyword (or what is wrong) and the JSON pointer.
// minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers: the grammar
// admits a spelling iff it is JSON's one spelling of an integer within the bounds,
// for random bounds of every magnitude and sign (each side present or not, inclusive
// or exclusive, integral or fractional), checked on every integer near each bound
// and on random ones.
// Whether the schema's grammar (synthetic vocabulary) takes a text as a whole document.
std::function<bool(const std::string&)> WholeDocumentAcceptor(const json& schema) {
  const auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(std::string_view(schema.dump())),
                                                                testing::SyntheticVocab());
  return [compiled](const std::string& text) {
    GrammarMatcher m(compiled);
    return m.AcceptBytes(text) && m.CanTerminate();
  };
}

TEST(JsonSchemaGrammarTest, IntegerBoundsAdmitExactlyTheIntegersWithin) {
  std::mt19937 rng(21);
  const auto random_magnitude = [&]() -> int64_t {
    const int64_t choices[] = {0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 4096, 65535, 1000000000000000000};
    if (rng() % 2) return choices[rng() % std::size(choices)];
    return static_cast<int64_t>(rng() % 1000000);
  };
  for (int trial = 0; trial < 60; ++trial) {
    json schema = {{"type", "integer"}};
    std::optional<int64_t> lo, hi;
    const int64_t a = random_magnitude() * (rng() % 3 == 0 ? -1 : 1), b = random_magnitude() * (rng() % 3 == 0 ? -1 : 1);
    const int64_t low = std::min(a, b), high = std::max(a, b);
    if (trial % 4 != 1) {
      lo = low;
      if (rng() % 3 == 0) {
        schema["exclusiveMinimum"] = low - 1;
      } else if (rng() % 4 == 0 && low < 1000000) {
        schema["minimum"] = static_cast<double>(low) - 0.5;  // ceil: low
      } else {
        schema["minimum"] = low;
      }
    }
    if (trial % 4 != 2) {
      hi = high;
      if (rng() % 3 == 0) {
        schema["exclusiveMaximum"] = high + 1;
      } else if (rng() % 4 == 0 && high < 1000000) {
        schema["maximum"] = static_cast<double>(high) + 0.25;  // floor: high
      } else {
        schema["maximum"] = high;
      }
    }
    SCOPED_TRACE(schema.dump());
    const auto compiled =
        std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(std::string_view(schema.dump())), testing::SyntheticVocab());
    const auto accepts = [&](const std::string& text) {
      GrammarMatcher m(compiled);
      return m.AcceptBytes(text) && m.CanTerminate();
    };
    std::vector<int64_t> values;
    for (int64_t d = -25; d <= 25; ++d) {
      values.push_back(low + d);
      values.push_back(high + d);
      values.push_back(d);
    }
    for (int i = 0; i < 40; ++i) values.push_back(static_cast<int64_t>(rng() % 2000001) - 1000000);
    for (const int64_t v : values) {
      const bool within = (!lo || v >= *lo) && (!hi || v <= *hi);
      EXPECT_EQ(accepts(std::to_string(v)), within) << v;
    }
    EXPECT_FALSE(accepts("-0"));
    EXPECT_FALSE(accepts("007"));
    EXPECT_FALSE(accepts("1e2"));
    EXPECT_FALSE(accepts("1.0"));
    if (!hi) {
      EXPECT_TRUE(accepts(std::string(40, '7')));  // unbounded above: long spellings
    }
    if (!lo) {
      EXPECT_TRUE(accepts("-" + std::string(40, '7')));
    }
  }
}

// The same keywords on "type": "number" with integral bounds: a spelling (no
// exponent) is admitted iff its value is within, for random bounds of every sign,
// each side present or not, inclusive or exclusive; values on and next to each bound
// with zero, tiny and large fractions, and numbers of both signs around zero.
TEST(JsonSchemaGrammarTest, NumberBoundsAdmitExactlyTheNumbersWithin) {
  std::mt19937 rng(22);
  const auto random_value = [&]() -> int64_t {
    const int64_t choices[] = {0, 1, 2, 9, 10, 99, 100, 1000000000000};
    const int64_t magnitude = rng() % 2 ? choices[rng() % std::size(choices)] : static_cast<int64_t>(rng() % 5000);
    return rng() % 3 == 0 ? -magnitude : magnitude;
  };
  for (int trial = 0; trial < 60; ++trial) {
    json schema = {{"type", "number"}};
    const int64_t a = random_value(), b = random_value();
    const int64_t low = std::min(a, b), high = std::max(a, b);
    const bool has_lo = trial % 4 != 1, has_hi = trial % 4 != 2;
    const bool lo_excl = rng() % 2, hi_excl = rng() % 2;
    if (has_lo) schema[lo_excl ? "exclusiveMinimum" : "minimum"] = low;
    if (has_hi) schema[hi_excl ? "exclusiveMaximum" : "maximum"] = high;
    if (has_lo && has_hi && (low > high || (low == high && (lo_excl || hi_excl)))) continue;  // unsatisfiable
    SCOPED_TRACE(schema.dump());
    const auto accepts = WholeDocumentAcceptor(schema);
    // Spellings of value v + fraction (fraction in [0, 1)): sign, integer part, digits.
    std::vector<std::pair<std::string, long double>> cases;
    for (const int64_t base : {low, high, int64_t{0}}) {
      for (int64_t d = -2; d <= 2; ++d) {
        const int64_t i = base + d;
        for (const char* frac : {"", ".0", ".000", ".5", ".001", ".999"}) {
          const long double magnitude = static_cast<long double>(i < 0 ? -i : i) + (frac[0] ? std::stold(std::string("0") + frac) : 0);
          if (i == 0 && frac[0] && std::string(frac).find_first_not_of(".0") != std::string::npos) {
            cases.push_back({std::string("-0") + frac, -magnitude});  // -0.5: negative with integer part 0
          }
          const std::string text = (i < 0 ? "-" : "") + std::to_string(i < 0 ? -i : i) + frac;
          cases.push_back({text, i < 0 ? -magnitude : magnitude});
        }
      }
    }
    for (const auto& [text, value] : cases) {
      const bool within = (!has_lo || (lo_excl ? value > low : value >= low)) &&
                          (!has_hi || (hi_excl ? value < high : value <= high));
      EXPECT_EQ(accepts(text), within) << text;
    }
    EXPECT_FALSE(accepts("1e2"));
    EXPECT_FALSE(accepts("01"));
    EXPECT_FALSE(accepts("1."));
  }
}

// Fractional bounds on "type": "number": each bound the decimal of its shortest
// spelling (0.1 is 0.1), random bounds of every sign with fractions of 1 to 3 digits
// (and 1e-05), each side present or not, inclusive or exclusive; spellings on, just
// beside and between the bounds' digits are admitted iff their value is within.
TEST(JsonSchemaGrammarTest, FractionalNumberBoundsAdmitExactlyTheNumbersWithin) {
  std::mt19937 rng(23);
  const std::vector<std::string> fractions = {"", ".5", ".05", ".25", ".1", ".999", ".001", ".75"};
  const auto random_bound = [&]() {
    const int64_t integers[] = {0, 0, 1, 2, 9, 10, 100};
    std::string text = std::to_string(integers[rng() % std::size(integers)]) + fractions[rng() % fractions.size()];
    if (rng() % 9 == 0) text = "0.00001";
    if (rng() % 3 == 0 && text.find_first_not_of("0.") != std::string::npos) text = "-" + text;
    return text;
  };
  for (int trial = 0; trial < 80; ++trial) {
    std::string a = random_bound(), b = random_bound();
    if (std::stold(a) > std::stold(b)) std::swap(a, b);
    const long double low = std::stold(a), high = std::stold(b);
    const bool has_lo = trial % 4 != 1, has_hi = trial % 4 != 2;
    const bool lo_excl = rng() % 2, hi_excl = rng() % 2;
    json schema = {{"type", "number"}};
    if (has_lo) schema[lo_excl ? "exclusiveMinimum" : "minimum"] = std::stod(a);
    if (has_hi) schema[hi_excl ? "exclusiveMaximum" : "maximum"] = std::stod(b);
    if (has_lo && has_hi && low == high && (lo_excl || hi_excl)) continue;  // unsatisfiable
    SCOPED_TRACE(schema.dump());
    const auto accepts = WholeDocumentAcceptor(schema);
    // Each bound's spelling, with a digit added, one less or more in its last digit,
    // trailing zeros; integers and halves around it; both signs.
    std::vector<std::string> texts;
    for (const std::string& bound : {a, b, std::string("0")}) {
      const std::string magnitude = bound[0] == '-' ? bound.substr(1) : bound;
      const std::string with_point = magnitude.find('.') == std::string::npos ? magnitude + "." : magnitude;
      std::vector<std::string> near = {magnitude, with_point + "0", with_point + "00", with_point + "1",
                                       with_point + "0001", with_point + "9"};
      if (with_point.back() != '.') {
        std::string lower = with_point, higher = with_point;
        if (lower.back() > '0') --lower.back();
        if (higher.back() < '9') ++higher.back();
        near.push_back(lower);
        near.push_back(higher);
        near.push_back(lower + "999");
      }
      const int64_t integer = std::stoll(magnitude.substr(0, magnitude.find('.')));
      for (int64_t i = std::max<int64_t>(0, integer - 1); i <= integer + 1; ++i) {
        near.push_back(std::to_string(i));
        near.push_back(std::to_string(i) + ".5");
      }
      for (const std::string& t : near) {
        texts.push_back(t);
        if (t.find_first_not_of("0.") != std::string::npos) texts.push_back("-" + t);
      }
    }
    for (const std::string& text : texts) {
      if (text.back() == '.') continue;
      const long double value = std::stold(text);
      const bool within = (!has_lo || (lo_excl ? value > low : value >= low)) &&
                          (!has_hi || (hi_excl ? value < high : value <= high));
      EXPECT_EQ(accepts(text), within) << text;
    }
  }
}

// maxProperties counts declared and extra members, minProperties the declared ones
// (extra names are not kept distinct): every subset of the declared members (in order)
// with 0..3 extra ones, admitted iff both counts are within and the required member is
// there.
TEST(JsonSchemaGrammarTest, MemberCountsAdmitExactlyTheObjectsWithin) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{2, 3}, {0, 1}, {3, -1}, {1, 1}, {0, 0}, {2, -1}}) {
    json schema = json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                  "c": {"type": "integer"}}, "required": ["b"], "additionalProperties": {"type": "integer"}})");
    if (lo > 0) schema["minProperties"] = lo;
    if (hi >= 0) schema["maxProperties"] = hi;
    SCOPED_TRACE(schema.dump());
    if (hi == 0) {  // "b" is required: no object fits
      EXPECT_THROW(GrammarFromJsonSchema(std::string_view(schema.dump())), std::exception);
      continue;
    }
    const auto compiled = std::make_shared<const CompiledGrammar>(GrammarFromJsonSchema(std::string_view(schema.dump())),
                                                                  testing::SyntheticVocab());
    for (int subset = 0; subset < 8; ++subset) {
      for (int extras = 0; extras <= 3; ++extras) {
        std::string text = "{";
        int count = 0;
        for (int k = 0; k < 3; ++k) {
          if (!(subset >> k & 1)) continue;
          text += std::string(count++ ? "," : "") + "\"" + static_cast<char>('a' + k) + "\":1";
        }
        for (int e = 0; e < extras; ++e) text += std::string(count++ ? "," : "") + "\"x" + std::to_string(e) + "\":2";
        text += "}";
        const int declared = __builtin_popcount(static_cast<unsigned>(subset));
        const bool within = (subset & 2) && declared >= lo && (hi < 0 || count <= hi);
        GrammarMatcher m(compiled);
        EXPECT_EQ(m.AcceptBytes(text) && m.CanTerminate(), within) << text;
      }
    }
  }
}

TEST(JsonSchemaGrammarTest, UnsupportedOrUnsatisfiableSchemasNameTheKeywordAndPointer) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {R"({"type": "number", "minimum": 1e300})", "within +-10^18", "#/minimum"},
      {R"({"type": "number", "minimum": 0.25, "exclusiveMaximum": 0.25})", "no number lies within", "#"},
      {R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})", "no number lies within", "#"},
      {R"({"maximum": 3})", "\"maximum\" without \"type\": \"integer\" or \"number\"", "#/maximum"},
      {R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})", "nothing can match", "#"},
      {R"({"type": "integer", "exclusiveMinimum": true})", "draft 4", "#/exclusiveMinimum"},
      {R"({"type": "integer", "maximum": 1e19})", "10^18", "#/maximum"},
      {R"({"type": "integer", "multipleOf": 2})", "\"multipleOf\"", "#/multipleOf"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}})", "format \"email\"",
       "#/properties/a/format"},
      {R"({"type": "object", "patternProperties": {"^x": {}}})", "\"patternProperties\"", "#/patternProperties"},
      {R"({"type": "array", "prefixItems": [{"type": "string"}]})", "\"prefixItems\"", "#/prefixItems"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})", "allOf", "#/allOf"},
      {R"({"$ref": "https://example.com/s.json"})", "only local refs", "#/$ref"},
      {R"({"$ref": "#/$defs/missing"})", "does not resolve", "#/$ref"},
      {R"({"not": {"type": "string"}})", "\"not\"", "#/not"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "\"b\" is not in properties", "#/required"},
      {R"({"type": "string", "minLength": 5, "maxLength": 2})", "maxLength < minLength", "#"},
      {R"({"type": "object", "minProperties": 3, "maxProperties": 2})", "maxProperties < minProperties", "#"},
      {R"({"type": "object", "maxProperties": 65})", "maxProperties above 64", "#/maxProperties"},
      {R"({"type": "object", "properties": {"a": {}}, "minProperties": 2})", "above the 1 declared properties",
       "#/minProperties"},
      {R"({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1})",
       "minProperties / maxProperties", "#"},
      {R"({"type": "integer", "enum": ["a", "b"]})", "nothing can match", "#/enum"},
      {R"({"type": "strin"})", "\"type\" must name JSON types", "#/type"},
      {R"({"anyOf": [{"type": "string"}], "maxLength": 3})", "\"maxLength\"", "#/maxLength"},
      {R"J({"type": "string", "pattern": "a(?=b)"})J", "lookaround", "#/pattern"},
      {R"({"type": "array", "items": {"uniqueItems": true}})", "\"uniqueItems\"", "#/items/uniqueItems"},
  };
  for (const auto& [schema, what, where] : cases) {
    try {
      GrammarFromJsonSchema(std::string_view(schema));
      ADD_FAILURE() << "no error for " << schema;
    } catch (const StructuredOutputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(what), std::string::npos) << message;
      EXPECT_NE(message.find(where), std::string::npos) << message;
    }
  }
  EXPECT_THROW(GrammarFromJsonSchema(std::string_view("{\"type\": ")), StructuredOutputError);
}

}  // namespace
}  // namespace vllm::structured_output
