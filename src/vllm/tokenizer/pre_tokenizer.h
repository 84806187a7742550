// Pre-tokenization: cutting normalised text into the pieces that BPE encodes one by
// one. It is a list of steps run in order over all pieces (HF's pre_tokenizer
// Sequence): a regex split (HF Split with behaviour "Isolated": every match and every
// gap between matches becomes a piece) or a prefix space (HF ByteLevel's
// add_prefix_space, applied to each piece).
//
// The regexes run on PCRE2 with UTF and UCP. HF `tokenizers` runs them on Oniguruma,
// whose \s is the Unicode White_Space property; PCRE2's UCP \s adds U+180E. Patterns
// are therefore compiled with \s and \S spelled out as White_Space (see
// OnigurumaCompatiblePattern) so that both engines cut text the same way.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vllm {

// Qwen2 and Qwen3 (HF tokenizer.json; llama.cpp pre-tokenizer "qwen2").
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: letters may carry combining marks (llama.cpp "qwen35", docs/qwen35.md §6).
inline constexpr std::string_view kQwen35SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2 (HF ByteLevel pre-tokenizer with use_regex = true; llama.cpp "gpt-2").
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The split pattern for a GGUF `tokenizer.ggml.pre` name; throws, naming `source` and
// the names that are known, for any other name.
std::string_view SplitPatternForGgufPre(std::string_view pre, const std::string& source);

// `pattern` with \s and \S (outside and inside character classes) replaced by explicit
// White_Space classes. Throws for \S inside a character class, which has no such
// spelling.
std::string OnigurumaCompatiblePattern(std::string_view pattern);

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Appends a regex split step; `source` names the file for compile errors.
  void AddRegexSplit(std::string_view pattern, const std::string& source);
  // Appends a step that prepends ' ' to every piece that does not start with one.
  void AddPrefixSpace();
  bool empty() const;

  // Cuts `text` into pieces; empty pieces are dropped.
  std::vector<std::string> Split(std::string_view text) const;

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace vllm
