// Byte-level BPE over one pre-tokenized piece.
//
// A piece starts as one symbol per byte (the vocabulary entry of that byte's
// byte-level character). The adjacent pair with the lowest merge rank is merged, the
// leftmost one on ties, until no adjacent pair has a merge: the semantics of HF
// `tokenizers`' BPE model (and of GPT-2's original loop). A min-heap of candidate
// pairs over a linked list of symbols makes a piece of n bytes cost O(n log n); stale
// heap entries (whose symbols have since been merged) are recognised and skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vllm {

class BpeModel {
 public:
  BpeModel() = default;
  // `vocab`: byte-level spelling -> id. `merges`: pairs of spellings, in rank order; a
  // pair listed twice keeps its later rank (as HF does). With `ignore_merges`, a piece
  // that is itself a vocabulary entry is taken whole. Throws, naming `source`, if a
  // byte has no vocabulary entry or a merge names a spelling that is not in `vocab`.
  BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
           const std::string& source);

  // Appends the ids of `piece` (raw bytes, not byte-level spelled) to `ids`.
  void Encode(std::string_view piece, std::vector<int32_t>& ids) const;

 private:
  struct MergeResult {
    int32_t rank;
    int32_t id;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const MergeResult* FindMerge(int32_t left, int32_t right) const;
  void MergeSymbols(std::vector<int32_t>& symbols) const;

  int32_t byte_ids_[256] = {};
  std::unordered_map<uint64_t, MergeResult> merges_;
  std::unordered_map<std::string, int32_t> whole_pieces_;  // only with ignore_merges
};

}  // namespace vllm
