// llama.cpp's GBNF: rules `name ::= alternatives`, one per line (a rule continues on
// the next line inside parentheses, after `|`, or when that line starts with `|`); terminals "literal", [class],
// [^class], `.`; grouping ( ), alternation |, repetition * + ? {m} {m,} {m,n} {,n};
// `#` comments. The start rule is `root`.
#include <cctype>
#include <map>

#include "tokenizer/utf8.h"
#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::structured_output {

namespace {

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Grammar Parse() {
    SkipSpace(true);
    while (!Eof()) {
      const size_t name_line = line_;
      const std::string name = ParseName();
      SkipSpace(false);
      if (s_.substr(i_, 3) != "::=") Fail("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      SkipSpace(true);
      const int32_t id = RuleId(name);
      if (b_.IsDefined(id)) Fail("rule '" + name + "' is defined twice (first on line " + std::to_string(defined_line_[name]) + ")");
      defined_line_[name] = name_line;
      b_.DefineRule(id, ParseAlternatives(false));
      if (!Eof() && Peek() != '\n') Fail("unexpected '" + std::string(1, Peek()) + "'");
      SkipSpace(true);
    }
    for (const auto& [name, line] : used_line_) {
      if (!defined_line_.count(name)) {
        throw StructuredOutputError("gbnf: rule '" + name + "' used on line " + std::to_string(line) + " is never defined");
      }
    }
    if (!defined_line_.count("root")) throw StructuredOutputError("gbnf: the grammar has no 'root' rule");
    return b_.Build(*b_.FindRule("root"), "gbnf");
  }

 private:
  [[noreturn]] void Fail(const std::string& message) const {
    throw StructuredOutputError("gbnf: " + message + " on line " + std::to_string(line_));
  }
  bool Eof() const { return i_ >= s_.size(); }
  char Peek() const { return s_[i_]; }
  static bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  void SkipSpace(bool newlines) {
    while (!Eof()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (!Eof() && Peek() != '\n') ++i_;
      } else if (c == '\n' && newlines) {
        ++i_;
        ++line_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    const size_t start = i_;
    while (!Eof() && IsNameChar(Peek())) ++i_;
    if (i_ == start) Fail("expected a rule name");
    return std::string(s_.substr(start, i_ - start));
  }

  int32_t RuleId(const std::string& name) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    const int32_t id = b_.DeclareRule(name);
    ids_.emplace(name, id);
    return id;
  }

  Expr ParseAlternatives(bool nested) {
    std::vector<Expr> options = {ParseSequence(nested)};
    while (NextIsBar()) {
      ++i_;
      SkipSpace(true);
      options.push_back(ParseSequence(nested));
    }
    return Expr::Alt(std::move(options));
  }

  // A '|' here, or first on a following line (an extension: llama.cpp ends the rule
  // at the newline, where this would be a syntax error).
  bool NextIsBar() {
    const size_t i = i_, line = line_;
    SkipSpace(true);
    if (!Eof() && Peek() == '|') return true;
    i_ = i;
    line_ = line;
    return false;
  }

  Expr ParseSequence(bool nested) {
    std::vector<Expr> items;
    while (!Eof() && Peek() != '|' && Peek() != ')' && Peek() != '\n') {
      items.push_back(ParseRepetition(ParseAtom()));
      SkipSpace(nested);
    }
    return Expr::Seq(std::move(items));
  }

  int32_t ParseInt() {
    int64_t v = 0;
    const size_t start = i_;
    while (!Eof() && std::isdigit(static_cast<unsigned char>(Peek()))) {
      v = v * 10 + (Peek() - '0');
      if (v > 100000) Fail("repetition bound too large");
      ++i_;
    }
    if (i_ == start) Fail("expected a number");
    return static_cast<int32_t>(v);
  }

  Expr ParseRepetition(Expr atom) {
    while (!Eof()) {
      const char c = Peek();
      if (c == '*' || c == '+' || c == '?') {
        ++i_;
        atom = Expr::Repeat(std::move(atom), c == '+' ? 1 : 0, c == '?' ? 1 : -1);
      } else if (c == '{') {
        ++i_;
        SkipSpace(false);
        int32_t min = 0, max = -1;
        if (Peek() != ',') min = ParseInt();
        SkipSpace(false);
        if (!Eof() && Peek() == ',') {
          ++i_;
          SkipSpace(false);
          if (!Eof() && Peek() != '}') max = ParseInt();
        } else {
          max = min;
        }
        SkipSpace(false);
        if (Eof() || Peek() != '}') Fail("expected '}'");
        ++i_;
        if (max >= 0 && max < min) Fail("{m,n} with n < m");
        atom = Expr::Repeat(std::move(atom), min, max);
      } else {
        break;
      }
    }
    return atom;
  }

  uint32_t ParseHex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (Eof() || !std::isxdigit(static_cast<unsigned char>(Peek()))) Fail("expected a hex digit");
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(Peek())));
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    return v;
  }

  // One character of a literal or class, escapes decoded.
  uint32_t ParseChar() {
    if (Peek() == '\\') {
      ++i_;
      if (Eof()) Fail("trailing '\\'");
      const char c = Peek();
      ++i_;
      switch (c) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return ParseHex(2);
        case 'u': return ParseHex(4);
        case 'U': return ParseHex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint8_t>(c);
        default: Fail(std::string("unknown escape \\") + c);
      }
    }
    const utf8::Sequence seq = utf8::ScanSequence(s_, i_);
    if (seq.kind != utf8::Sequence::kValid) Fail("invalid UTF-8");
    i_ += seq.length;
    return seq.code_point;
  }

  Expr ParseAtom() {
    const char c = Peek();
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (!Eof() && Peek() != '"') {
        if (Peek() == '\n') Fail("unterminated string literal");
        const uint32_t cp = ParseChar();
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) Fail("escape outside the Unicode scalar values");
        utf8::AppendCodePoint(bytes, cp);
      }
      if (Eof()) Fail("unterminated string literal");
      ++i_;
      return Expr::Literal(bytes);
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++i_;
      return Expr::Utf8({{0, 0x10FFFF}});
    }
    if (c == '(') {
      ++i_;
      SkipSpace(true);
      Expr e = ParseAlternatives(true);
      if (Eof() || Peek() != ')') Fail("expected ')'");
      ++i_;
      return e;
    }
    if (IsNameChar(c)) {
      const std::string name = ParseName();
      used_line_.try_emplace(name, line_);
      return Expr::Rule(RuleId(name));
    }
    Fail("unexpected '" + std::string(1, c) + "'");
  }

  Expr ParseClass() {
    ++i_;  // [
    bool negate = false;
    if (!Eof() && Peek() == '^') {
      negate = true;
      ++i_;
    }
    CodepointRanges ranges;
    while (!Eof() && Peek() != ']') {
      if (Peek() == '\n') Fail("unterminated character class");
      const uint32_t lo = ParseChar();
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && Peek() == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = ParseChar();
        if (hi < lo) Fail("character range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    if (Eof()) Fail("unterminated character class");
    ++i_;
    return Expr::Utf8(negate ? ComplementCodepoints(ranges) : ranges);
  }

  std::string_view s_;
  size_t i_ = 0;
  size_t line_ = 1;
  GrammarBuilder b_;
  std::map<std::string, int32_t> ids_;
  std::map<std::string, size_t> defined_line_;
  std::map<std::string, size_t> used_line_;
};

}  // namespace

Grammar GrammarFromGbnf(std::string_view text) { return GbnfParser(text).Parse(); }

}  // namespace vllm::structured_output
