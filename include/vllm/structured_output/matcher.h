// CompiledGrammar (a grammar bound to a vocabulary, with its token mask cache) and
// GrammarMatcher (one request's parse state). docs/structured_output.md has the
// algorithm; in short:
//
//   CompiledGrammar   shared by every request with the same grammar and tokenizer;
//                     per grammar position, the tokens it accepts, rejects, or leaves
//                     to the request's state (computed once, on first use)
//   GrammarMatcher    per request: AcceptToken after sampling, FillNextTokenBitmask
//                     before it, Rollback(k) to undo the last k tokens
//
// A CompiledGrammar is safe to share between threads; a GrammarMatcher is used by one
// thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "vllm/structured_output/grammar.h"
#include "vllm/structured_output/tokenizer_info.h"

namespace vllm::structured_output {

class EarleyParser;
struct MaskCache;

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenizerInfo> tokenizer);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return grammar_; }
  const TokenizerInfo& tokenizer() const { return *tokenizer_; }
  // Computes the position cache entries now instead of on first use (entries a
  // matcher computes meanwhile are not computed twice). Concurrent callers split the
  // positions: each claims the next unclaimed one until none is left, so a call
  // returns once every position is claimed (some perhaps still being computed by
  // other callers; with one caller, all are computed). Returns the number of
  // positions this call claimed, or -1 when `stop` became true first.
  int32_t PrecomputeMasks(const std::atomic<bool>* stop = nullptr) const;
  // Whether every position's entry is computed.
  bool MasksComplete() const;
  // Bytes held by the entries computed so far.
  size_t CacheBytes() const;

  MaskCache& cache() const { return *cache_; }

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenizerInfo> tokenizer_;
  std::unique_ptr<MaskCache> cache_;
  mutable std::atomic<int32_t> next_precompute_{0};  // PrecomputeMasks' next unclaimed position
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Advances by a sampled token. Returns false, and changes nothing, when the grammar
  // does not allow it here. A stop token is allowed where the grammar can end, and
  // then terminates the matcher.
  bool AcceptToken(int32_t token_id);
  // Advances by raw bytes (one rollback step); false and unchanged when not allowed.
  bool AcceptBytes(std::string_view bytes);
  // Undoes the last `num_tokens` accepted tokens (AcceptToken/AcceptBytes calls);
  // throws when fewer were accepted.
  void Rollback(int32_t num_tokens);
  void Reset();

  // bitmask: at least tokenizer().bitmask_words() words; set bits = allowed ids.
  void FillNextTokenBitmask(std::span<uint32_t> bitmask);

  // Whether the text so far is a complete string of the grammar (a stop token allowed).
  bool CanTerminate() const;
  // Whether a stop token has been accepted.
  bool IsTerminated() const { return terminated_; }
  int32_t num_accepted_tokens() const { return static_cast<int32_t>(history_.size()); }

  const CompiledGrammar& compiled() const { return *grammar_; }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<EarleyParser> parser_;
  // Per accepted token: the parser's number of sets before it (-1: a stop token).
  std::vector<int32_t> history_;
  bool terminated_ = false;
  std::vector<int32_t> scan_positions_;  // scratch
  std::vector<int32_t> candidates_;      // scratch
  std::vector<uint32_t> scratch_;        // scratch, one bitmask
};

}  // namespace vllm::structured_output
