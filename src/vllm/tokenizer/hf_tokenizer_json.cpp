// Reads HF's tokenizer.json (+ tokenizer_config.json) into a TokenizerSpec.
//
// Supported: model BPE (byte-level vocabularies), normalizers NFC/NFD/NFKC/NFKD and
// Sequence, pre-tokenizers Split (Isolated), ByteLevel and Sequence, decoder ByteLevel,
// post-processors ByteLevel, TemplateProcessing and Sequence. Anything else is refused
// with an error naming the key and what is supported, never silently approximated
// (tokenizer_config.json's split_special_tokens = true included). Decoding does not
// apply transformers' clean_up_tokenization_spaces, as vLLM's streaming detokenizer
// does not either.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "json_fields.h"
#include "tokenizer_json_parser.h"
#include "tokenizer_spec.h"

namespace vllm {
namespace {

using nlohmann::json;

// The vocabulary and merges were streamed by the parser; the DOM holds them only when
// they have the wrong type (or not at all), which Get() then reports.
void ReadModel(const JsonFields& f, const json& root, BpeTables& tables, TokenizerSpec& spec) {
  const json& model = f.Get(root, "", "model", JsonKind::kObject);
  const std::string type = f.GetString(model, "model", "type", "BPE");
  if (type != "BPE") f.Fail("model.type", "'" + type + "' is not supported (supported: BPE)");
  if (!tables.has_vocab) f.Get(model, "model", "vocab", JsonKind::kObject);
  if (!tables.has_merges) f.Get(model, "model", "merges", JsonKind::kArray);
  spec.vocab = std::move(tables.vocab);
  spec.merges = std::move(tables.merges);
  spec.ignore_merges = f.GetBool(model, "model", "ignore_merges", false);
  if (f.GetBool(model, "model", "byte_fallback", false)) {
    f.Fail("model.byte_fallback", "true is not supported (byte-level BPE needs no byte fallback)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!f.GetString(model, "model", key, "").empty()) f.Fail(std::string("model.") + key, "must be empty");
  }
  if (const json* dropout = f.Find(model, "dropout"); dropout && !(dropout->is_number() && *dropout == 0)) {
    f.Fail("model.dropout", "must be null: BPE dropout makes encoding random");
  }
}

void ReadNormalizer(const JsonFields& f, const json& node, const std::string& path, TokenizerSpec& spec) {
  const std::string type = f.GetString(node, path, "type");
  if (type == "NFC") {
    spec.normalizer.push_back(UnicodeForm::kNFC);
  } else if (type == "NFD") {
    spec.normalizer.push_back(UnicodeForm::kNFD);
  } else if (type == "NFKC") {
    spec.normalizer.push_back(UnicodeForm::kNFKC);
  } else if (type == "NFKD") {
    spec.normalizer.push_back(UnicodeForm::kNFKD);
  } else if (type == "Sequence") {
    const json& list = f.Get(node, path, "normalizers", JsonKind::kArray);
    for (size_t i = 0; i < list.size(); ++i) {
      ReadNormalizer(f, list[i], path + ".normalizers[" + std::to_string(i) + "]", spec);
    }
  } else {
    f.Fail(path + ".type", "normalizer '" + type + "' is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
}

std::string EscapeForRegex(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void ReadSplit(const JsonFields& f, const json& node, const std::string& path, TokenizerSpec& spec) {
  const json& pattern = f.Get(node, path, "pattern", JsonKind::kObject);
  std::string regex;
  if (f.Find(pattern, "Regex")) {
    regex = f.GetString(pattern, path + ".pattern", "Regex");
  } else if (f.Find(pattern, "String")) {
    regex = EscapeForRegex(f.GetString(pattern, path + ".pattern", "String"));
  } else {
    f.Fail(path + ".pattern", "must have a key 'Regex' or 'String'");
  }
  const std::string behavior = f.GetString(node, path, "behavior");
  if (behavior != "Isolated") f.Fail(path + ".behavior", "'" + behavior + "' is not supported (supported: Isolated)");
  if (f.GetBool(node, path, "invert", false)) f.Fail(path + ".invert", "true is not supported");
  spec.pre_tokenizer.AddRegexSplit(regex, f.name() + " (" + path + ".pattern)");
}

void ReadPreTokenizer(const JsonFields& f, const json& node, const std::string& path, TokenizerSpec& spec) {
  const std::string type = f.GetString(node, path, "type");
  if (type == "Split") {
    ReadSplit(f, node, path, spec);
  } else if (type == "ByteLevel") {
    // HF's defaults for keys that are absent: add_prefix_space and use_regex both true.
    if (f.GetBool(node, path, "add_prefix_space", true)) spec.pre_tokenizer.AddPrefixSpace();
    if (f.GetBool(node, path, "use_regex", true)) spec.pre_tokenizer.AddRegexSplit(kGpt2SplitPattern, f.name());
  } else if (type == "Sequence") {
    const json& list = f.Get(node, path, "pretokenizers", JsonKind::kArray);
    for (size_t i = 0; i < list.size(); ++i) {
      ReadPreTokenizer(f, list[i], path + ".pretokenizers[" + std::to_string(i) + "]", spec);
    }
  } else {
    f.Fail(path + ".type", "pre-tokenizer '" + type + "' is not supported (supported: Split, ByteLevel, Sequence)");
  }
}

void ReadDecoder(const JsonFields& f, const json& root) {
  const json& decoder = f.Get(root, "", "decoder", JsonKind::kObject);
  const std::string type = f.GetString(decoder, "decoder", "type");
  if (type != "ByteLevel") f.Fail("decoder.type", "'" + type + "' is not supported (supported: ByteLevel)");
}

// TemplateProcessing's "single" template: special tokens before and after $A.
void ReadTemplate(const JsonFields& f, const json& node, const std::string& path, TokenizerSpec& spec) {
  const json& single = f.Get(node, path, "single", JsonKind::kArray);
  const json& special = f.Get(node, path, "special_tokens", JsonKind::kObject);
  bool after_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string item_path = path + ".single[" + std::to_string(i) + "]";
    if (f.Find(single[i], "Sequence")) {
      after_sequence = true;
      continue;
    }
    const json& item = f.Get(single[i], item_path, "SpecialToken", JsonKind::kObject);
    const std::string name = f.GetString(item, item_path + ".SpecialToken", "id");
    const json& entry = f.Get(special, path + ".special_tokens", name, JsonKind::kObject);
    const json& ids = f.Get(entry, path + ".special_tokens." + name, "ids", JsonKind::kArray);
    for (const json& id : ids) {
      (after_sequence ? spec.suffix_ids : spec.prefix_ids).push_back(f.GetInt32(id, path + ".special_tokens." + name + ".ids"));
    }
  }
}

// Returns whether a TemplateProcessing was found (it then decides what Encode adds).
bool ReadPostProcessor(const JsonFields& f, const json& node, const std::string& path, TokenizerSpec& spec) {
  const std::string type = f.GetString(node, path, "type");
  if (type == "ByteLevel") return false;  // only trims offsets, which we do not produce
  if (type == "TemplateProcessing") {
    ReadTemplate(f, node, path, spec);
    return true;
  }
  if (type == "Sequence") {
    const json& list = f.Get(node, path, "processors", JsonKind::kArray);
    bool found = false;
    for (size_t i = 0; i < list.size(); ++i) {
      found = ReadPostProcessor(f, list[i], path + ".processors[" + std::to_string(i) + "]", spec) || found;
    }
    return found;
  }
  f.Fail(path + ".type",
         "post-processor '" + type + "' is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
}

AddedToken ReadAddedToken(const JsonFields& f, const json& node, const std::string& path) {
  AddedToken token;
  token.content = f.GetString(node, path, "content");
  if (token.content.empty()) f.Fail(path + ".content", "must not be empty");
  token.special = f.GetBool(node, path, "special", false);
  token.single_word = f.GetBool(node, path, "single_word", false);
  token.lstrip = f.GetBool(node, path, "lstrip", false);
  token.rstrip = f.GetBool(node, path, "rstrip", false);
  token.normalized = f.GetBool(node, path, "normalized", true);  // HF's default
  return token;
}

void ReadAddedTokens(const JsonFields& f, const json& root, TokenizerSpec& spec) {
  const json* list = f.Find(root, "added_tokens");
  if (list == nullptr) return;
  if (!list->is_array()) f.Fail("added_tokens", "must be an array, found " + std::string(list->type_name()));
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    AddedToken token = ReadAddedToken(f, (*list)[i], path);
    token.id = f.GetInt32(f.Get((*list)[i], path, "id", JsonKind::kInteger), path + ".id");
    spec.added_tokens.push_back(std::move(token));
  }
}


// bos_token and the like: null, a string, or an AddedToken object {"content": ...}.
std::optional<std::string> ReadTokenName(const JsonFields& c, const std::string& key) {
  const json* value = c.Find(c.root(), key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) return c.GetString(*value, key, "content");
  c.Fail(key, "must be a string, an object with 'content' or null, found " + std::string(value->type_name()));
}

// The ids of bos_token and the like: an added token's content (the first one listed
// wins), else a vocabulary spelling (the first one listed wins). The vocabulary is
// hashed only when a name is not an added token, which special tokens usually are.
class NamedTokenIds {
 public:
  explicit NamedTokenIds(const TokenizerSpec& spec) : spec_(spec) {
    for (const AddedToken& token : spec.added_tokens) added_.try_emplace(token.content, token.id);
  }

  std::optional<int32_t> Find(std::string_view name) {
    if (auto it = added_.find(name); it != added_.end()) return it->second;
    if (vocab_.empty()) {
      vocab_.reserve(spec_.vocab.size());
      for (const auto& [spelling, id] : spec_.vocab) vocab_.try_emplace(spelling, id);
    }
    if (auto it = vocab_.find(name); it != vocab_.end()) return it->second;
    return std::nullopt;
  }

 private:
  const TokenizerSpec& spec_;
  std::unordered_map<std::string_view, int32_t> added_;
  std::unordered_map<std::string_view, int32_t> vocab_;  // filled on first need
};

std::optional<int32_t> IdOfTokenNamed(const JsonFields& c, NamedTokenIds& ids, const std::string& key) {
  const std::optional<std::string> name = ReadTokenName(c, key);
  if (!name) return std::nullopt;
  if (const std::optional<int32_t> id = ids.Find(*name)) return id;
  c.Fail(key, "names '" + *name + "', which is neither an added token nor in the vocabulary");
}

// added_tokens_decoder: {"151643": {"content": ..., "special": true, ...}, ...}. Entries
// agree with tokenizer.json's added_tokens or add to them; the config's `special` wins,
// as in transformers.
void MergeAddedTokensDecoder(const JsonFields& c, TokenizerSpec& spec) {
  const json* decoder = c.Find(c.root(), "added_tokens_decoder");
  if (decoder == nullptr) return;
  if (!decoder->is_object()) c.Fail("added_tokens_decoder", "must be an object, found " + std::string(decoder->type_name()));
  for (const auto& [key, value] : decoder->items()) {
    const std::string path = "added_tokens_decoder." + key;
    int32_t id = 0;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || id < 0) c.Fail(path, "is not a token id");
    AddedToken token = ReadAddedToken(c, value, path);
    token.id = id;
    auto same_id = std::find_if(spec.added_tokens.begin(), spec.added_tokens.end(),
                                [&](const AddedToken& t) { return t.id == id; });
    if (same_id == spec.added_tokens.end()) {
      spec.added_tokens.push_back(std::move(token));
    } else if (same_id->content != token.content) {
      c.Fail(path, "has content '" + token.content + "' but tokenizer.json gives id " + key + " to '" +
                       same_id->content + "'");
    } else {
      same_id->special = token.special;
    }
  }
}

// chat_template: a string, or a list of {"name", "template"} of which "default" is used.
std::string ReadChatTemplate(const JsonFields& c) {
  const json* value = c.Find(c.root(), "chat_template");
  if (value == nullptr) return {};
  if (value->is_string()) return value->get<std::string>();
  if (!value->is_array()) c.Fail("chat_template", "must be a string or a list, found " + std::string(value->type_name()));
  for (size_t i = 0; i < value->size(); ++i) {
    const std::string path = "chat_template[" + std::to_string(i) + "]";
    if (c.GetString((*value)[i], path, "name") == "default") return c.GetString((*value)[i], path, "template");
  }
  c.Fail("chat_template", "is a list without a template named 'default'");
}

void ApplyTokenizerConfig(const JsonFields& c, bool use_add_flags, TokenizerSpec& spec) {
  if (c.GetBool(c.root(), "", "split_special_tokens", false)) {
    c.Fail("split_special_tokens", "true is not supported (special tokens in text are always recognised)");
  }
  MergeAddedTokensDecoder(c, spec);
  NamedTokenIds named_ids(spec);
  spec.bos_id = IdOfTokenNamed(c, named_ids, "bos_token");
  spec.eos_id = IdOfTokenNamed(c, named_ids, "eos_token");
  spec.pad_id = IdOfTokenNamed(c, named_ids, "pad_token");
  if (use_add_flags) {
    if (c.GetBool(c.root(), "", "add_bos_token", false)) {
      if (!spec.bos_id) c.Fail("add_bos_token", "is true but bos_token is not set");
      spec.prefix_ids = {*spec.bos_id};
    }
    if (c.GetBool(c.root(), "", "add_eos_token", false)) {
      if (!spec.eos_id) c.Fail("add_eos_token", "is true but eos_token is not set");
      spec.suffix_ids = {*spec.eos_id};
    }
  }
  spec.chat_template = ReadChatTemplate(c);
}

}  // namespace

TokenizerSpec SpecFromHfJson(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                             const std::string& folder) {
  const std::string file = folder + "/tokenizer.json";
  BpeTables tables;
  const JsonFields f(file, ParseTokenizerJson(tokenizer_json, file, tables));
  const json& root = f.root();
  TokenizerSpec spec;
  spec.source = f.name();
  ReadModel(f, root, tables, spec);
  if (const json* normalizer = f.Find(root, "normalizer")) ReadNormalizer(f, *normalizer, "normalizer", spec);
  if (const json* pre = f.Find(root, "pre_tokenizer")) ReadPreTokenizer(f, *pre, "pre_tokenizer", spec);
  ReadDecoder(f, root);
  ReadAddedTokens(f, root, spec);
  bool has_template = false;
  if (const json* post = f.Find(root, "post_processor")) has_template = ReadPostProcessor(f, *post, "post_processor", spec);
  if (!tokenizer_config_json.empty()) {
    ApplyTokenizerConfig(JsonFields(folder + "/tokenizer_config.json", tokenizer_config_json), !has_template, spec);
  }
  return spec;
}

}  // namespace vllm
