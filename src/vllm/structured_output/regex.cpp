#include "regex.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/utf8.h"
#include "vllm/structured_output/grammar_compiler.h"

namespace vllm::structured_output {

namespace {

bool Contains(const CodepointRanges& ranges, uint32_t cp) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return r.first <= cp && cp <= r.second; });
}

std::string JsonEscape(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: {
      static const char* kHex = "0123456789abcdef";
      return std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
    }
  }
}

class RegexParser {
 public:
  RegexParser(std::string_view s, bool json_string, const std::string& what)
      : s_(s), json_string_(json_string), what_(what) {}

  Expr Parse() {
    Expr e = ParseAlternation();
    if (i_ < s_.size()) Fail("unbalanced ')'");
    return e;
  }

 private:
  [[noreturn]] void Fail(const std::string& message) const {
    throw StructuredOutputError(what_ + ": " + message + " at offset " + std::to_string(i_) + " of regex \"" +
                                std::string(s_) + "\"");
  }
  bool Eof() const { return i_ >= s_.size(); }
  char Peek() const { return s_[i_]; }

  Expr Chars(const CodepointRanges& ranges) const {
    return json_string_ ? JsonStringChars(ranges) : Expr::Utf8(ranges);
  }

  Expr ParseAlternation() {
    std::vector<Expr> options = {ParseSequence()};
    while (!Eof() && Peek() == '|') {
      ++i_;
      options.push_back(ParseSequence());
    }
    return Expr::Alt(std::move(options));
  }

  Expr ParseSequence() {
    std::vector<Expr> items;
    while (!Eof() && Peek() != '|' && Peek() != ')') items.push_back(ParseQuantified(ParseAtom()));
    return Expr::Seq(std::move(items));
  }

  Expr ParseQuantified(Expr atom) {
    while (!Eof()) {
      int32_t min = 0, max = -1;
      const char c = Peek();
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        ++i_;
        min = 1;
      } else if (c == '?') {
        ++i_;
        max = 1;
      } else if (c == '{') {
        ParseBraces(min, max);
      } else {
        break;
      }
      if (!Eof() && Peek() == '?') ++i_;  // lazy: the same strings
      if (!Eof() && Peek() == '+') Fail("possessive quantifier");
      atom = Expr::Repeat(std::move(atom), min, max);
    }
    return atom;
  }

  int32_t ParseNumber() {
    const size_t start = i_;
    int64_t value = 0;
    while (!Eof() && Peek() >= '0' && Peek() <= '9') {
      value = value * 10 + (Peek() - '0');
      if (value > 100000) Fail("repetition bound too large");
      ++i_;
    }
    if (i_ == start) Fail("expected a number in {m,n}");
    return static_cast<int32_t>(value);
  }

  void ParseBraces(int32_t& min, int32_t& max) {
    ++i_;  // {
    min = ParseNumber();
    max = min;
    if (!Eof() && Peek() == ',') {
      ++i_;
      max = !Eof() && Peek() == '}' ? -1 : ParseNumber();
    }
    if (Eof() || Peek() != '}') Fail("expected '}' closing {m,n}");
    ++i_;
    if (max >= 0 && max < min) Fail("{m,n} with n < m");
  }

  Expr ParseGroup() {
    ++i_;  // (
    if (s_.substr(i_, 2) == "?:") {
      i_ += 2;
    } else if (s_.substr(i_, 3) == "?P<" || (s_.substr(i_, 2) == "?<" && i_ + 2 < s_.size() && s_[i_ + 2] != '=' &&
                                             s_[i_ + 2] != '!')) {
      const size_t close = s_.find('>', i_);
      if (close == std::string_view::npos) Fail("unterminated group name");
      i_ = close + 1;
    } else if (!Eof() && Peek() == '?') {
      Fail("lookaround, flags or other (?...) group");
    }
    Expr e = ParseAlternation();
    if (Eof() || Peek() != ')') Fail("missing ')'");
    ++i_;
    return e;
  }

  Expr ParseAtom() {
    const char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return Chars(ParseClass());
      case '.':
        ++i_;
        return Chars(ComplementCodepoints({{'\n', '\n'}}));
      case '^':
      case '$':
        Fail(std::string("anchor '") + c + "' inside the pattern (only a leading ^ and a trailing $ are allowed)");
      case '*':
      case '+':
      case '?':
      case '{':
        Fail(std::string("nothing to repeat before '") + c + "'");
      case '\\':
        return Chars(ParseEscape(false));
      default: {
        const uint32_t cp = ReadCodepoint();
        return Chars({{cp, cp}});
      }
    }
  }

  uint32_t ReadCodepoint() {
    const utf8::Sequence seq = utf8::ScanSequence(s_, i_);
    if (seq.kind != utf8::Sequence::kValid) Fail("invalid UTF-8");
    i_ += seq.length;
    return seq.code_point;
  }

  uint32_t ParseHex(size_t digits) {
    uint32_t value = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (Eof() || !std::isxdigit(static_cast<unsigned char>(Peek()))) Fail("expected a hex digit");
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(Peek())));
      value = value * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
      ++i_;
    }
    return value;
  }

  // After '\': the characters the escape stands for.
  CodepointRanges ParseEscape(bool in_class) {
    ++i_;
    if (Eof()) Fail("trailing '\\'");
    const char c = Peek();
    ++i_;
    static const CodepointRanges kDigit = {{'0', '9'}};
    static const CodepointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const CodepointRanges kSpace = {{'\t', '\r'}, {' ', ' '}};
    switch (c) {
      case 'd': return kDigit;
      case 'D': return ComplementCodepoints(kDigit);
      case 'w': return kWord;
      case 'W': return ComplementCodepoints(kWord);
      case 's': return kSpace;
      case 'S': return ComplementCodepoints(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': {
        const uint32_t cp = ParseHex(2);
        return {{cp, cp}};
      }
      case 'u': {
        const uint32_t cp = ParseHex(4);
        return {{cp, cp}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        break;
      default:
        if (!std::isalnum(static_cast<unsigned char>(c))) return {{static_cast<uint32_t>(c), static_cast<uint32_t>(c)}};
    }
    --i_;
    Fail(std::string("escape \\") + c);
  }

  CodepointRanges ParseClass() {
    ++i_;  // [
    bool negate = false;
    if (!Eof() && Peek() == '^') {
      negate = true;
      ++i_;
    }
    CodepointRanges ranges;
    bool first = true;
    while (true) {
      if (Eof()) Fail("missing ']'");
      if (Peek() == ']' && !first) break;
      first = false;
      if (s_.substr(i_, 2) == "[:") Fail("POSIX class [:...:]");
      CodepointRanges item;
      if (Peek() == '\\') {
        item = ParseEscape(true);
      } else {
        const uint32_t cp = ReadCodepoint();
        item = {{cp, cp}};
      }
      if (item.size() == 1 && item[0].first == item[0].second && s_.substr(i_, 1) == "-" &&
          s_.substr(i_ + 1, 1) != "]" && i_ + 1 < s_.size()) {
        ++i_;  // -
        uint32_t hi = 0;
        if (Peek() == '\\') {
          const CodepointRanges h = ParseEscape(true);
          if (h.size() != 1 || h[0].first != h[0].second) Fail("class range ending in a class escape");
          hi = h[0].first;
        } else {
          hi = ReadCodepoint();
        }
        if (hi < item[0].first) Fail("class range out of order");
        item[0].second = hi;
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    ++i_;  // ]
    return negate ? ComplementCodepoints(ranges) : ranges;
  }

  std::string_view s_;
  bool json_string_;
  const std::string& what_;
  size_t i_ = 0;
};

}  // namespace

Expr JsonStringChars(const CodepointRanges& ranges) {
  static const CodepointRanges kSpecial = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  CodepointRanges plain;
  for (auto [lo, hi] : ranges) {
    // ranges minus kSpecial, piece by piece
    uint32_t next = lo;
    for (auto [slo, shi] : kSpecial) {
      if (shi < next || slo > hi) continue;
      if (slo > next) plain.emplace_back(next, slo - 1);
      next = std::max(next, shi + 1);
    }
    if (next <= hi) plain.emplace_back(next, hi);
  }
  std::vector<Expr> options;
  if (!plain.empty()) options.push_back(Expr::Utf8(plain));
  for (auto [slo, shi] : kSpecial) {
    for (uint32_t cp = slo; cp <= shi; ++cp) {
      if (Contains(ranges, cp)) options.push_back(Expr::Literal(JsonEscape(cp)));
    }
  }
  if (options.empty()) return Expr::Bytes(ByteSet{});  // matches nothing
  return Expr::Alt(std::move(options));
}

Expr RegexToExpr(std::string_view pattern, bool json_string, const std::string& what) {
  if (!pattern.empty() && pattern.front() == '^') pattern.remove_prefix(1);
  if (!pattern.empty() && pattern.back() == '$') {
    size_t backslashes = 0;
    for (size_t k = pattern.size() - 1; k > 0 && pattern[k - 1] == '\\'; --k) ++backslashes;
    if (backslashes % 2 == 0) pattern.remove_suffix(1);
  }
  return RegexParser(pattern, json_string, what).Parse();
}

Grammar GrammarFromRegex(std::string_view pattern) {
  GrammarBuilder b;
  const int32_t root = b.AddRule("root", RegexToExpr(pattern, false, "regex"));
  return b.Build(root, "regex");
}

Grammar GrammarFromChoices(const std::vector<std::string>& choices) {
  if (choices.empty()) throw StructuredOutputError("choice: the list of choices is empty");
  std::vector<Expr> options;
  for (const std::string& c : choices) options.push_back(Expr::Literal(c));
  GrammarBuilder b;
  const int32_t root = b.AddRule("root", Expr::Alt(std::move(options)));
  return b.Build(root, "choice");
}

}  // namespace vllm::structured_output
