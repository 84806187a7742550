// GrammarBuilder::Build: Expr trees -> flat rules (grammar.h), then the rules that can
// derive no string are pruned and nullability and reference counts computed.
#include <map>

#include "vllm/structured_output/grammar.h"

namespace vllm::structured_output {

int32_t GrammarBuilder::DeclareRule(std::string_view name) {
  std::string unique(name.empty() ? "rule" : name);
  for (int n = 1; FindRule(unique).has_value(); ++n) unique = std::string(name) + "_" + std::to_string(n);
  names_.push_back(std::move(unique));
  bodies_.emplace_back();
  return static_cast<int32_t>(names_.size()) - 1;
}

void GrammarBuilder::DefineRule(int32_t rule_id, Expr body) { bodies_.at(rule_id) = std::move(body); }

std::optional<int32_t> GrammarBuilder::FindRule(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

namespace {

// Expanding a bounded repetition copies its body; past this many elements the
// grammar is refused rather than grown without bound.
constexpr int64_t kMaxElements = 1 << 20;

using Alt = std::vector<Element>;

struct RawRule {
  std::string name;
  std::vector<Alt> alts;
};

class Normalizer {
 public:
  Normalizer(const std::vector<std::string>& names, const std::vector<std::optional<Expr>>& bodies)
      : names_(names), bodies_(bodies), new_id_(names.size(), -1) {}

  int32_t RuleId(int32_t builder_id) {
    if (new_id_.at(builder_id) >= 0) return new_id_[builder_id];
    const int32_t id = NewRule(names_[builder_id]);
    new_id_[builder_id] = id;
    if (!bodies_[builder_id].has_value()) {
      throw StructuredOutputError("grammar: rule '" + names_[builder_id] + "' is used but never defined");
    }
    const Expr& body = *bodies_[builder_id];
    std::vector<Alt> alts;
    if (body.kind == Expr::Kind::kAlt) {
      for (const Expr& option : body.children) alts.push_back(Sequence(option, id));
    } else {
      alts.push_back(Sequence(body, id));
    }
    rules_[id].alts = std::move(alts);
    return id;
  }

  std::vector<RawRule> TakeRules() { return std::move(rules_); }
  std::vector<ByteSet> TakeByteSets() { return std::move(byte_sets_); }

 private:
  int32_t NewRule(const std::string& name) {
    rules_.push_back({name, {}});
    return static_cast<int32_t>(rules_.size()) - 1;
  }

  int32_t HelperRule(int32_t parent, std::vector<Alt> alts) {
    const int32_t id = NewRule(rules_[parent].name + "_" + std::to_string(++num_helpers_));
    rules_[id].alts = std::move(alts);
    return id;
  }

  Alt Sequence(const Expr& e, int32_t owner) {
    Alt seq;
    Append(e, owner, seq);
    return seq;
  }

  void Push(Alt& seq, Element el) {
    if (++num_elements_ > kMaxElements) {
      throw StructuredOutputError("grammar: too large after expanding repetitions (more than " +
                                  std::to_string(kMaxElements) + " elements); use smaller bounds");
    }
    seq.push_back(el);
  }

  int32_t ByteSetId(const ByteSet& set) {
    auto [it, inserted] = byte_set_ids_.try_emplace(set.bits, static_cast<int32_t>(byte_sets_.size()));
    if (inserted) byte_sets_.push_back(set);
    return it->second;
  }

  void Append(const Expr& e, int32_t owner, Alt& seq) {
    switch (e.kind) {
      case Expr::Kind::kBytes:
        Push(seq, {Element::Kind::kBytes, Element::Quant::kOne, ByteSetId(e.bytes)});
        return;
      case Expr::Kind::kSeq:
        for (const Expr& c : e.children) Append(c, owner, seq);
        return;
      case Expr::Kind::kRule:
        Push(seq, {Element::Kind::kRule, Element::Quant::kOne, RuleId(e.rule)});
        return;
      case Expr::Kind::kAlt:
        if (e.children.size() == 1) return Append(e.children[0], owner, seq);
        Push(seq, Atom(e, owner, Element::Quant::kOne));
        return;
      case Expr::Kind::kRepeat:
        AppendRepeat(e, owner, seq);
        return;
    }
  }

  // `e` as one element: a byte set, a rule, or a new helper rule holding it.
  Element Atom(const Expr& e, int32_t owner, Element::Quant quant) {
    if (e.kind == Expr::Kind::kBytes) return {Element::Kind::kBytes, quant, ByteSetId(e.bytes)};
    if (e.kind == Expr::Kind::kRule) return {Element::Kind::kRule, quant, RuleId(e.rule)};
    if (e.kind == Expr::Kind::kSeq && e.children.size() == 1) return Atom(e.children[0], owner, quant);
    std::vector<Alt> alts;
    if (e.kind == Expr::Kind::kAlt) {
      for (const Expr& option : e.children) alts.push_back(Sequence(option, owner));
    } else {
      alts.push_back(Sequence(e, owner));
    }
    return {Element::Kind::kRule, quant, HelperRule(owner, std::move(alts))};
  }

  // x{min,max}: min copies, then x* or a chain of nested optionals
  // (x (x (x)?)?)? that stays unambiguous.
  void AppendRepeat(const Expr& e, int32_t owner, Alt& seq) {
    const Expr& x = e.children.at(0);
    if (e.min < 0 || (e.max >= 0 && e.max < e.min)) {
      Push(seq, {Element::Kind::kBytes, Element::Quant::kOne, ByteSetId(ByteSet{})});  // matches nothing
      return;
    }
    for (int32_t i = 0; i < e.min; ++i) Append(x, owner, seq);
    if (e.max < 0) {
      Push(seq, Atom(x, owner, Element::Quant::kStar));
      return;
    }
    const int32_t extra = e.max - e.min;
    if (extra == 0) return;
    if (extra == 1) {
      Push(seq, Atom(x, owner, Element::Quant::kOptional));
      return;
    }
    int32_t inner = -1;
    for (int32_t j = 1; j <= extra; ++j) {
      Alt body = Sequence(x, owner);
      if (inner >= 0) Push(body, {Element::Kind::kRule, Element::Quant::kOptional, inner});
      inner = HelperRule(owner, {std::move(body)});
    }
    Push(seq, {Element::Kind::kRule, Element::Quant::kOptional, inner});
  }

  const std::vector<std::string>& names_;
  const std::vector<std::optional<Expr>>& bodies_;
  std::vector<int32_t> new_id_;
  std::vector<RawRule> rules_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, int32_t> byte_set_ids_;
  int64_t num_elements_ = 0;
  int num_helpers_ = 0;
};

bool ElementProductive(const Element& el, const std::vector<bool>& productive, const std::vector<ByteSet>& sets) {
  if (el.kind == Element::Kind::kBytes) return !sets[el.index].Empty();
  return productive[el.index];
}

// Drops what can never match: alternatives needing an unproductive rule or an empty
// byte set, and optional elements of that kind.
std::vector<bool> Prune(std::vector<RawRule>& rules, const std::vector<ByteSet>& sets) {
  std::vector<bool> productive(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (productive[r]) continue;
      for (const Alt& alt : rules[r].alts) {
        bool ok = true;
        for (const Element& el : alt) {
          if (el.quant == Element::Quant::kOne && !ElementProductive(el, productive, sets)) ok = false;
        }
        if (ok) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  for (RawRule& rule : rules) {
    std::vector<Alt> kept;
    for (Alt& alt : rule.alts) {
      Alt out;
      bool ok = true;
      for (const Element& el : alt) {
        if (ElementProductive(el, productive, sets)) {
          out.push_back(el);
        } else if (el.quant == Element::Quant::kOne) {
          ok = false;
        }
      }
      if (ok) kept.push_back(std::move(out));
    }
    rule.alts = std::move(kept);
  }
  return productive;
}

void ComputeNullable(Grammar& g) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (g.rules[r].nullable) continue;
      for (int32_t pos : g.rules[r].alt_starts) {
        bool nullable = true;
        for (; g.elements[pos].kind != Element::Kind::kEnd; ++pos) {
          const Element& el = g.elements[pos];
          if (el.quant != Element::Quant::kOne) continue;
          if (el.kind == Element::Kind::kBytes || !g.rules[el.index].nullable) nullable = false;
        }
        if (nullable) {
          g.rules[r].nullable = changed = true;
          break;
        }
      }
    }
  }
}

}  // namespace

Grammar GrammarBuilder::Build(int32_t root, std::string_view what) const {
  Normalizer normalizer(names_, bodies_);
  const int32_t new_root = normalizer.RuleId(root);
  std::vector<RawRule> raw = normalizer.TakeRules();
  Grammar g;
  g.byte_sets = normalizer.TakeByteSets();
  if (!Prune(raw, g.byte_sets)[new_root]) {
    throw StructuredOutputError(std::string(what) + ": no string satisfies it (the grammar is unsatisfiable)");
  }
  g.root = new_root;
  for (size_t r = 0; r < raw.size(); ++r) {
    Grammar::Rule rule;
    rule.name = std::move(raw[r].name);
    for (const Alt& alt : raw[r].alts) {
      rule.alt_starts.push_back(g.num_positions());
      g.elements.insert(g.elements.end(), alt.begin(), alt.end());
      g.elements.push_back({Element::Kind::kEnd, Element::Quant::kOne, static_cast<int32_t>(r)});
    }
    g.rules.push_back(std::move(rule));
  }
  for (int32_t p = 0; p < g.num_positions(); ++p) {
    const Element& el = g.elements[p];
    if (el.kind != Element::Kind::kRule) continue;
    Grammar::Rule& target = g.rules[el.index];
    ++target.num_refs;
    target.ref_position = p;
  }
  ComputeNullable(g);
  return g;
}

namespace {

std::string ByteSetText(const ByteSet& set) {
  auto put = [](std::string& s, int b) {
    if (b >= 0x21 && b < 0x7F && b != '\\' && b != ']' && b != '-' && b != '^') {
      s += static_cast<char>(b);
    } else {
      static const char* kHex = "0123456789ABCDEF";
      s += "\\x";
      s += kHex[b >> 4];
      s += kHex[b & 15];
    }
  };
  std::string s = "[";
  for (int b = 0; b < 256;) {
    if (!set.Has(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set.Has(static_cast<uint8_t>(e + 1))) ++e;
    put(s, b);
    if (e > b) {
      s += '-';
      put(s, e);
    }
    b = e + 1;
  }
  return s + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (const Rule& rule : rules) {
    if (rule.alt_starts.empty()) continue;
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alt_starts.size(); ++a) {
      if (a > 0) out += " |";
      int32_t pos = rule.alt_starts[a];
      if (elements[pos].kind == Element::Kind::kEnd) out += " \"\"";
      for (; elements[pos].kind != Element::Kind::kEnd; ++pos) {
        const Element& el = elements[pos];
        out += ' ';
        out += el.kind == Element::Kind::kBytes ? ByteSetText(byte_sets[el.index]) : rules[el.index].name;
        if (el.quant == Element::Quant::kOptional) out += '?';
        if (el.quant == Element::Quant::kStar) out += '*';
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace vllm::structured_output
