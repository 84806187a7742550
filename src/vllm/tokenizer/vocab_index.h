// The BPE vocabulary, spelling <-> id, in flat tables: all spellings in one buffer in id
// order, and an open-addressing hash index over them. Building and looking up 150k-250k
// entries this way costs a fraction of a node-based hash map (one allocation, few
// cache misses), which matters at load time (every merge resolves three spellings).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vllm {

class VocabIndex {
 public:
  VocabIndex() = default;
  // `entries`: (byte-level spelling, id). Throws vt::Error naming `source` for an id that
  // is negative or implausibly large, an id given twice, or a spelling given twice.
  VocabIndex(const std::vector<std::pair<std::string, int32_t>>& entries, const std::string& source);

  std::optional<int32_t> Find(std::string_view spelling) const;
  // Highest id + 1.
  int32_t size() const { return static_cast<int32_t>(present_.size()); }
  bool Has(int32_t id) const { return id >= 0 && id < size() && present_[id]; }
  std::string_view Spelling(int32_t id) const {
    return std::string_view(data_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

 private:
  size_t FirstSlot(std::string_view spelling) const;

  std::string data_;               // all spellings, in id order
  std::vector<uint32_t> offsets_;  // [size + 1]
  std::vector<uint8_t> present_;   // [size]
  std::vector<int32_t> slots_;     // hash index: ids, -1 = empty
  int shift_ = 64;
};

}  // namespace vllm
