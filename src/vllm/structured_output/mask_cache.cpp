#include "mask_cache.h"

#include <algorithm>

namespace vllm::structured_output {

void PositionMask::OrAccepted(std::span<uint32_t> mask, std::span<uint32_t> scratch,
                              const TokenizerInfo& tokenizer) const {
  switch (form) {
    case Form::kAcceptedList:
      for (int32_t id : ids) BitmaskSet(mask, id);
      return;
    case Form::kBitset:
      for (size_t w = 0; w < bits.size(); ++w) mask[w] |= bits[w];
      return;
    case Form::kRejectedList: {
      const std::span<const uint32_t> normal = tokenizer.normal_mask();
      std::copy(normal.begin(), normal.end(), scratch.begin());
      for (int32_t id : ids) scratch[id >> 5] &= ~(1u << (id & 31));
      for (int32_t index : uncertain) {
        const int32_t id = tokenizer.sorted_ids()[index];
        scratch[id >> 5] &= ~(1u << (id & 31));
      }
      for (size_t w = 0; w < normal.size(); ++w) mask[w] |= scratch[w];
      return;
    }
  }
}

TokenWalker::TokenWalker(EarleyParser& parser) : parser_(parser), base_(parser.num_sets()), end_seen_(1, 0) {}

bool TokenWalker::Walk(std::string_view token, int32_t shared) {
  if (fail_depth_ >= 0 && shared > fail_depth_) return false;  // extends the prefix that failed
  const int32_t depth = std::min(shared, parser_.num_sets() - base_);
  parser_.PopTo(base_ + depth);
  end_seen_.resize(depth + 1);
  fail_depth_ = -1;
  for (int32_t d = depth; d < static_cast<int32_t>(token.size()); ++d) {
    if (!parser_.Advance(static_cast<uint8_t>(token[d]))) {
      fail_depth_ = d;
      return false;
    }
    end_seen_.push_back(end_seen_.back() | static_cast<uint8_t>(parser_.CanEnd()));
  }
  return true;
}

namespace {

// Only positions that accept or reject most of the vocabulary pay for a pass over it.
void StoreSmallestForm(PositionMask& out, std::vector<int32_t> accepted, const TokenizerInfo& tokenizer) {
  const int32_t num_accepted = static_cast<int32_t>(accepted.size());
  const int32_t num_normal = static_cast<int32_t>(tokenizer.sorted_ids().size());
  const int32_t num_rejected = num_normal - num_accepted - static_cast<int32_t>(out.uncertain.size());
  const int32_t words = tokenizer.bitmask_words();
  if (num_accepted <= words && num_accepted <= num_rejected) {
    out.form = PositionMask::Form::kAcceptedList;
    std::sort(accepted.begin(), accepted.end());
    out.ids = std::move(accepted);
    return;
  }
  std::vector<uint32_t> accepted_bits(words, 0);
  for (int32_t id : accepted) BitmaskSet(accepted_bits, id);
  if (num_rejected <= words) {
    out.form = PositionMask::Form::kRejectedList;
    std::vector<uint32_t> other = accepted_bits;  // accepted or uncertain
    for (int32_t index : out.uncertain) BitmaskSet(other, tokenizer.sorted_ids()[index]);
    for (int32_t id : tokenizer.sorted_ids()) {
      if (!BitmaskTest(other, id)) out.ids.push_back(id);
    }
    std::sort(out.ids.begin(), out.ids.end());
  } else {
    out.form = PositionMask::Form::kBitset;
    out.bits = std::move(accepted_bits);
  }
}

}  // namespace

PositionMask ComputePositionMask(EarleyParser& sub_parser, int32_t position, const TokenizerInfo& tokenizer) {
  const Grammar& g = sub_parser.grammar();
  const ByteSet& first = g.byte_sets[g.elements[position].index];
  const std::span<const int32_t> sorted = tokenizer.sorted_ids();
  const std::span<const int32_t> lcp = tokenizer.sorted_lcp();
  std::vector<int32_t> accepted;
  PositionMask out;
  sub_parser.ResetToPosition(position);
  // A token that runs on past the end of a sub-parse is uncertain (its fate depends on
  // the request's stack), unless that end is the end of the input: then it is
  // rejected here, once, instead of walked again at every step (for a regex like
  // [a-z ]+, every token that starts in the class and leaves it).
  const bool end_is_final = sub_parser.EndIsInputEnd();
  // A token whose first byte the position does not scan is rejected without a walk.
  for (int b = 0; b < 256; ++b) {
    if (!first.Has(static_cast<uint8_t>(b))) continue;
    TokenWalker walker(sub_parser);
    const int32_t begin = tokenizer.first_byte_begin(b), end = tokenizer.first_byte_begin(b + 1);
    for (int32_t index = begin; index < end; ++index) {
      const int32_t id = sorted[index];
      if (walker.Walk(tokenizer.token_bytes(id), index == begin ? 0 : lcp[index])) {
        accepted.push_back(id);
      } else if (!end_is_final && walker.EndSeenBeforeFailure()) {
        out.uncertain.push_back(index);
      }
    }
    walker.Finish();
  }
  StoreSmallestForm(out, std::move(accepted), tokenizer);
  out.ids.shrink_to_fit();
  out.uncertain.shrink_to_fit();
  return out;
}

}  // namespace vllm::structured_output
