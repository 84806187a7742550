#include "earley.h"

#include <algorithm>

namespace vllm::structured_output {

EarleyParser::EarleyParser(const Grammar& grammar)
    : g_(grammar),
      owner_(grammar.elements.size()),
      head_(grammar.elements.size(), -1),
      stamp_(grammar.elements.size(), 0) {
  // Each alternative ends with a kEnd naming its rule: fill owners backwards.
  int32_t rule = 0;
  for (int32_t p = g_.num_positions() - 1; p >= 0; --p) {
    if (g_.elements[p].kind == Element::Kind::kEnd) rule = g_.elements[p].index;
    owner_[p] = rule;
  }
  ResetToRoot();
}

void EarleyParser::BeginSet() {
  set_begin_.push_back(static_cast<int32_t>(items_.size()));
  can_end_.push_back(0);
  ++build_;
}

void EarleyParser::ResetToRoot() {
  items_.clear();
  next_same_.clear();
  set_begin_.clear();
  can_end_.clear();
  end_rule_ = g_.root;
  BeginSet();
  for (int32_t start : g_.rules[g_.root].alt_starts) Add(start, 0);
  Close(0);
}

void EarleyParser::ResetToPosition(int32_t position) {
  items_.clear();
  next_same_.clear();
  set_begin_.clear();
  can_end_.clear();
  BeginSet();
  Add(position, 0);
  std::vector<int32_t> chain = {owner_[position]};
  int32_t rule = owner_[position];
  while (rule != g_.root && g_.rules[rule].num_refs == 1) {
    const int32_t parent_pos = g_.rules[rule].ref_position;
    const int32_t parent = owner_[parent_pos];
    if (std::find(chain.begin(), chain.end(), parent) != chain.end()) break;
    Add(parent_pos, 0);
    chain.push_back(parent);
    rule = parent;
  }
  end_rule_ = rule;
  // Set 0 is not closed: only the item at `position` scans the first byte.
}

void EarleyParser::Add(int32_t pos, int32_t origin) {
  if (stamp_[pos] == build_) {
    for (int32_t i = head_[pos]; i >= 0; i = next_same_[i]) {
      if (items_[i].origin == origin) return;
    }
  } else {
    stamp_[pos] = build_;
    head_[pos] = -1;
  }
  next_same_.push_back(head_[pos]);
  head_[pos] = static_cast<int32_t>(items_.size());
  items_.push_back({pos, origin});
}

void EarleyParser::AddAdvanced(const Item& item) {
  if (g_.elements[item.pos].quant == Element::Quant::kStar) {
    Add(item.pos, item.origin);
  } else {
    Add(item.pos + 1, item.origin);
  }
}

void EarleyParser::Close(int32_t set) {
  for (int32_t i = set_begin_[set]; i < static_cast<int32_t>(items_.size()); ++i) {
    const Item item = items_[i];
    const Element& el = g_.elements[item.pos];
    if (el.kind == Element::Kind::kEnd) {
      if (item.origin == 0 && el.index == end_rule_) can_end_[set] = 1;
      // Items of the origin set waiting at this rule advance. When the origin is this
      // set, it is still growing; items added later are covered by the nullable rule.
      const int32_t end = item.origin == set ? static_cast<int32_t>(items_.size()) : SetEnd(item.origin);
      for (int32_t j = set_begin_[item.origin]; j < end; ++j) {
        const Item waiting = items_[j];
        const Element& w = g_.elements[waiting.pos];
        if (w.kind == Element::Kind::kRule && w.index == el.index) AddAdvanced(waiting);
      }
      continue;
    }
    if (el.quant != Element::Quant::kOne) Add(item.pos + 1, item.origin);
    if (el.kind == Element::Kind::kRule) {
      const Grammar::Rule& rule = g_.rules[el.index];
      for (int32_t start : rule.alt_starts) Add(start, set);
      if (rule.nullable) AddAdvanced(item);
    }
  }
}

bool EarleyParser::Advance(uint8_t byte) {
  const int32_t last = num_sets() - 1;
  const int32_t begin = set_begin_[last], end = static_cast<int32_t>(items_.size());
  BeginSet();
  for (int32_t i = begin; i < end; ++i) {
    const Item item = items_[i];
    const Element& el = g_.elements[item.pos];
    if (el.kind == Element::Kind::kBytes && g_.byte_sets[el.index].Has(byte)) AddAdvanced(item);
  }
  if (static_cast<int32_t>(items_.size()) == end) {
    set_begin_.pop_back();
    can_end_.pop_back();
    return false;
  }
  Close(last + 1);
  return true;
}

void EarleyParser::PopTo(int32_t num_sets) {
  num_sets = std::max(num_sets, 1);
  if (num_sets >= this->num_sets()) return;
  items_.resize(set_begin_[num_sets]);
  next_same_.resize(items_.size());
  set_begin_.resize(num_sets);
  can_end_.resize(num_sets);
  ++build_;  // the dedup chains of the old last set are stale
}

void EarleyParser::ScanPositions(std::vector<int32_t>& out) const {
  out.clear();
  const int32_t last = num_sets() - 1;
  for (int32_t i = set_begin_[last]; i < SetEnd(last); ++i) {
    const int32_t pos = items_[i].pos;
    if (g_.elements[pos].kind == Element::Kind::kBytes) out.push_back(pos);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace vllm::structured_output
