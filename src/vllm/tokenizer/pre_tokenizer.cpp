#include "pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "utf8.h"
#include "vt/error.h"

namespace vllm {
namespace {

// Unicode White_Space, which is Oniguruma's \s: TAB..CR, NEL and the separators Zs, Zl, Zp.
constexpr std::string_view kWhiteSpaceItems = R"(\t-\r\x{85}\p{Z})";

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Copies a character class that starts at pattern[pos] == '[' into `out`, spelling \s
// out; returns the position after its closing ']'.
size_t CopyCharacterClass(std::string_view pattern, size_t pos, std::string& out) {
  out.push_back(pattern[pos++]);
  if (pos < pattern.size() && pattern[pos] == '^') out.push_back(pattern[pos++]);
  if (pos < pattern.size() && pattern[pos] == ']') out.push_back(pattern[pos++]);  // a literal ']'
  while (pos < pattern.size() && pattern[pos] != ']') {
    if (pattern[pos] == '\\' && pos + 1 < pattern.size()) {
      const char escaped = pattern[pos + 1];
      if (escaped == 'S') {
        throw vt::Error("tokenizer: split regex uses \\S inside a character class, which is not supported: " +
                        std::string(pattern));
      }
      if (escaped == 's') {
        out.append(kWhiteSpaceItems);
      } else {
        out.append(pattern.substr(pos, 2));
      }
      pos += 2;
    } else if (pattern.substr(pos, 2) == "[:") {
      const size_t close = pattern.find(":]", pos + 2);
      const size_t end = close == std::string_view::npos ? pattern.size() : close + 2;
      out.append(pattern.substr(pos, end - pos));
      pos = end;
    } else {
      out.push_back(pattern[pos++]);
    }
  }
  if (pos < pattern.size()) out.push_back(pattern[pos++]);
  return pos;
}

}  // namespace

std::string_view SplitPatternForGgufPre(std::string_view pre, const std::string& source) {
  if (pre == "qwen2" || pre == "qwen3") return kQwen2SplitPattern;
  if (pre == "qwen35") return kQwen35SplitPattern;
  if (pre == "gpt-2" || pre == "default") return kGpt2SplitPattern;
  throw vt::Error(source + ": tokenizer.ggml.pre = '" + std::string(pre) +
                  "' is not a known pre-tokenizer (known: qwen2, qwen3, qwen35, gpt-2, default)");
}

std::string OnigurumaCompatiblePattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  size_t pos = 0;
  while (pos < pattern.size()) {
    if (pattern[pos] == '[') {
      pos = CopyCharacterClass(pattern, pos, out);
    } else if (pattern[pos] == '\\' && pos + 1 < pattern.size()) {
      const char escaped = pattern[pos + 1];
      if (escaped == 's' || escaped == 'S') {
        out.append(escaped == 's' ? "[" : "[^").append(kWhiteSpaceItems).append("]");
      } else {
        out.append(pattern.substr(pos, 2));
      }
      pos += 2;
    } else {
      out.push_back(pattern[pos++]);
    }
  }
  return out;
}

// One step of the pre-tokenizer: a compiled split regex, or (code == nullptr) a prefix space.
struct PreTokenizer::Step {
  pcre2_code* code = nullptr;
  ~Step() { pcre2_code_free(code); }
  void SplitInto(std::string_view text, std::vector<std::string>& out) const;
  int Match(std::string_view text, size_t start, pcre2_match_data* match) const;
};

int PreTokenizer::Step::Match(std::string_view text, size_t start, pcre2_match_data* match) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // Very long runs (say 100k spaces) outgrow the default 32 KiB JIT stack; retry the
    // one match with a large one rather than giving every call that cost.
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 256 * 1024 * 1024, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
    rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match, context);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    throw vt::Error("tokenizer: split regex failed on a text of " + std::to_string(text.size()) +
                    " bytes: " + Pcre2Message(rc));
  }
  return rc;
}

void PreTokenizer::Step::SplitInto(std::string_view text, std::vector<std::string>& out) const {
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> owner(match, &pcre2_match_data_free);
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
  size_t search_from = 0, piece_start = 0;
  while (search_from < text.size() && Match(text, search_from, match) >= 0) {
    const size_t start = ovector[0], end = ovector[1];
    if (start == end) {  // an empty match cuts nothing; step over one character
      search_from = end + utf8::ScanSequence(text, end).length;
      continue;
    }
    if (start > piece_start) out.emplace_back(text.substr(piece_start, start - piece_start));
    out.emplace_back(text.substr(start, end - start));
    piece_start = search_from = end;
  }
  if (piece_start < text.size()) out.emplace_back(text.substr(piece_start));
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::AddRegexSplit(std::string_view pattern, const std::string& source) {
  const std::string compatible = OnigurumaCompatiblePattern(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compatible.data()), compatible.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  if (code == nullptr) {
    throw vt::Error(source + ": the split regex does not compile (" + Pcre2Message(error) + " at offset " +
                    std::to_string(error_offset) + " of '" + compatible + "')");
  }
  // JIT makes matching several times faster; without JIT support PCRE2 interprets.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto step = std::make_unique<Step>();
  step->code = code;
  steps_.push_back(std::move(step));
}

void PreTokenizer::AddPrefixSpace() { steps_.push_back(std::make_unique<Step>()); }

bool PreTokenizer::empty() const { return steps_.empty(); }

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const auto& step : steps_) {
    if (step->code == nullptr) {
      for (std::string& piece : pieces) {
        if (piece.front() != ' ') piece.insert(piece.begin(), ' ');
      }
      continue;
    }
    std::vector<std::string> next;
    next.reserve(pieces.size() * 2);
    for (const std::string& piece : pieces) step->SplitInto(piece, next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace vllm
