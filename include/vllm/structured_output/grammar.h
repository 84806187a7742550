// Grammars over bytes for constrained decoding (docs/structured_output.md).
//
// Front ends (JSON schema, regex, choice lists, GBNF) describe a language with `Expr`
// trees and a `GrammarBuilder`; `Build` normalises them into a `Grammar`: rules whose
// alternatives are flat sequences of elements, each element a byte set or a rule
// reference, taken once, optionally, or any number of times. That flat form is what
// the Earley matcher runs on and what the token mask cache is keyed by.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vllm::structured_output {

// A grammar, schema, regex or request that cannot be compiled: unsupported feature,
// syntax error or a language with no string in it. The message names the construct
// and where it is (a JSON pointer, a regex offset, a GBNF line).
class StructuredOutputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool Empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

// Inclusive code point ranges, e.g. {{'a','z'},{'0','9'}}.
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// An expression of the front ends' language. Build it with the factories.
struct Expr {
  enum class Kind { kBytes, kSeq, kAlt, kRule, kRepeat };
  Kind kind = Kind::kSeq;
  ByteSet bytes;               // kBytes
  std::vector<Expr> children;  // kSeq, kAlt; kRepeat: the one repeated expression
  int32_t rule = -1;           // kRule
  int32_t min = 0, max = -1;   // kRepeat; max -1 = unbounded

  static Expr Bytes(const ByteSet& set);
  static Expr Byte(uint8_t b);
  static Expr Literal(std::string_view bytes);
  static Expr Seq(std::vector<Expr> items);
  static Expr Alt(std::vector<Expr> options);
  static Expr Rule(int32_t rule_id);
  static Expr Repeat(Expr item, int32_t min, int32_t max);
  static Expr Optional(Expr item) { return Repeat(std::move(item), 0, 1); }
  static Expr Star(Expr item) { return Repeat(std::move(item), 0, -1); }
  static Expr Empty() { return Seq({}); }
  // The UTF-8 encodings of the code points in `ranges` (surrogates left out).
  static Expr Utf8(const CodepointRanges& ranges);
};

// The complement of `ranges` within the Unicode scalar values.
CodepointRanges ComplementCodepoints(CodepointRanges ranges);

// The normalised grammar. Every alternative is a run of elements in `elements` closed
// by a kEnd element whose `index` is the rule; a position in the grammar is an index
// into `elements`.
struct Element {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  enum class Quant : uint8_t { kOne, kOptional, kStar };
  Kind kind = Kind::kEnd;
  Quant quant = Quant::kOne;
  int32_t index = 0;  // kBytes: byte_sets index; kRule: rule id; kEnd: the owning rule
};

struct Grammar {
  struct Rule {
    std::string name;
    std::vector<int32_t> alt_starts;  // positions of each alternative's first element
    bool nullable = false;            // derives the empty string
    int32_t num_refs = 0;             // kRule elements that reference it
    int32_t ref_position = -1;        // the referencing position when num_refs == 1
  };
  std::vector<ByteSet> byte_sets;
  std::vector<Element> elements;
  std::vector<Rule> rules;
  int32_t root = 0;

  int32_t num_positions() const { return static_cast<int32_t>(elements.size()); }
  // GBNF-like text of the normalised rules, for messages and tests.
  std::string ToString() const;
};

class GrammarBuilder {
 public:
  // A new rule id; names are made unique by suffixing a number.
  int32_t DeclareRule(std::string_view name);
  void DefineRule(int32_t rule_id, Expr body);
  int32_t AddRule(std::string_view name, Expr body) {
    const int32_t id = DeclareRule(name);
    DefineRule(id, std::move(body));
    return id;
  }
  std::optional<int32_t> FindRule(std::string_view name) const;
  bool IsDefined(int32_t rule_id) const { return bodies_.at(rule_id).has_value(); }
  const std::string& RuleName(int32_t rule_id) const { return names_.at(rule_id); }

  // Normalises the rules reachable from `root`. Throws StructuredOutputError for a
  // declared rule without a body, a repetition too large to expand, or a root that
  // matches no string at all (`what` names the grammar in that message).
  Grammar Build(int32_t root, std::string_view what) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<Expr>> bodies_;
};

}  // namespace vllm::structured_output
