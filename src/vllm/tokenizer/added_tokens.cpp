#include "added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "utf8.h"

namespace vllm {
namespace {

// Word characters as in the regex \w of HF's single_word check: letters, marks,
// decimal digits and connector punctuation.
bool IsWordChar(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// Unicode White_Space (the regex \s of HF's lstrip/rstrip).
bool IsWhiteSpace(char32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return true;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP;
}

// The code point that ends just before `end` (text is valid UTF-8, end > 0).
utf8::Sequence CharBefore(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return utf8::ScanSequence(text, start);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& content = tokens_[t].content;
    if (content.empty()) continue;
    first_byte_[static_cast<uint8_t>(content[0])] = true;
    int32_t node = 0;
    for (char c : content) {
      const uint8_t byte = static_cast<uint8_t>(c);
      int32_t next = Child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& children = nodes_[node].children;
        children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0})),
                        {byte, next});
      }
      node = next;
    }
    nodes_[node].token = static_cast<int32_t>(t);
  }
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

bool AddedTokenMatcher::FindLongestAt(std::string_view text, size_t pos, Match& match) const {
  int32_t node = 0;
  bool found = false;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    if (nodes_[node].token >= 0) {
      match = {pos, i + 1, nodes_[node].token};
      found = true;
    }
  }
  return found;
}

// Applies single_word, lstrip and rstrip to a match; false if the match is dropped.
bool AddedTokenMatcher::KeepMatch(std::string_view text, Match& match, size_t previous_end) const {
  const AddedToken& token = tokens_[match.token];
  if (token.single_word) {
    const bool word_before = match.start > 0 && IsWordChar(CharBefore(text, match.start).code_point);
    const bool word_after = match.end < text.size() && IsWordChar(utf8::ScanSequence(text, match.end).code_point);
    if (word_before || word_after) return false;
  }
  if (token.lstrip) {
    while (match.start > previous_end) {
      const utf8::Sequence before = CharBefore(text, match.start);
      if (!IsWhiteSpace(before.code_point)) break;
      match.start -= before.length;
    }
  }
  if (token.rstrip) {
    while (match.end < text.size()) {
      const utf8::Sequence after = utf8::ScanSequence(text, match.end);
      if (!IsWhiteSpace(after.code_point)) break;
      match.end += after.length;
    }
  }
  return true;
}

std::vector<TextSegment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t plain_start = 0, pos = 0;
  while (pos < text.size()) {
    Match match{};
    if (!first_byte_[static_cast<uint8_t>(text[pos])] || !FindLongestAt(text, pos, match)) {
      ++pos;
      continue;
    }
    pos = match.end;  // a dropped match is not searched again, as in HF
    if (!KeepMatch(text, match, plain_start)) continue;
    if (match.start > plain_start) segments.push_back({text.substr(plain_start, match.start - plain_start)});
    segments.push_back({text.substr(match.start, match.end - match.start), tokens_[match.token].id});
    plain_start = match.end;
    pos = std::max(pos, match.end);
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start)});
  return segments;
}

}  // namespace vllm
