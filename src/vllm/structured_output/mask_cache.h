// The token mask cache (docs/structured_output.md §4): for each grammar position that
// scans a byte, the vocabulary split into tokens accepted whatever the request's
// stack, tokens rejected whatever it, and uncertain tokens, which leave the position's
// rule before their last byte and so depend on the stack.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "earley.h"
#include "vllm/structured_output/tokenizer_info.h"

namespace vllm::structured_output {

struct PositionMask {
  // Stored in whichever form is smallest: the accepted ids, the rejected ids (then
  // accepted = normal tokens minus rejected minus uncertain), or an accepted bitset.
  enum class Form : uint8_t { kAcceptedList, kRejectedList, kBitset };
  Form form = Form::kAcceptedList;
  std::vector<int32_t> ids;
  std::vector<uint32_t> bits;
  std::vector<int32_t> uncertain;  // indices into TokenizerInfo::sorted_ids(), ascending

  // mask |= accepted. `scratch` has the mask's size.
  void OrAccepted(std::span<uint32_t> mask, std::span<uint32_t> scratch, const TokenizerInfo& tokenizer) const;
  size_t bytes() const { return (ids.capacity() + bits.capacity() + uncertain.capacity()) * 4; }
};

// Feeds tokens, in sorted byte order, to a parser: the prefix a token shares with the
// previous one is not parsed again, and a token that extends a prefix that already
// failed fails without parsing. The parser is back where it started after Finish().
class TokenWalker {
 public:
  explicit TokenWalker(EarleyParser& parser);
  // Whether all of `token` is accepted; `shared` is the length of the prefix it shares
  // with the previous token walked (0 for the first).
  bool Walk(std::string_view token, int32_t shared);
  // After a failed Walk: whether the parser's end rule completed after some byte of
  // the token before the one that failed.
  bool EndSeenBeforeFailure() const { return end_seen_[fail_depth_] != 0; }
  void Finish() { parser_.PopTo(base_); }

 private:
  EarleyParser& parser_;
  int32_t base_;
  int32_t fail_depth_ = -1;  // byte index where the previous token failed; -1: it did not
  std::vector<uint8_t> end_seen_;  // per depth: the end rule completed at some depth 1..d
};

PositionMask ComputePositionMask(EarleyParser& sub_parser, int32_t position, const TokenizerInfo& tokenizer);

struct MaskCache {
  explicit MaskCache(int32_t num_positions)
      : entries(num_positions),
        once(std::make_unique<std::once_flag[]>(num_positions)),
        done(std::make_unique<std::atomic<bool>[]>(num_positions)) {}

  const PositionMask& Get(int32_t position, const Grammar& grammar, const TokenizerInfo& tokenizer) {
    std::call_once(once[position], [&] {
      EarleyParser sub(grammar);
      entries[position] = ComputePositionMask(sub, position, tokenizer);
      done[position].store(true, std::memory_order_release);
    });
    return entries[position];
  }

  std::vector<PositionMask> entries;
  std::unique_ptr<std::once_flag[]> once;
  std::unique_ptr<std::atomic<bool>[]> done;  // entries[i] is computed
};

}  // namespace vllm::structured_output
