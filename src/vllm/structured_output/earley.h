// An Earley recogniser over bytes for a normalised Grammar (grammar.h).
//
// State is a stack of item sets, one per byte consumed (set 0 before any byte). An
// item is (position, origin): a position in the grammar's elements and the set where
// its rule instance started. Popping sets is the rollback. Star and optional elements
// are handled in place (a star item scans or completes without moving), so a repeated
// byte class or a repeated rule keeps the sets small: no recursion chains grow with
// the length of a string.
//
//   set k:   (p, o)  --scan byte b in byte_sets[p]-->  set k+1: (p+1, o), or (p, o) for p*
//   complete (End of R, o) in set k: every item of set o waiting at R advances into set k
//
// Nullable rules are advanced at prediction time (Aycock and Horspool), so a rule that
// completes in the set it started in is never missed.
#pragma once

#include <cstdint>
#include <vector>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

class EarleyParser {
 public:
  explicit EarleyParser(const Grammar& grammar);

  // The root rule's language, nothing consumed.
  void ResetToRoot();
  // The sub-parse the token mask cache classifies tokens with: it starts by scanning
  // the terminal at `position` (a kBytes element) inside its rule. Where that rule
  // (and then its parent, ...) is referenced from exactly one place, the parent item
  // is known statically and is kept in set 0, so the sub-parse follows the parent
  // rule too; the end is reached when the outermost such rule completes, after which
  // what follows depends on the request's real stack.
  void ResetToPosition(int32_t position);

  // Consumes one byte: pushes a set and returns true, or returns false and changes
  // nothing when no item accepts it.
  bool Advance(uint8_t byte);
  // Drops sets so that `num_sets` remain (at least one).
  void PopTo(int32_t num_sets);
  int32_t num_sets() const { return static_cast<int32_t>(set_begin_.size()); }

  // Whether the end rule (the root, or the outermost rule of a sub-parse) completes,
  // having started at set 0, in set `set` / in the last set.
  bool CanEndAt(int32_t set) const { return can_end_[set] != 0; }
  bool CanEnd() const { return can_end_.back() != 0; }
  // Whether the end rule's completion is the end of every input: it is the root and
  // no rule references the root. A sub-parse that ends there has no context after it.
  bool EndIsInputEnd() const { return end_rule_ == g_.root && g_.rules[g_.root].num_refs == 0; }

  // The distinct positions of the last set's items that scan a byte.
  void ScanPositions(std::vector<int32_t>& out) const;

  const Grammar& grammar() const { return g_; }

 private:
  struct Item {
    int32_t pos;
    int32_t origin;
  };

  void BeginSet();
  void Add(int32_t pos, int32_t origin);
  void AddAdvanced(const Item& item);
  void Close(int32_t set);
  int32_t SetEnd(int32_t set) const {
    return set + 1 < num_sets() ? set_begin_[set + 1] : static_cast<int32_t>(items_.size());
  }

  const Grammar& g_;
  std::vector<int32_t> owner_;  // position -> rule it belongs to
  int32_t end_rule_ = 0;
  std::vector<Item> items_;
  std::vector<int32_t> set_begin_;
  std::vector<uint8_t> can_end_;
  // Deduplication of the set being built: items with the same position are chained.
  std::vector<int32_t> next_same_;  // parallel to items_
  std::vector<int32_t> head_;       // position -> newest item with it in the set being built
  std::vector<uint32_t> stamp_;     // position -> build_ when head_ was written
  uint32_t build_ = 0;
};

}  // namespace vllm::structured_output
