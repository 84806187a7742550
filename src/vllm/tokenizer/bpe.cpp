#include "bpe.h"

#include <cstdio>
#include <queue>

#include "byte_level.h"
#include "vt/error.h"

namespace vllm {
namespace {

int32_t LookUp(const std::unordered_map<std::string, int32_t>& vocab, const std::string& spelling, size_t merge_index,
               const std::pair<std::string, std::string>& merge, const std::string& source) {
  auto it = vocab.find(spelling);
  if (it == vocab.end()) {
    throw vt::Error(source + ": model.merges[" + std::to_string(merge_index) + "] = '" + merge.first + " " +
                    merge.second + "' needs the token '" + spelling + "', which is not in model.vocab");
  }
  return it->second;
}

// A candidate merge of the symbol at `pos` with its right neighbour. The heap pops the
// lowest rank first and, among equal ranks, the leftmost position.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t id;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

}  // namespace

BpeModel::BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
                   const std::string& source) {
  for (int b = 0; b < 256; ++b) {
    const std::string spelling = byte_level::Encode(std::string(1, static_cast<char>(b)));
    auto it = vocab.find(spelling);
    if (it == vocab.end()) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      throw vt::Error(source + ": model.vocab has no entry for byte " + hex + " (spelled '" + spelling +
                      "'); a byte-level BPE vocabulary needs all 256 bytes");
    }
    byte_ids_[b] = it->second;
  }
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& merge = merges[i];
    const int32_t left = LookUp(vocab, merge.first, i, merges[i], source);
    const int32_t right = LookUp(vocab, merge.second, i, merges[i], source);
    const int32_t merged = LookUp(vocab, merge.first + merge.second, i, merges[i], source);
    merges_.insert_or_assign(PairKey(left, right), MergeResult{static_cast<int32_t>(i), merged});
  }
  if (ignore_merges) whole_pieces_ = vocab;
}

const BpeModel::MergeResult* BpeModel::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>& ids) const {
  if (!whole_pieces_.empty()) {
    auto it = whole_pieces_.find(byte_level::Encode(piece));
    if (it != whole_pieces_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
  if (symbols.size() > 1) MergeSymbols(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

// Merges in place and compacts `symbols` to the final ids.
void BpeModel::MergeSymbols(std::vector<int32_t>& symbols) const {
  const int32_t n = static_cast<int32_t>(symbols.size());
  // Doubly linked list over positions; a merged-away symbol gets alive = false.
  std::vector<int32_t> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const MergeResult* m = FindMerge(symbols[pos], symbols[next[pos]])) heap.push({m->rank, pos, m->id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int32_t right = next[top.pos];
    // A stale entry: the pair at this position has changed since it was pushed. Like
    // HF, an entry counts as current when the pair there still merges into its id.
    const MergeResult* current = FindMerge(symbols[top.pos], symbols[right]);
    if (current == nullptr || current->id != top.id) continue;
    symbols[top.pos] = top.id;
    alive[right] = 0;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push_pair(prev[top.pos]);
    push_pair(top.pos);
  }
  int32_t kept = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (alive[i]) symbols[kept++] = symbols[i];
  }
  symbols.resize(kept);
}

}  // namespace vllm
