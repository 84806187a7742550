#include "py_string.h"

#include <utf8proc.h>

#include <algorithm>
#include <stdexcept>

#include "tokenizer/utf8.h"

namespace vllm::jinja::py {

char32_t NextCodePoint(std::string_view s, size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const int len = std::max(1, utf8::LeadLength(lead));
  char32_t cp = len == 1 ? lead : lead & (0x7F >> len);
  for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

namespace {

bool ContainsCodePoint(const std::u32string& set, char32_t cp) { return set.find(cp) != std::u32string::npos; }

bool IsTitlecase(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_LT; }

bool IsCased(char32_t cp) { return utf8proc_isupper(cp) || utf8proc_islower(cp) || IsTitlecase(cp); }

bool IsPrintable(char32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

template <typename Predicate>
bool AllCodePoints(std::string_view s, Predicate predicate) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    if (!predicate(NextCodePoint(s, i))) return false;
  }
  return true;
}

// Python's full case mappings (SpecialCasing.txt) where they differ from the simple
// per-code-point ones: ß -> SS, the Latin ligatures, İ -> i̇.
enum class CaseKind { kUpper, kLower, kTitle };
const char* SpecialCase(char32_t cp, CaseKind kind) {
  struct Entry {
    char32_t cp;
    const char* upper;
    const char* title;
  };
  static constexpr Entry kEntries[] = {
      {0x00DF, "SS", "Ss"},  {0xFB00, "FF", "Ff"},   {0xFB01, "FI", "Fi"}, {0xFB02, "FL", "Fl"},
      {0xFB03, "FFI", "Ffi"}, {0xFB04, "FFL", "Ffl"}, {0xFB05, "ST", "St"}, {0xFB06, "ST", "St"},
      {0x0149, "\u02BCN", "\u02BCN"}};
  if (kind == CaseKind::kLower) return cp == 0x0130 ? "i\u0307" : nullptr;
  for (const Entry& e : kEntries) {
    if (e.cp == cp) return kind == CaseKind::kUpper ? e.upper : e.title;
  }
  return nullptr;
}

// Maps each code point with `kind_of(cp)` (which case to apply), using the full mappings.
template <typename KindOf>
std::string MapCase(std::string_view s, KindOf kind_of) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = NextCodePoint(s, i);
    const CaseKind kind = kind_of(cp);
    if (const char* special = SpecialCase(cp, kind)) {
      out += special;
      continue;
    }
    const auto c = static_cast<utf8proc_int32_t>(cp);
    const utf8proc_int32_t mapped = kind == CaseKind::kUpper   ? utf8proc_toupper(c)
                                    : kind == CaseKind::kLower ? utf8proc_tolower(c)
                                                               : utf8proc_totitle(c);
    AppendUtf8(static_cast<char32_t>(mapped), out);
  }
  return out;
}

// Splits on runs of whitespace, scanning from the left (or right), at most max_split times.
std::vector<std::string> SplitOnWhitespace(std::string_view s, int64_t max_split, bool from_right) {
  std::u32string cps = DecodeUtf8(s);
  if (from_right) std::reverse(cps.begin(), cps.end());
  std::vector<std::string> parts;
  size_t i = 0;
  while (true) {
    while (i < cps.size() && IsSpace(cps[i])) ++i;
    if (i == cps.size()) break;
    size_t end = i;
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
      end = cps.size();
      while (end > i && IsSpace(cps[end - 1])) --end;
    } else {
      while (end < cps.size() && !IsSpace(cps[end])) ++end;
    }
    std::u32string part = cps.substr(i, end - i);
    if (from_right) std::reverse(part.begin(), part.end());
    parts.push_back(EncodeUtf8(part));
    i = end;
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

}  // namespace

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(NextCodePoint(s, i));
  return out;
}

void AppendUtf8(char32_t cp, std::string& out) { utf8::AppendCodePoint(out, cp); }

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) AppendUtf8(cp, out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t count = 0;
  for (char c : s) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

bool IsSpace(char32_t cp) {
  if (cp <= 0x7F) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? ContainsCodePoint(set, cp) : IsSpace(cp); };
  // Works on the bytes: only the code points at both ends are decoded.
  size_t begin = 0, end = s.size();
  if (left) {
    for (size_t next = 0; begin < end; begin = next) {
      if (!strippable(NextCodePoint(s, next))) break;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t next = start;
      if (!strippable(NextCodePoint(s, next))) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep, int64_t max_split) {
  if (!sep) return SplitOnWhitespace(s, max_split, false);
  if (sep->empty()) throw std::invalid_argument("empty separator");
  std::vector<std::string> parts;
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t at = s.find(*sep, start);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(start, at - start));
    start = at + sep->size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep, int64_t max_split) {
  if (!sep) return SplitOnWhitespace(s, max_split, true);
  if (sep->empty()) throw std::invalid_argument("empty separator");
  std::vector<std::string> parts;
  size_t end = s.size();
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> SplitLines(std::string_view s, bool keep_ends) {
  const std::u32string cps = DecodeUtf8(s);
  auto is_break = [](char32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D || cp == 0x1E ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
  };
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_break(cps[i])) continue;
    size_t end = i + 1;
    if (cps[i] == '\r' && end < cps.size() && cps[end] == '\n') ++end;
    lines.push_back(EncodeUtf8(std::u32string_view(cps).substr(start, (keep_ends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) lines.push_back(EncodeUtf8(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string Replace(std::string_view s, std::string_view old_part, std::string_view new_part, int64_t count) {
  std::string out;
  if (old_part.empty()) {
    // Python inserts `new` before every code point and at the end.
    const std::u32string cps = DecodeUtf8(s);
    int64_t done = 0;
    for (char32_t cp : cps) {
      if (count < 0 || done < count) out += new_part, ++done;
      AppendUtf8(cp, out);
    }
    if (count < 0 || done < count) out += new_part;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old_part, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(new_part);
    start = at + old_part.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

int64_t Count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodePointCount(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

int64_t Find(std::string_view s, std::string_view sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(CodePointCount(s.substr(0, at)));
}

std::string Upper(std::string_view s) {
  return MapCase(s, [](char32_t) { return CaseKind::kUpper; });
}

std::string Lower(std::string_view s) {
  return MapCase(s, [](char32_t) { return CaseKind::kLower; });
}

std::string Title(std::string_view s) {
  bool previous_is_cased = false;
  return MapCase(s, [&](char32_t cp) {
    const CaseKind kind = previous_is_cased ? CaseKind::kLower : CaseKind::kTitle;
    previous_is_cased = IsCased(cp);
    return kind;
  });
}

std::string Capitalize(std::string_view s) {
  bool first = true;
  return MapCase(s, [&](char32_t) {
    const CaseKind kind = first ? CaseKind::kTitle : CaseKind::kLower;
    first = false;
    return kind;
  });
}

bool IsDigitString(std::string_view s) {
  return AllCodePoints(s, [](char32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_ND; });
}

bool IsAlphaString(std::string_view s) {
  return AllCodePoints(s, [](char32_t cp) {
    const auto c = utf8proc_category(cp);
    return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
  });
}

bool IsAlnumString(std::string_view s) {
  return AllCodePoints(s, [](char32_t cp) {
    const auto c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
  });
}

bool IsLowerString(std::string_view s) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = NextCodePoint(s, i);
    if (utf8proc_isupper(cp) || IsTitlecase(cp)) return false;
    any_cased = any_cased || utf8proc_islower(cp);
  }
  return any_cased;
}

bool IsUpperString(std::string_view s) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = NextCodePoint(s, i);
    if (utf8proc_islower(cp) || IsTitlecase(cp)) return false;
    any_cased = any_cased || utf8proc_isupper(cp);
  }
  return any_cased;
}

bool IsSpaceString(std::string_view s) { return AllCodePoints(s, IsSpace); }

std::string Repr(std::string_view s) {
  const bool use_double = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = NextCodePoint(s, i);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (IsPrintable(cp)) {
      AppendUtf8(cp, out);
    } else {
      const int digits = cp < 0x100 ? 2 : cp < 0x10000 ? 4 : 8;
      out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
      for (int d = digits - 1; d >= 0; --d) out.push_back(kHex[(cp >> (4 * d)) & 0xF]);
    }
  }
  out.push_back(quote);
  return out;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace vllm::jinja::py
