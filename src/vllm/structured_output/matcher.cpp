#include "vllm/structured_output/matcher.h"

#include <algorithm>

#include "earley.h"
#include "mask_cache.h"

namespace vllm::structured_output {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenizerInfo> tokenizer)
    : grammar_(std::move(grammar)),
      tokenizer_(std::move(tokenizer)),
      cache_(std::make_unique<MaskCache>(grammar_.num_positions())) {}

CompiledGrammar::~CompiledGrammar() = default;

int32_t CompiledGrammar::PrecomputeMasks(const std::atomic<bool>* stop) const {
  int32_t claimed = 0;
  for (;;) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return -1;
    const int32_t p = next_precompute_.fetch_add(1, std::memory_order_relaxed);
    if (p >= grammar_.num_positions()) return claimed;
    ++claimed;
    if (grammar_.elements[p].kind == Element::Kind::kBytes) cache_->Get(p, grammar_, *tokenizer_);
  }
}

bool CompiledGrammar::MasksComplete() const {
  for (int32_t p = 0; p < grammar_.num_positions(); ++p) {
    if (grammar_.elements[p].kind == Element::Kind::kBytes && !cache_->done[p].load(std::memory_order_acquire)) {
      return false;
    }
  }
  return true;
}

size_t CompiledGrammar::CacheBytes() const {
  size_t total = 0;
  for (int32_t p = 0; p < grammar_.num_positions(); ++p) {
    if (cache_->done[p].load(std::memory_order_acquire)) total += cache_->entries[p].bytes();
  }
  return total;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), parser_(std::make_unique<EarleyParser>(grammar_->grammar())) {}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

bool GrammarMatcher::AcceptToken(int32_t token_id) {
  const TokenizerInfo& tokenizer = grammar_->tokenizer();
  if (terminated_) return false;
  if (tokenizer.IsStop(token_id)) {
    if (!parser_->CanEnd()) return false;
    history_.push_back(-1);
    terminated_ = true;
    return true;
  }
  if (!tokenizer.IsNormal(token_id)) return false;
  return AcceptBytes(tokenizer.token_bytes(token_id));
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_) return false;
  const int32_t before = parser_->num_sets();
  for (char c : bytes) {
    if (!parser_->Advance(static_cast<uint8_t>(c))) {
      parser_->PopTo(before);
      return false;
    }
  }
  history_.push_back(before);
  return true;
}

void GrammarMatcher::Rollback(int32_t num_tokens) {
  if (num_tokens < 0 || num_tokens > num_accepted_tokens()) {
    throw std::invalid_argument("GrammarMatcher::Rollback: cannot undo " + std::to_string(num_tokens) +
                                " tokens, " + std::to_string(num_accepted_tokens()) + " were accepted");
  }
  for (int32_t i = 0; i < num_tokens; ++i) {
    const int32_t before = history_.back();
    history_.pop_back();
    if (before < 0) {
      terminated_ = false;
    } else {
      parser_->PopTo(before);
    }
  }
}

void GrammarMatcher::Reset() {
  parser_->ResetToRoot();
  history_.clear();
  terminated_ = false;
}

bool GrammarMatcher::CanTerminate() const { return !terminated_ && parser_->CanEnd(); }

void GrammarMatcher::FillNextTokenBitmask(std::span<uint32_t> bitmask) {
  const TokenizerInfo& tokenizer = grammar_->tokenizer();
  const int32_t words = tokenizer.bitmask_words();
  if (static_cast<int32_t>(bitmask.size()) < words) {
    throw std::invalid_argument("FillNextTokenBitmask: the bitmask has " + std::to_string(bitmask.size()) +
                                " words, the vocabulary of " + std::to_string(tokenizer.vocab_size()) + " needs " +
                                std::to_string(words));
  }
  const std::span<uint32_t> mask = bitmask.first(words);
  std::fill(mask.begin(), mask.end(), 0u);
  if (!terminated_) {
    const Grammar& g = grammar_->grammar();
    MaskCache& cache = grammar_->cache();
    scratch_.resize(words);
    candidates_.clear();
    parser_->ScanPositions(scan_positions_);
    for (int32_t pos : scan_positions_) {
      const PositionMask& entry = cache.Get(pos, g, tokenizer);
      entry.OrAccepted(mask, scratch_, tokenizer);
      candidates_.insert(candidates_.end(), entry.uncertain.begin(), entry.uncertain.end());
    }
    std::sort(candidates_.begin(), candidates_.end());
    candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
    // The uncertain tokens, in sorted order, against this request's own parse state.
    TokenWalker walker(*parser_);
    std::string_view previous;
    for (int32_t index : candidates_) {
      const int32_t id = tokenizer.sorted_ids()[index];
      if (BitmaskTest(mask, id)) continue;
      const std::string_view bytes = tokenizer.token_bytes(id);
      int32_t shared = 0;
      while (shared < static_cast<int32_t>(std::min(bytes.size(), previous.size())) &&
             bytes[shared] == previous[shared]) {
        ++shared;
      }
      if (walker.Walk(bytes, shared)) BitmaskSet(mask, id);
      previous = bytes;
    }
    walker.Finish();
  }
  // After termination only the stop tokens stay set, so a sampler given the mask
  // still finds a token to pick.
  if (terminated_ || parser_->CanEnd()) {
    for (int32_t id : tokenizer.stop_token_ids()) BitmaskSet(mask, id);
  }
}

}  // namespace vllm::structured_output
