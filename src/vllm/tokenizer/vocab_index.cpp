#include "vocab_index.h"

#include <functional>

#include "vt/error.h"

namespace vllm {
namespace {

// Ids index tables of this size; larger ids in a file are taken as corrupt.
constexpr int64_t kMaxTokenId = int64_t{1} << 26;

}  // namespace

VocabIndex::VocabIndex(const std::vector<std::pair<std::string, int32_t>>& entries, const std::string& source) {
  // Pass 1: ids in range and unique; the length of each id's spelling.
  std::vector<uint32_t> lengths;
  std::vector<int64_t> entry_of;  // id -> index into entries, -1 if none
  for (size_t e = 0; e < entries.size(); ++e) {
    const auto& [spelling, id] = entries[e];
    if (id < 0 || id >= kMaxTokenId) {
      throw vt::Error(source + ": vocabulary token '" + spelling + "' has id " + std::to_string(id) + ", outside 0.." +
                      std::to_string(kMaxTokenId - 1));
    }
    if (id >= static_cast<int32_t>(entry_of.size())) entry_of.resize(id + 1, -1);
    if (entry_of[id] >= 0) {
      throw vt::Error(source + ": vocabulary token '" + spelling + "' has id " + std::to_string(id) +
                      ", which is already the id of '" + entries[entry_of[id]].first + "'");
    }
    entry_of[id] = static_cast<int64_t>(e);
  }
  // Pass 2: spellings in id order.
  const size_t n = entry_of.size();
  present_.assign(n, 0);
  offsets_.assign(n + 1, 0);
  for (size_t id = 0; id < n; ++id) {
    const size_t length = entry_of[id] >= 0 ? entries[entry_of[id]].first.size() : 0;
    offsets_[id + 1] = offsets_[id] + static_cast<uint32_t>(length);
    present_[id] = entry_of[id] >= 0;
  }
  data_.resize(offsets_[n]);
  for (size_t id = 0; id < n; ++id) {
    if (entry_of[id] >= 0) entries[entry_of[id]].first.copy(data_.data() + offsets_[id], entries[entry_of[id]].first.size());
  }
  // Pass 3: the hash index, at most half full.
  int bits = 4;
  while ((size_t{1} << bits) < entries.size() * 2) ++bits;
  slots_.assign(size_t{1} << bits, -1);
  shift_ = 64 - bits;
  const size_t mask = slots_.size() - 1;
  for (size_t id = 0; id < n; ++id) {
    if (!present_[id]) continue;
    const std::string_view spelling = Spelling(static_cast<int32_t>(id));
    size_t slot = FirstSlot(spelling);
    for (; slots_[slot] >= 0; slot = (slot + 1) & mask) {
      if (Spelling(slots_[slot]) == spelling) {
        throw vt::Error(source + ": vocabulary token '" + std::string(spelling) + "' has two ids, " +
                        std::to_string(slots_[slot]) + " and " + std::to_string(id));
      }
    }
    slots_[slot] = static_cast<int32_t>(id);
  }
}

size_t VocabIndex::FirstSlot(std::string_view spelling) const {
  // Fibonacci hashing of the string hash: its top bits pick the slot.
  const uint64_t h = std::hash<std::string_view>()(spelling);
  return static_cast<size_t>((h * 0x9E3779B97F4A7C15ull) >> shift_);
}

std::optional<int32_t> VocabIndex::Find(std::string_view spelling) const {
  if (slots_.empty()) return std::nullopt;
  const size_t mask = slots_.size() - 1;
  for (size_t slot = FirstSlot(spelling); slots_[slot] >= 0; slot = (slot + 1) & mask) {
    if (Spelling(slots_[slot]) == spelling) return slots_[slot];
  }
  return std::nullopt;
}

}  // namespace vllm
