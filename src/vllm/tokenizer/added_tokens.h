// Finding added tokens (special tokens such as <|im_start|>, and user tokens such as
// <think>) in text before BPE, so that they are never split.
//
// Semantics of HF `tokenizers`' AddedVocabulary: tokens are found leftmost-longest
// (at the first position where any token matches, the longest token wins; scanning
// resumes after it). A single_word token is dropped where a word character touches
// it; lstrip / rstrip tokens take the whitespace on their left / right with them.
// Matching is on bytes, with a byte trie; each position costs one table look-up unless
// a token starts with that byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vllm {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // dropped by decoding with skip_special_tokens
  bool single_word = false;  // matches only between non-word characters
  bool lstrip = false;       // absorbs the whitespace before it
  bool rstrip = false;       // absorbs the whitespace after it
  bool normalized = false;   // matched in normalised text instead of raw text
};

// A cut of text: either an added token (token_id >= 0) or plain text.
struct TextSegment {
  std::string_view text;
  int32_t token_id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const { return nodes_.size() <= 1; }
  // Cuts `text` into plain segments and added tokens, in order, covering all of it
  // except whitespace absorbed by lstrip/rstrip. Empty plain segments are left out.
  std::vector<TextSegment> Split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                 // index into tokens_ when a token ends here
  };
  struct Match {
    size_t start, end;
    int32_t token;
  };
  int32_t Child(int32_t node, uint8_t byte) const;
  bool FindLongestAt(std::string_view text, size_t pos, Match& match) const;
  bool KeepMatch(std::string_view text, Match& match, size_t previous_end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_byte_[256] = {};
};

}  // namespace vllm
