// Byte-level BPE over one pre-tokenized piece.
//
// A piece starts as one symbol per byte (the vocabulary entry of that byte's
// byte-level character). The adjacent pair with the lowest merge rank is merged, the
// leftmost one on ties, until no adjacent pair has a merge: the semantics of HF
// `tokenizers`' BPE model (and of GPT-2's original loop). A min-heap of candidate
// pairs over a linked list of symbols makes a piece of n bytes cost O(n log n); stale
// heap entries (whose symbols have since been merged) are recognised and skipped.
// Text repeats a small set of words, so the ids of short pieces are kept in a cache.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vocab_index.h"

namespace vllm {

class BpeModel {
 public:
  // `merges`: pairs of byte-level spellings, in rank order; a pair listed twice keeps
  // its later rank (as HF does). With `ignore_merges`, a piece that is itself a
  // vocabulary entry is taken whole: it is looked up in `vocab`, which must then
  // outlive the model (Tokenizer::Impl owns both); without it, `vocab` is only read
  // here. Throws, naming `source`, if a byte has no vocabulary entry or a merge names
  // a spelling that is not in `vocab`.
  BpeModel(const VocabIndex& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           bool ignore_merges, const std::string& source);

  // Appends the ids of `piece` (raw bytes, not byte-level spelled) to `ids`.
  void Encode(std::string_view piece, std::vector<int32_t>& ids) const;

 private:
  // Ids of recently encoded short pieces, shared by all threads (readers share the
  // lock). Bounded: emptied when full, which costs a refill and nothing else.
  class PieceCache {
   public:
    static constexpr size_t kMaxPieceBytes = 256;
    static constexpr size_t kMaxEntries = 1 << 16;
    bool AppendIfCached(std::string_view piece, std::vector<int32_t>& ids) const;
    void Insert(std::string_view piece, std::span<const int32_t> piece_ids) const;

   private:
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
    };
    mutable std::shared_mutex mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> entries_;
  };

  struct MergeResult {
    int32_t rank;
    int32_t id;
  };
  // Open-addressing hash table (linear probing) from a pair of ids to its merge: one
  // cache line per look-up, the hot operation of encoding.
  class MergeTable {
   public:
    void Reserve(size_t count);
    void InsertOrAssign(int32_t left, int32_t right, MergeResult result);
    const MergeResult* Find(int32_t left, int32_t right) const;

   private:
    struct Slot {
      uint64_t key;  // kEmpty or the pair
      MergeResult result;
    };
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    size_t SlotOf(uint64_t key) const;
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
  };
  // Merges ids[begin..] (one symbol per byte) in place.
  void MergeSymbols(std::vector<int32_t>& ids, size_t begin) const;

  int32_t byte_ids_[256] = {};
  MergeTable merges_;
  const VocabIndex* whole_pieces_ = nullptr;  // only with ignore_merges; not owned
  PieceCache cache_;
};

}  // namespace vllm
