// Python `str` semantics on UTF-8 std::strings, for the Jinja interpreter.
//
// Jinja runs on Python strings: lengths, indices and slices count code points,
// strip()/split() use Python's notion of whitespace (str.isspace), and repr()
// quotes and escapes the way Python does. These helpers give the same answers on
// UTF-8 bytes. Strings reaching them are valid UTF-8 (template source and JSON
// input are validated on entry).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vllm::jinja::py {

// Decodes valid UTF-8 into code points; EncodeUtf8 appends one code point.
std::u32string DecodeUtf8(std::string_view s);
void AppendUtf8(char32_t cp, std::string& out);
std::string EncodeUtf8(std::u32string_view s);

// The code point at byte `i`, which it advances past. Lenient: a UTF-16 surrogate
// (which '%c' % 0xD800 can put into a string) decodes as itself; a byte that starts
// no character is a code point of its own.
char32_t NextCodePoint(std::string_view s, size_t& i);

size_t CodePointCount(std::string_view s);

// str.isspace() for one code point (Unicode White_Space plus the ASCII separators 0x1c-0x1f).
bool IsSpace(char32_t cp);

// str.strip / lstrip / rstrip. `chars` absent: Python whitespace; present: any of its code points.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// str.split / str.rsplit. `sep` absent: runs of whitespace, empty strings dropped.
// max_split < 0: no limit. Throws std::invalid_argument on an empty separator.
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep, int64_t max_split);
std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep, int64_t max_split);
std::vector<std::string> SplitLines(std::string_view s, bool keep_ends);

// str.replace(old, new, count); count < 0: all.
std::string Replace(std::string_view s, std::string_view old_part, std::string_view new_part, int64_t count);
// str.count(sub) (non-overlapping); str.find / rfind in code points, -1 when absent.
int64_t Count(std::string_view s, std::string_view sub);
int64_t Find(std::string_view s, std::string_view sub, bool from_right);

// Case mappings (simple, per code point) as str.upper/lower/title/capitalize/swapcase.
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Title(std::string_view s);
std::string Capitalize(std::string_view s);

// str.isdigit / isalpha / isalnum / islower / isupper / isspace on whole strings.
bool IsDigitString(std::string_view s);
bool IsAlphaString(std::string_view s);
bool IsAlnumString(std::string_view s);
bool IsLowerString(std::string_view s);
bool IsUpperString(std::string_view s);
bool IsSpaceString(std::string_view s);

// repr(str): single quotes unless the text holds ' and no ", escapes as Python does.
std::string Repr(std::string_view s);

// markupsafe.escape: & < > " ' as HTML entities.
std::string HtmlEscape(std::string_view s);

}  // namespace vllm::jinja::py
