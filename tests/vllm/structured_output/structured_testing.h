// Test helpers for the structured output engine: vocabularies, a JSON schema
// validator written from the JSON Schema specification (independent of the grammar
// compiler), random schemas of the supported subset, random walks over token masks
// and a byte-level completion that proves a prefix extends to a valid document.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "vllm/structured_output/matcher.h"
#include "vllm/testing/shared_data.h"
#include "vllm/tokenizer/tokenizer.h"

namespace vllm::structured_output::testing {

using json = nlohmann::ordered_json;

inline const std::filesystem::path kQwen3Dir = std::filesystem::path(VT_SHARED_DATA_DIR) / "tokenizers/qwen3";

// The real Qwen3 vocabulary (151k byte-level BPE tokens; <|im_end|> and
// <|endoftext|> stop), or null when the shared tokenizer is absent.
inline std::shared_ptr<const TokenizerInfo> Qwen3Vocab() {
  static std::shared_ptr<const TokenizerInfo> info = [] () -> std::shared_ptr<const TokenizerInfo> {
    if (!std::filesystem::exists(kQwen3Dir / "tokenizer.json")) return nullptr;
    const Tokenizer tok = Tokenizer::FromHfDirectory(kQwen3Dir);
    std::vector<int32_t> stops;
    for (const char* s : {"<|im_end|>", "<|endoftext|>"}) {
      if (auto id = tok.TokenToId(s)) stops.push_back(*id);
    }
    return TokenizerInfo::FromTokenizer(tok, stops);
  }();
  return info;
}

// A small vocabulary that always exists: every single byte, JSON-ish pieces, UTF-8
// characters whole and split, and random strings; then a stop id (no bytes), a special
// id that must never be allowed, and 7 padding ids of the model's vocabulary.
inline std::shared_ptr<const TokenizerInfo> SyntheticVocab() {
  static std::shared_ptr<const TokenizerInfo> info = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "\",", "\"}", "\"]", "true", "false", "null", "name", "id", "  ", "\n  ",
                          "\\n", "\\\"", "\\u00e9", "é", "中文", "\xe4\xb8", "\xad", "12", "-1", ".5", "e+", "},",
                          "],", "[{", "[]", "{}", ", \"", "\": \"", "abc", "\"a\"", "0", "00", "2024-01-0", "T12:"}) {
      tokens.emplace_back(t);
    }
    std::mt19937 rng(7);
    const std::string alphabet = "{}[]\":,. -_0123456789abcdeftrunlsxyzABC\\\n";
    for (int i = 0; i < 1500; ++i) {
      std::string t;
      const int len = 2 + static_cast<int>(rng() % 5);
      for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
      tokens.push_back(t);
    }
    const int32_t stop = static_cast<int32_t>(tokens.size());
    tokens.emplace_back("");
    const int32_t special = static_cast<int32_t>(tokens.size());
    tokens.emplace_back("<|special|>");
    const int32_t vocab = static_cast<int32_t>(tokens.size()) + 7;
    return std::make_shared<const TokenizerInfo>(std::move(tokens), std::vector<int32_t>{stop},
                                                 std::vector<int32_t>{special}, vocab);
  }();
  return info;
}

// ---- validator (JSON Schema semantics for the subset the engine supports) ----

inline int64_t CodepointCount(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// UTF-8 -> one wchar_t (32 bits here) per code point, so that std::wregex counts
// characters as JSON Schema does.
inline std::wstring Wide(const std::string& s) {
  std::wstring out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : c & (0x3F >> (n - 1));
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += static_cast<wchar_t>(cp);
    i += n;
  }
  return out;
}

inline bool HasType(const json& v, const std::string& t) {
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

inline const std::map<std::string, std::string>& FormatRegexes() {
  static const std::map<std::string, std::string> formats = {
      {"date", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"},
      {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
      {"date-time", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
      {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
      {"ipv4", R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
  };
  return formats;
}

// Whether `v` is valid against `s`; `why` says where it is not.
inline bool Validate(const json& v, const json& s, const json& root, std::string& why) {
  if (s.is_boolean()) return s.get<bool>() || (why = "false schema", false);
  if (s.contains("$ref")) return Validate(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root, why);
  if (s.contains("anyOf")) {
    for (const json& sub : s["anyOf"]) {
      std::string ignored;
      if (Validate(v, sub, root, ignored)) return true;
    }
    return why = "no anyOf branch matches " + v.dump(), false;
  }
  if (s.contains("oneOf")) {
    int matches = 0;
    for (const json& sub : s["oneOf"]) {
      std::string ignored;
      matches += Validate(v, sub, root, ignored);
    }
    return matches == 1 || (why = std::to_string(matches) + " oneOf branches match " + v.dump(), false);
  }
  if (s.contains("const") && v != s["const"]) return why = v.dump() + " != const", false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
    return why = v.dump() + " not in enum", false;
  }
  if (s.contains("type")) {
    const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    if (std::none_of(types.begin(), types.end(), [&](const json& t) { return HasType(v, t.get<std::string>()); })) {
      return why = v.dump() + " is not of type " + s["type"].dump(), false;
    }
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return why = v.dump() + " < minimum", false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return why = v.dump() + " > maximum", false;
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return why = "<= exclusiveMinimum", false;
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return why = ">= exclusiveMaximum", false;
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    const int64_t n = CodepointCount(str);
    if (s.contains("minLength") && n < s["minLength"].get<int64_t>()) return why = "too short: " + v.dump(), false;
    if (s.contains("maxLength") && n > s["maxLength"].get<int64_t>()) return why = "too long: " + v.dump(), false;
    if (s.contains("pattern") && !std::regex_search(Wide(str), std::wregex(Wide(s["pattern"].get<std::string>())))) {
      return why = v.dump() + " does not match pattern", false;
    }
    if (s.contains("format") && !std::regex_match(str, std::regex(FormatRegexes().at(s["format"].get<std::string>())))) {
      return why = v.dump() + " is not a " + s["format"].get<std::string>(), false;
    }
  }
  if (v.is_object()) {
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>()) return why = "too few members", false;
    if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>()) return why = "too many members", false;
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return why = "missing required " + r.dump(), false;
    }
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (!Validate(value, props[key], root, why)) return why = "/" + key + ": " + why, false;
      } else if (s.contains("additionalProperties")) {
        if (!Validate(value, s["additionalProperties"], root, why)) return why = "extra /" + key + ": " + why, false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return why = "too few items", false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return why = "too many items", false;
    if (s.contains("items")) {
      for (const json& item : v) {
        if (!Validate(item, s["items"], root, why)) return why = "item: " + why, false;
      }
    }
  }
  return true;
}

// ---- random schemas ----

inline json RandomSchema(std::mt19937& rng, int depth, bool allow_ref);

inline json RandomStringSchema(std::mt19937& rng) {
  static const std::vector<std::string> patterns = {"^[a-z]{1,6}$", "^[A-Z][a-z]*$", "^\\d{3}-\\d{4}$", "^(yes|no|maybe)$",
                                                    "^[^\"\\\\]{0,5}$", "^a.?b$", "^[a-f0-9]{2,8}$"};
  static const std::vector<std::string> formats = {"date", "time", "date-time", "uuid", "ipv4"};
  json s = {{"type", "string"}};
  switch (rng() % 6) {
    case 0: s["maxLength"] = rng() % 8; break;
    case 1: s["minLength"] = 1 + rng() % 3; s["maxLength"] = s["minLength"].get<int>() + rng() % 6; break;
    case 2: s["pattern"] = patterns[rng() % patterns.size()]; break;
    case 3: s["format"] = formats[rng() % formats.size()]; break;
    case 4: s["enum"] = json::array({"red", "green", "blue \"b\"", "é中"}); break;
    default: break;  // unconstrained
  }
  return s;
}

inline json RandomObjectSchema(std::mt19937& rng, int depth, bool allow_ref) {
  static const std::vector<std::string> names = {"name", "id", "tags", "value", "a", "b b", "é", "nested", "x\"y"};
  json s = {{"type", "object"}, {"properties", json::object()}};
  json required = json::array();
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    const std::string key = names[rng() % names.size()];
    if (s["properties"].contains(key)) continue;
    s["properties"][key] = RandomSchema(rng, depth - 1, allow_ref);
    if (rng() % 2) required.push_back(key);
  }
  if (!required.empty()) s["required"] = required;
  switch (rng() % 6) {
    case 0: s["additionalProperties"] = false; break;
    case 1: s["additionalProperties"] = true; break;
    case 2: s["additionalProperties"] = RandomSchema(rng, depth - 1, allow_ref); break;
    case 3: s.erase("properties"); s.erase("required"); s["additionalProperties"] = RandomSchema(rng, depth - 1, allow_ref); break;
    default: break;
  }
  if (rng() % 4 == 0) {  // member counts: from the required ones up to the declared ones (extras count for the maximum)
    const int64_t have = static_cast<int64_t>(s.value("required", json::array()).size());
    const int64_t most = static_cast<int64_t>(s.value("properties", json::object()).size());
    const int64_t lo = have + static_cast<int64_t>(rng() % static_cast<uint32_t>(most - have + 1));
    if (rng() % 2) s["minProperties"] = lo;
    if (rng() % 2) s["maxProperties"] = lo + static_cast<int64_t>(rng() % 3);
  }
  return s;
}

inline json RandomSchema(std::mt19937& rng, int depth, bool allow_ref) {
  const int kinds = depth <= 0 ? 6 : 11;
  switch (rng() % kinds) {
    case 0: return RandomStringSchema(rng);
    case 1: {  // integers, bounded on either side or both about half the time
      json s = {{"type", "integer"}};
      const int64_t low = static_cast<int64_t>(rng() % 2001) - 1000;
      if (rng() % 2) s[rng() % 2 ? "minimum" : "exclusiveMinimum"] = low;
      if (rng() % 2) s[rng() % 2 ? "maximum" : "exclusiveMaximum"] = low + 2 + static_cast<int64_t>(rng() % 500);
      return s;
    }
    case 2: {  // numbers, with integral bounds on either side or both about half the time
      json s = {{"type", "number"}};
      const int64_t low = static_cast<int64_t>(rng() % 201) - 100;
      if (rng() % 2) s[rng() % 2 ? "minimum" : "exclusiveMinimum"] = low;
      if (rng() % 2) s[rng() % 2 ? "maximum" : "exclusiveMaximum"] = low + 1 + static_cast<int64_t>(rng() % 50);
      return s;
    }
    case 3: return {{"type", "boolean"}};
    case 4: return rng() % 2 ? json{{"type", "null"}} : json{{"const", 42}};
    case 5: return {{"enum", json::array({1, "two", nullptr, 3.5, json::array({1, 2}), json{{"k", "v"}}})}};
    case 6:
    case 7: return RandomObjectSchema(rng, depth, allow_ref);
    case 8: {
      json s = {{"type", "array"}, {"items", RandomSchema(rng, depth - 1, allow_ref)}};
      const int min = static_cast<int>(rng() % 3);
      if (rng() % 2) s["minItems"] = min;
      s["maxItems"] = min + static_cast<int>(rng() % 3);
      return s;
    }
    case 9:  // disjoint branches, so that oneOf holds exactly
      return json{{rng() % 2 ? std::string("anyOf") : std::string("oneOf"),
                   json::array({RandomStringSchema(rng), json{{"type", "integer"}}, json{{"type", "null"}}})}};
    default:
      if (allow_ref) return {{"$ref", "#/$defs/item"}};
      return {{"type", json::array({"string", "null"})}, {"maxLength", 4}};
  }
}

// A schema with a $defs entry that its body may reference.
inline json RandomRootSchema(std::mt19937& rng) {
  json s = RandomObjectSchema(rng, 2, true);
  s["$defs"] = {{"item", RandomSchema(rng, 1, false)}};
  return s;
}

// ---- walks ----

inline std::vector<int32_t> AllowedIds(std::span<const uint32_t> mask, int32_t vocab) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab; ++id) {
    if (BitmaskTest(mask, id)) ids.push_back(id);
  }
  return ids;
}

// A uniformly random set bit of `mask`, or -1 when none is set.
inline int32_t RandomAllowed(std::span<const uint32_t> mask, std::mt19937& rng) {
  int64_t total = 0;
  for (uint32_t w : mask) total += std::popcount(w);
  if (total == 0) return -1;
  int64_t k = std::uniform_int_distribution<int64_t>(0, total - 1)(rng);
  for (size_t w = 0; w < mask.size(); ++w) {
    const int n = std::popcount(mask[w]);
    if (k >= n) {
      k -= n;
      continue;
    }
    uint32_t word = mask[w];
    for (; k > 0; --k) word &= word - 1;  // drop the lowest set bits
    return static_cast<int32_t>(w * 32 + std::countr_zero(word));
  }
  return -1;
}

// Extends the matcher's text, a byte at a time, to a complete document: structural
// bytes preferred, then any allowed byte, whitespace last. Returns the bytes added
// (the matcher is rolled back) or an empty optional if 4000 bytes did not finish it.
inline std::optional<std::string> CompleteBytes(GrammarMatcher& m, std::mt19937& rng) {
  static const std::string kPreferred = "\"}]0,:";
  std::string added;
  while (!m.CanTerminate()) {
    if (added.size() > 4000) {
      m.Rollback(static_cast<int32_t>(added.size()));
      return std::nullopt;
    }
    std::vector<uint8_t> order(kPreferred.begin(), kPreferred.end());
    std::vector<uint8_t> rest;
    for (int b = 0x21; b < 256; ++b) rest.push_back(static_cast<uint8_t>(b));
    std::shuffle(rest.begin(), rest.end(), rng);
    if (rng() % 4 == 0) order.clear();
    order.insert(order.end(), rest.begin(), rest.end());
    for (uint8_t b : {' ', '\n', '\t', '\r'}) order.push_back(b);
    for (int b = 0; b < 0x20; ++b) order.push_back(static_cast<uint8_t>(b));
    bool moved = false;
    for (uint8_t b : order) {
      if (m.AcceptBytes(std::string(1, static_cast<char>(b)))) {
        added += static_cast<char>(b);
        moved = true;
        break;
      }
    }
    if (!moved) {
      ADD_FAILURE() << "a state that can neither end nor take any byte";
      break;
    }
  }
  m.Rollback(static_cast<int32_t>(added.size()));
  return added;
}

struct WalkResult {
  std::string text;
  bool terminated = false;
  std::vector<int32_t> ids;
};

// Samples tokens uniformly from the mask (a stop token, when allowed, with
// probability `stop_bias`) until a stop token or `max_tokens`.
inline WalkResult RandomWalk(GrammarMatcher& m, std::mt19937& rng, int max_tokens, double stop_bias = 0.3) {
  const TokenizerInfo& tok = m.compiled().tokenizer();
  std::vector<uint32_t> mask(tok.bitmask_words());
  WalkResult r;
  for (int step = 0; step < max_tokens; ++step) {
    m.FillNextTokenBitmask(mask);
    int32_t id = RandomAllowed(mask, rng);
    if (id < 0) {
      ADD_FAILURE() << "empty mask after \"" << r.text << "\"";
      return r;
    }
    if (m.CanTerminate() && std::uniform_real_distribution<double>(0, 1)(rng) < stop_bias) {
      id = tok.stop_token_ids()[0];
    }
    EXPECT_TRUE(m.AcceptToken(id)) << "the mask allowed " << id << " but AcceptToken refused it";
    r.ids.push_back(id);
    if (m.IsTerminated()) {
      r.terminated = true;
      return r;
    }
    r.text += tok.token_bytes(id);
  }
  return r;
}

}  // namespace vllm::structured_output::testing
