#include "bpe.h"

#include <cstdio>
#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>

#include "byte_level.h"
#include "vt/error.h"

namespace vllm {
namespace {

int32_t LookUp(const VocabIndex& vocab, const std::string& spelling, size_t merge_index,
               const std::pair<std::string, std::string>& merge, const std::string& source) {
  const std::optional<int32_t> id = vocab.Find(spelling);
  if (!id) {
    throw vt::Error(source + ": model.merges[" + std::to_string(merge_index) + "] = '" + merge.first + " " +
                    merge.second + "' needs the token '" + spelling + "', which is not in model.vocab");
  }
  return *id;
}

// The scratch of pieces up to this many bytes stays with the thread (~80 KB at most).
constexpr size_t kKeptScratchSymbols = 4096;

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

void BpeModel::MergeTable::Reserve(size_t count) {
  int bits = 4;
  while ((size_t{1} << bits) < count * 2) ++bits;  // load factor <= 1/2 keeps probe runs short
  slots_.assign(size_t{1} << bits, Slot{kEmpty, {}});
  mask_ = slots_.size() - 1;
  shift_ = 64 - bits;
}

size_t BpeModel::MergeTable::SlotOf(uint64_t key) const {
  // Fibonacci hashing: the top bits of key * 2^64/phi spread the packed id pairs.
  size_t slot = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = (slot + 1) & mask_;
  return slot;
}

void BpeModel::MergeTable::InsertOrAssign(int32_t left, int32_t right, MergeResult result) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  slots_[SlotOf(key)] = Slot{key, result};
}

const BpeModel::MergeResult* BpeModel::MergeTable::Find(int32_t left, int32_t right) const {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  const Slot& slot = slots_[SlotOf(key)];
  return slot.key == key ? &slot.result : nullptr;
}

BpeModel::BpeModel(const VocabIndex& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   bool ignore_merges, const std::string& source) {
  for (int b = 0; b < 256; ++b) {
    const std::string spelling = byte_level::Encode(std::string(1, static_cast<char>(b)));
    const std::optional<int32_t> id = vocab.Find(spelling);
    if (!id) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      throw vt::Error(source + ": model.vocab has no entry for byte " + hex + " (spelled '" + spelling +
                      "'); a byte-level BPE vocabulary needs all 256 bytes");
    }
    byte_ids_[b] = *id;
  }
  merges_.Reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& merge = merges[i];
    const int32_t left = LookUp(vocab, merge.first, i, merge, source);
    const int32_t right = LookUp(vocab, merge.second, i, merge, source);
    joined.assign(merge.first).append(merge.second);
    const int32_t merged = LookUp(vocab, joined, i, merge, source);
    merges_.InsertOrAssign(left, right, MergeResult{static_cast<int32_t>(i), merged});
  }
  if (ignore_merges) whole_pieces_ = &vocab;
}

bool BpeModel::PieceCache::AppendIfCached(std::string_view piece, std::vector<int32_t>& ids) const {
  std::shared_lock lock(mutex_);
  auto it = entries_.find(piece);
  if (it == entries_.end()) return false;
  ids.insert(ids.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeModel::PieceCache::Insert(std::string_view piece, std::span<const int32_t> piece_ids) const {
  std::unique_lock lock(mutex_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_.emplace(std::string(piece), std::vector<int32_t>(piece_ids.begin(), piece_ids.end()));
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>& ids) const {
  if (whole_pieces_) {
    if (const std::optional<int32_t> whole = whole_pieces_->Find(byte_level::Encode(piece))) {
      ids.push_back(*whole);
      return;
    }
  }
  if (piece.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= PieceCache::kMaxPieceBytes;
  if (cacheable && cache_.AppendIfCached(piece, ids)) return;
  const size_t begin = ids.size();
  for (char c : piece) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  MergeSymbols(ids, begin);
  if (cacheable) cache_.Insert(piece, std::span<const int32_t>(ids).subspan(begin));
}

// Merges ids[begin..] in place, then removes the merged-away symbols (marked -1);
// `links` chain the live ones.
void BpeModel::MergeSymbols(std::vector<int32_t>& ids, size_t begin) const {
  struct Links {
    int32_t prev, next;  // -1 at the ends
  };
  // Scratch reused across calls on a thread: encoding allocates nothing per piece. It
  // grows to ~20 bytes a byte of the longest piece, so after a long piece it is given
  // back: a thread must not keep what one huge request needed (the server has hundreds).
  thread_local std::vector<Links> links;
  thread_local std::vector<Candidate> heap;
  struct Release {
    ~Release() {
      if (links.capacity() > kKeptScratchSymbols) std::vector<Links>().swap(links);
      if (heap.capacity() > kKeptScratchSymbols) std::vector<Candidate>().swap(heap);
    }
  } release_after_merging;
  const std::span<int32_t> symbols = std::span<int32_t>(ids).subspan(begin);
  const int32_t n = static_cast<int32_t>(symbols.size());
  links.resize(n);
  for (int32_t i = 0; i < n; ++i) links[i] = {i - 1, i + 1 < n ? i + 1 : -1};
  heap.clear();
  const auto later = std::greater<Candidate>();
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || links[pos].next < 0) return;
    if (const MergeResult* m = merges_.Find(symbols[pos], symbols[links[pos].next])) {
      heap.push_back({m->rank, pos, m->id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    if (symbols[top.pos] < 0 || links[top.pos].next < 0) continue;
    const int32_t right = links[top.pos].next;
    // A stale entry: the pair at this position has changed since it was pushed. Like
    // HF, an entry counts as current when the pair there still merges into its id.
    const MergeResult* current = merges_.Find(symbols[top.pos], symbols[right]);
    if (current == nullptr || current->id != top.id) continue;
    symbols[top.pos] = top.id;
    symbols[right] = -1;
    links[top.pos].next = links[right].next;
    if (links[right].next >= 0) links[links[right].next].prev = top.pos;
    push_pair(links[top.pos].prev);
    push_pair(top.pos);
  }
  ids.erase(std::remove(ids.begin() + static_cast<std::ptrdiff_t>(begin), ids.end(), -1), ids.end());
}

}  // namespace vllm
