// The Jinja engine behind chat templates, checked feature by feature.
//
// JinjaCases runs tests/data/chat/jinja_cases.jsonl: small templates with their
// output (or error) from Python jinja2 3.1 configured as transformers configures it
// (tools/oracle/chat_reference.py --fill-jinja-cases). The tests below it spell out the
// behaviours that matter most, and the errors, with their expectations written here.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "vllm/tokenizer/chat_template.h"
#include "vllm/tokenizer/jinja/py_format.h"
#include "vllm/tokenizer/jinja/template.h"

namespace vllm::jinja {
namespace {

using json = nlohmann::ordered_json;

ValueDict ContextFrom(const json& context) {
  ValueDict dict;
  for (const auto& [name, value] : context.items()) dict.Set(name, FromJson(value));
  return dict;
}

std::string Render(std::string_view source, const json& context = json::object()) {
  return Template(source).Render(ContextFrom(context));
}

// The error a template raises (parse or render); fails the test if there is none.
ChatTemplateError RenderFailure(std::string_view source, const json& context = json::object(),
                                ChatTemplateLimits limits = {}) {
  try {
    Template(source, limits).Render(ContextFrom(context));
  } catch (const ChatTemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error from: " << source;
  return ChatTemplateError(ChatTemplateError::Kind::kRender, 0, "no error");
}

// jinja2 runtime errors whose words we reproduce exactly. Syntax errors are worded
// differently (they name the same problem and line), and so are argument errors of
// filters, which jinja2 words with its Python function names (do_replace()).
bool ExpectsExactMessage(const std::string& error_type, const std::string& message) {
  static const std::set<std::string> types = {"UndefinedError", "TemplateError", "TypeError", "ZeroDivisionError",
                                              "OverflowError"};
  return types.count(error_type) != 0 && message.find("do_") == std::string::npos;
}

TEST(JinjaCases, MatchJinja2) {
  std::ifstream file(VT_TEST_DATA_DIR "/chat/jinja_cases.jsonl");
  ASSERT_TRUE(file) << "missing tests/data/chat/jinja_cases.jsonl";
  std::string line;
  int num_cases = 0;
  while (std::getline(file, line)) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    const std::string name = c["name"];
    const std::string source = c["template"];
    SCOPED_TRACE(name + ": " + source);
    ++num_cases;
    if (c.contains("expected")) {
      std::string got;
      try {
        got = Render(source, c["context"]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "unexpected error: " << e.what();
        continue;
      }
      EXPECT_EQ(got, c["expected"].get<std::string>());
      continue;
    }
    const ChatTemplateError error = RenderFailure(source, c["context"]);
    const std::string type = c["error_type"];
    if (ExpectsExactMessage(type, c["error"]) && error.kind() != ChatTemplateError::Kind::kSyntax) {
      EXPECT_EQ(error.detail(), c["error"].get<std::string>()) << type;
    }
  }
  EXPECT_GT(num_cases, 100);
}

TEST(JinjaWhitespace, TrimAndLstripBlocksAsTransformersSetsThem) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(Render("<\n  {% if true %}\n  x\n  {% endif %}\n>"), "<\n  x\n>");
  // Variable tags are not trimmed.
  EXPECT_EQ(Render("  {{ 'a' }}\n{{ 'b' }}"), "  a\nb");
  // '-' strips every whitespace character on its side, newlines included.
  EXPECT_EQ(Render("a \n {{- 'b' -}} \n c"), "abc");
  // One trailing newline of the source is dropped (keep_trailing_newline=False).
  EXPECT_EQ(Render("x\n"), "x");
}

TEST(JinjaWhitespace, GenerationTagRendersItsBody) {
  // transformers registers {% generation %} (assistant token masks); the text is unchanged.
  EXPECT_EQ(Render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(JinjaScopes, LoopIterationsAndMacrosHaveTheirOwnScope) {
  EXPECT_EQ(Render("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{% endfor %}{{ x }}"), "000");
  EXPECT_EQ(Render("{% set ns = namespace(x=0) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "3");
  EXPECT_EQ(Render("{% macro m() %}{% set y = 1 %}{{ y }}{% endmacro %}{{ m() }}[{{ y }}]"), "1[]");
}

TEST(JinjaValues, PythonTextForms) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 1.0, {'k': 2.5}] }}"), "[1, 'a', None, True, 1.0, {'k': 2.5}]");
  EXPECT_EQ(Render("{{ x }}", {{"x", 1e16}}), "1e+16");
  EXPECT_EQ(Render("{{ x }}", {{"x", 123456789012345.0}}), "123456789012345.0");
  // JSON integers beyond int64 keep their digits, as Python's do.
  EXPECT_EQ(Render("{{ x }} {{ x|tojson }}", {{"x", 18446744073709551615ull}}),
            "18446744073709551615 18446744073709551615");
}

TEST(JinjaValues, TojsonKeepsKeyOrderAndUnicode) {
  const json tool = json::parse(R"({"z": "é", "a": {"y": [1, 2.0], "b": null}})");
  EXPECT_EQ(Render("{{ t|tojson }}", {{"t", tool}}), R"({"z": "é", "a": {"y": [1, 2.0], "b": null}})");
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  const ChatTemplateError error = RenderFailure("line one\n{% if x %}\n{{ x | }}\n{% endif %}");
  EXPECT_EQ(error.kind(), ChatTemplateError::Kind::kSyntax);
  EXPECT_EQ(error.line(), 3);
  EXPECT_NE(std::string(error.what()).find("line 3"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find("column"), std::string::npos) << error.what();
}

TEST(JinjaErrors, UnknownFiltersTestsAndTagsAreNamed) {
  EXPECT_NE(RenderFailure("{{ x|shout }}").detail().find("no filter named 'shout'"), std::string::npos);
  EXPECT_NE(RenderFailure("{{ x is loud }}").detail().find("no test named 'loud'"), std::string::npos);
  EXPECT_NE(RenderFailure("{% frobnicate %}").detail().find("unknown tag 'frobnicate'"), std::string::npos);
  EXPECT_NE(RenderFailure("{% include 'x' %}").detail().find("'include' tag is not supported"), std::string::npos);
  // Unclosed blocks name the block and where it opened.
  const ChatTemplateError unclosed = RenderFailure("a\n{% for x in y %}\nb");
  EXPECT_EQ(unclosed.line(), 2);
  EXPECT_NE(unclosed.detail().find("'for'"), std::string::npos) << unclosed.detail();
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplateMessage) {
  const ChatTemplateError error = RenderFailure("ok\n{{ raise_exception('Bad role: ' ~ role) }}", {{"role", "x"}});
  EXPECT_EQ(error.kind(), ChatTemplateError::Kind::kRaised);
  EXPECT_EQ(error.detail(), "Bad role: x");
  EXPECT_EQ(error.line(), 2);
}

TEST(JinjaErrors, RuntimeErrorsNameTheLine) {
  const ChatTemplateError error = RenderFailure("{% for m in messages %}\n{{ m.content.upper() }}\n{% endfor %}",
                                                {{"messages", json::parse(R"([{"role": "user"}])")}});
  EXPECT_EQ(error.kind(), ChatTemplateError::Kind::kRender);
  EXPECT_EQ(error.line(), 2);
  EXPECT_EQ(error.detail(), "'dict object' has no attribute 'content'");
}

TEST(JinjaErrors, BuiltinsRejectArgumentsOfTheWrongType) {
  // Found by fuzzing: each must be a render error naming the builtin, not a crash.
  for (const char* source : {"{{ 'x'|indent(none) }}", "{{ 'x'|replace('a', 'b', 'c') }}", "{{ 1.5|round('x') }}",
                             "{{ '{99999999999}'.format(1) }}", "{{ 'a b'.split(none, 'x') }}", "{{ range('a') }}",
                             "{{ [1]|tojson(indent=[]) }}",
                             "{{ dict(1) }}", "{{ '%c' % 'ab' }}", "{{ '%(k)s' % 1 }}", "{{ 5|first }}",
                             "{{ '%10000000000000000000000d' % 5 }}", "{{ '%.99999999999999f' % 1.5 }}",
                             "{{ range(-(2 ** 126) * 2 + 1, 2 ** 126) }}", "{{ '%d' % 1e300 }}"}) {
    SCOPED_TRACE(source);
    EXPECT_EQ(RenderFailure(source).kind(), ChatTemplateError::Kind::kRender);
  }
  // A surrogate code point has no UTF-8 form (Python makes a lone surrogate that the
  // tokenizer then cannot encode): an error naming it, not invalid UTF-8 in the prompt.
  const ChatTemplateError surrogate = RenderFailure("{{ '%c' % 55296 }}");
  EXPECT_NE(surrogate.detail().find("surrogate"), std::string::npos) << surrogate.detail();
  EXPECT_EQ(Render("{{ '%c' % 55295 }}{{ '%c' % 57344 }}"), "\xED\x9F\xBF\xEE\x80\x80");  // U+D7FF, U+E000
  // An attribute path of digits too long for an index is a missing item, as in jinja2.
  EXPECT_EQ(Render("{{ [1]|join(attribute='99999999999999999999') }}"), "");
}

TEST(JinjaLimits, RunawayRecursionAndOutputAreStopped) {
  const ChatTemplateError recursion = RenderFailure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(recursion.detail().find("nests deeper"), std::string::npos) << recursion.detail();

  ChatTemplateLimits small;
  small.max_output_bytes = 1000;
  EXPECT_NE(RenderFailure("{% for i in range(1000) %}0123456789{% endfor %}", {}, small).detail().find("exceeds"),
            std::string::npos);
  small = {};
  small.max_steps = 10000;
  EXPECT_NE(RenderFailure("{% for i in range(100000) %}{% endfor %}", {}, small).detail().find("steps"),
            std::string::npos);
  EXPECT_NE(RenderFailure("{{ 'x' * 1000000000000 }}").detail().find("too large"), std::string::npos);
  EXPECT_NE(RenderFailure("{{ [1, 2] * 1000000 }}").detail().find("too large"), std::string::npos);
  // Printing a big value stops at the output limit instead of formatting all of it first.
  small = {};
  small.max_output_bytes = 1000;
  EXPECT_NE(RenderFailure("{{ [{'k': 'v'}] * 500000 }}", {}, small).detail().find("exceeds 1000 bytes"),
            std::string::npos);
}

TEST(JinjaLimits, BulkWorkInsideOneStepCountsAgainstTheLimit) {
  // Building a long string, searching a long list or sorting costs more than one step.
  ChatTemplateLimits small;
  small.max_steps = 20000;
  EXPECT_NE(RenderFailure("{% set s = 'x' * 10000000 %}", {}, small).detail().find("steps"), std::string::npos);
  EXPECT_NE(RenderFailure("{% set l = range(100000)|list %}{% for i in range(100) %}{{ -1 in l }}{% endfor %}", {}, small)
                .detail()
                .find("steps"),
            std::string::npos);
  EXPECT_NE(RenderFailure("{{ (range(100000)|list)|sort|length }}", {}, small).detail().find("steps"), std::string::npos);
  // Results that would be huge are refused before they are built.
  EXPECT_NE(RenderFailure("{{ ('x' * 1000000).replace('', 'y' * 100) }}").detail().find("too large"), std::string::npos);
  EXPECT_NE(RenderFailure("{{ (',' * 2000000).split(',')|length }}").detail().find("too large"), std::string::npos);
  // The same templates with the default limits are fine.
  EXPECT_EQ(Render("{{ (range(100000)|list)|sort|length }}"), "100000");
}

TEST(JinjaLimits, DeepNestingIsASyntaxErrorNotACrash) {
  const std::string deep_parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_EQ(RenderFailure(deep_parens).kind(), ChatTemplateError::Kind::kSyntax);
  std::string deep_ifs;
  for (int i = 0; i < 5000; ++i) deep_ifs += "{% if true %}";
  EXPECT_EQ(RenderFailure(deep_ifs).kind(), ChatTemplateError::Kind::kSyntax);
  std::string deep_json = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_THROW(FromJson(json::parse(deep_json)), RenderError);
}

}  // namespace
}  // namespace vllm::jinja
