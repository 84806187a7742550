#include "lexer.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "py_string.h"
#include "tokenizer/utf8.h"
#include "vllm/tokenizer/chat_template.h"

namespace vllm::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// jinja2 removes one trailing newline and turns \r\n and \r into \n before lexing.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = LexData(pos);
    Emit(TokenType::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void Fail(size_t pos, const std::string& message) const {
    const auto [line, column] = Position(pos);
    throw ChatTemplateError(ChatTemplateError::Kind::kSyntax, line,
                            "column " + std::to_string(column) + ": " + message);
  }

  std::pair<int, int> Position(size_t pos) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    const size_t start = *it;
    const auto column = py::CodePointCount(std::string_view(src_).substr(start, pos - start)) + 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(column)};
  }

  Token& Emit(TokenType type, std::string text, size_t pos) {
    Token token;
    token.type = type;
    token.text = std::move(text);
    std::tie(token.line, token.column) = Position(pos);
    tokens_.push_back(std::move(token));
    return tokens_.back();
  }

  // Length of the Python whitespace code point at pos, 0 if there is none.
  size_t WhitespaceLength(size_t pos) const {
    if (pos >= src_.size()) return 0;
    const utf8::Sequence seq = utf8::ScanSequence(src_, pos);
    return seq.kind == utf8::Sequence::kValid && py::IsSpace(seq.code_point) ? seq.length : 0;
  }

  size_t SkipWhitespace(size_t pos) const {
    while (size_t len = WhitespaceLength(pos)) pos += len;
    return pos;
  }

  bool StartsWith(size_t pos, std::string_view text) const {
    return std::string_view(src_).substr(pos, text.size()) == text;
  }

  // Text before a tag, after the tag's whitespace control: `-` strips all trailing
  // whitespace; otherwise lstrip_blocks drops spaces between the line start and a
  // block or comment tag (not a `+` tag, not a variable tag).
  void EmitText(size_t begin, size_t end, char sign, bool lstrip_applies) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = py::Strip(text, std::nullopt, false, true);
    } else if (sign != '+' && lstrip_applies) {
      const size_t line_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (line_pos > 0 || line_starting_) {
        const std::string tail = text.substr(line_pos);
        if (!tail.empty() && py::IsSpaceString(tail)) text.resize(line_pos);
      }
    }
    if (!text.empty()) Emit(TokenType::kText, std::move(text), begin);
  }

  // Lexes template data up to and including the next tag; returns the position after it.
  size_t LexData(size_t pos) {
    size_t tag = pos;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        EmitText(pos, src_.size(), 0, false);
        return src_.size();
      }
      const char kind = src_[tag + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++tag;
    }
    const char kind = src_[tag + 1];
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    EmitText(pos, tag, sign, kind != '{');
    const size_t body = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') return LexComment(body);
    if (kind == '%') {
      if (const size_t after_raw = MatchRawBegin(body)) return LexRaw(after_raw);
      return LexTag(tag, body, TokenType::kBlockBegin, TokenType::kBlockEnd);
    }
    return LexTag(tag, body, TokenType::kVariableBegin, TokenType::kVariableEnd);
  }

  size_t LexComment(size_t body) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) Fail(body, "missing end of comment tag '#}'");
    size_t end = close + 2;
    const char sign = close > body ? src_[close - 1] : 0;
    if (sign == '-') {
      end = SkipWhitespace(end);
    } else if (sign != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    line_starting_ = src_[end - 1] == '\n';
    return end;
  }

  // `{% raw %}` (the body starts after "{%" and its sign): the position after the tag, or 0.
  size_t MatchRawBegin(size_t body) const {
    size_t pos = SkipWhitespace(body);
    if (!StartsWith(pos, "raw")) return 0;
    pos = SkipWhitespace(pos + 3);
    if (StartsWith(pos, "-%}")) return SkipWhitespace(pos + 3);
    if (StartsWith(pos, "%}")) return pos + 2;
    return 0;
  }

  size_t LexRaw(size_t content) {
    line_starting_ = src_[content - 1] == '\n';
    for (size_t tag = src_.find("{%", content); tag != std::string::npos; tag = src_.find("{%", tag + 1)) {
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      size_t pos = SkipWhitespace(tag + 2 + (sign ? 1 : 0));
      if (!StartsWith(pos, "endraw")) continue;
      pos = SkipWhitespace(pos + 6);
      size_t end = 0;
      if (StartsWith(pos, "+%}")) {
        end = pos + 3;
      } else if (StartsWith(pos, "-%}")) {
        end = SkipWhitespace(pos + 3);
      } else if (StartsWith(pos, "%}")) {
        end = pos + 2 + (pos + 2 < src_.size() && src_[pos + 2] == '\n' ? 1 : 0);
      } else {
        continue;
      }
      EmitText(content, tag, sign, true);
      line_starting_ = src_[end - 1] == '\n';
      return end;
    }
    Fail(content, "missing end of raw directive ({% endraw %})");
  }

  // Expression tokens of one {% %} or {{ }} tag; returns the position after its end.
  size_t LexTag(size_t tag, size_t pos, TokenType begin_type, TokenType end_type) {
    Emit(begin_type, "", tag);
    const bool is_block = begin_type == TokenType::kBlockBegin;
    std::vector<char> open_brackets;
    while (true) {
      pos = SkipWhitespace(pos);
      if (pos >= src_.size()) Fail(tag, std::string("unexpected end of template, missing '") + (is_block ? "%}" : "}}") + "'");
      if (open_brackets.empty()) {
        if (const size_t end = MatchTagEnd(pos, is_block)) {
          Emit(end_type, "", pos);
          line_starting_ = src_[end - 1] == '\n';
          return end;
        }
      }
      pos = LexExpressionToken(pos, open_brackets);
    }
  }

  size_t MatchTagEnd(size_t pos, bool is_block) const {
    const std::string_view close = is_block ? "%}" : "}}";
    if (src_[pos] == '-' && StartsWith(pos + 1, close)) return SkipWhitespace(pos + 3);
    if (is_block && src_[pos] == '+' && StartsWith(pos + 1, close)) return pos + 3;
    if (StartsWith(pos, close)) {
      const size_t end = pos + 2;
      return is_block && end < src_.size() && src_[end] == '\n' ? end + 1 : end;  // trim_blocks
    }
    return 0;
  }

  size_t LexExpressionToken(size_t pos, std::vector<char>& open_brackets) {
    const char c = src_[pos];
    if (IsDigit(c)) return LexNumber(pos);
    if (IsNameStart(c)) {
      size_t end = pos;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenType::kName, src_.substr(pos, end - pos), pos);
      return end;
    }
    if (c == '\'' || c == '"') return LexString(pos);
    static constexpr std::string_view kTwoCharOperators[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoCharOperators) {
      if (StartsWith(pos, op)) {
        Emit(TokenType::kOperator, std::string(op), pos);
        return pos + 2;
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      Fail(pos, "unexpected character '" + src_.substr(pos, utf8::ScanSequence(src_, pos).length) + "'");
    }
    if (c == '(' || c == '[' || c == '{') open_brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (open_brackets.empty()) Fail(pos, std::string("unexpected '") + c + "'");
      if (open_brackets.back() != c) Fail(pos, std::string("unexpected '") + c + "', expected '" + open_brackets.back() + "'");
      open_brackets.pop_back();
    }
    Emit(TokenType::kOperator, std::string(1, c), pos);
    return pos + 1;
  }

  // (\d+_)*\d+ : digits with single underscores between them; returns the end, or pos.
  size_t ScanDigitGroups(size_t pos) const {
    size_t end = pos;
    while (end < src_.size() && IsDigit(src_[end])) {
      ++end;
      if (end + 1 < src_.size() && src_[end] == '_' && IsDigit(src_[end + 1])) ++end;
    }
    return end;
  }

  size_t ScanExponent(size_t pos) const {
    if (pos >= src_.size() || (src_[pos] != 'e' && src_[pos] != 'E')) return pos;
    size_t digits = pos + 1;
    if (digits < src_.size() && (src_[digits] == '+' || src_[digits] == '-')) ++digits;
    const size_t end = ScanDigitGroups(digits);
    return end > digits ? end : pos;
  }

  size_t LexNumber(size_t pos) {
    const size_t int_end = ScanDigitGroups(pos);
    size_t fraction_end = int_end;
    if (int_end + 1 < src_.size() && src_[int_end] == '.' && IsDigit(src_[int_end + 1])) {
      fraction_end = ScanDigitGroups(int_end + 1);
    }
    const size_t exponent_end = ScanExponent(fraction_end);
    const size_t float_end = exponent_end > fraction_end ? exponent_end : fraction_end;
    const bool after_dot = pos > 0 && src_[pos - 1] == '.';
    std::string digits;
    if (float_end > int_end && !after_dot) {
      for (size_t i = pos; i < float_end; ++i) {
        if (src_[i] != '_') digits.push_back(src_[i]);
      }
      Emit(TokenType::kFloat, src_.substr(pos, float_end - pos), pos).float_value = std::strtod(digits.c_str(), nullptr);
      return float_end;
    }
    return LexInteger(pos);
  }

  size_t LexInteger(size_t pos) {
    int base = 10;
    size_t digits = pos;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char prefix = static_cast<char>(src_[pos + 1] | 0x20);
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : prefix == 'x' ? 16 : 10;
      if (base != 10) digits = pos + 2;
    }
    auto digit_value = [&](char ch) {
      const int v = IsDigit(ch) ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : 99;
      return v < base ? v : -1;
    };
    Int value = 0;
    size_t end = digits;
    while (end < src_.size()) {
      const bool underscore = src_[end] == '_' && end + 1 < src_.size() && digit_value(src_[end + 1]) >= 0 && end > pos;
      const size_t at = underscore ? end + 1 : end;
      const int d = at < src_.size() ? digit_value(src_[at]) : -1;
      if (d < 0) break;
      if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value)) {
        Fail(pos, "integer literal too large");
      }
      end = at + 1;
    }
    if (end == digits) {  // "0x" without digits: the "0" alone, then a name
      end = pos + 1;
      value = 0;
    }
    Emit(TokenType::kInteger, src_.substr(pos, end - pos), pos).int_value = value;
    return end;
  }

  size_t LexString(size_t pos) {
    const char quote = src_[pos];
    size_t end = pos + 1;
    while (end < src_.size() && src_[end] != quote) end += src_[end] == '\\' ? 2 : 1;
    if (end >= src_.size()) Fail(pos, "unterminated string literal");
    Emit(TokenType::kString, DecodeEscapes(pos + 1, end), pos);
    return end + 1;
  }

  // Python's unicode-escape decoding, as jinja2 applies it to string literals.
  std::string DecodeEscapes(size_t begin, size_t end) const {
    std::string out;
    for (size_t i = begin; i < end; ++i) {
      if (src_[i] != '\\' || i + 1 >= end) {
        out.push_back(src_[i]);
        continue;
      }
      const char e = src_[++i];
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': case 'u': case 'U': {
          const size_t count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (size_t k = 1; k <= count; ++k) {
            const char h = i + k < end ? src_[i + k] : 0;
            const int v = IsDigit(h) ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
            if (v < 0) Fail(i - 1, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<char32_t>(v);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) Fail(i - 1, "invalid code point escape in string literal");
          py::AppendUtf8(cp, out);
          i += count;
          break;
        }
        case 'N': Fail(i - 1, "\\N{...} escapes are not supported in string literals");
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < end && src_[i + 1] >= '0' && src_[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(src_[++i] - '0');
            }
            py::AppendUtf8(cp, out);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  if (const std::optional<size_t> bad = utf8::FindInvalid(source)) {
    const auto line = std::count(source.begin(), source.begin() + static_cast<std::ptrdiff_t>(*bad), '\n') + 1;
    throw ChatTemplateError(ChatTemplateError::Kind::kSyntax, static_cast<int>(line),
                            "template source is not valid UTF-8 (byte offset " + std::to_string(*bad) + ")");
  }
  return Lexer(NormalizeNewlines(source)).Run();
}

std::string DescribeToken(const Token& token) {
  switch (token.type) {
    case TokenType::kText: return "template data";
    case TokenType::kVariableBegin: return "begin of print statement '{{'";
    case TokenType::kVariableEnd: return "end of print statement '}}'";
    case TokenType::kBlockBegin: return "begin of statement block '{%'";
    case TokenType::kBlockEnd: return "end of statement block '%}'";
    case TokenType::kName: return "name '" + token.text + "'";
    case TokenType::kString: return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat: return "number " + token.text;
    case TokenType::kOperator: return "'" + token.text + "'";
    case TokenType::kEnd: return "end of template";
  }
  return "token";
}

}  // namespace vllm::jinja
