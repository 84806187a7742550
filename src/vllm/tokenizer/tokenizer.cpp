#include "vllm/tokenizer/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "bpe.h"
#include "byte_level.h"
#include "tokenizer_spec.h"
#include "utf8.h"
#include "vocab_index.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/embedded_files.h"
#include "vllm/tokenizer/chat_template.h"
#include "vllm/tokenizer/gguf_tokenizer_data.h"
#include "vt/error.h"

namespace vllm {
namespace {

// Many short strings in one buffer, indexed by id: one allocation instead of 150k.
class StringTable {
 public:
  void Append(std::string_view s) {
    data_.append(s);
    offsets_.push_back(data_.size());
  }
  std::string_view operator[](size_t i) const {
    return std::string_view(data_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }

 private:
  std::string data_;
  std::vector<size_t> offsets_ = {0};
};

}  // namespace

struct Tokenizer::Impl {
  enum class Slot : uint8_t { kNone, kVocab, kAdded, kSpecial, kUnused };

  std::string source;
  std::vector<UnicodeForm> normalizer;
  PreTokenizer pre_tokenizer;
  VocabIndex vocab;
  BpeModel bpe;
  AddedTokenMatcher raw_added, normalized_added;  // by the added tokens' `normalized` flag
  std::vector<Slot> slots;                         // [vocab_size]
  StringTable token_bytes;                         // [vocab_size] what each id decodes to
  // Added tokens and unused slots (which are not in `vocab`): content <-> id.
  std::unordered_map<std::string, int32_t> other_ids;
  std::unordered_map<int32_t, std::string> other_spellings;
  std::vector<int32_t> prefix_ids, suffix_ids;
  std::optional<int32_t> bos_id, eos_id, pad_id;
  std::string bos_token, eos_token, pad_token, chat_template;

  explicit Impl(TokenizerSpec&& spec);
  void PlaceTokens(const TokenizerSpec& spec);
  std::string TokenText(std::optional<int32_t> id, const char* what) const;
  void CheckId(int32_t id) const;
  void EncodePlain(std::string_view normalized, std::vector<int32_t>& ids) const;
  void EncodeBetweenRawTokens(std::string_view text, std::vector<int32_t>& ids) const;
};

// Gives every id its role and bytes. An added token may take the id of a vocabulary
// entry (it then wins, as in HF).
void Tokenizer::Impl::PlaceTokens(const TokenizerSpec& spec) {
  slots.assign(vocab.size(), Slot::kNone);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.Has(id)) slots[id] = Slot::kVocab;
  }
  auto place_other = [&](int32_t id, Slot slot, const std::string& spelling, const char* what) {
    if (id < 0 || id >= vocab.size() + (int32_t{1} << 20)) {
      throw vt::Error(source + ": " + what + " '" + spelling + "' has id " + std::to_string(id) +
                      ", far outside the vocabulary (" + std::to_string(vocab.size()) + " ids)");
    }
    if (id >= static_cast<int32_t>(slots.size())) slots.resize(id + 1, Slot::kNone);
    slots[id] = slot;
    other_ids[spelling] = id;
    other_spellings[id] = spelling;
  };
  for (const AddedToken& token : spec.added_tokens) {
    place_other(token.id, token.special ? Slot::kSpecial : Slot::kAdded, token.content, "added token");
  }
  for (const auto& [id, spelling] : spec.unused_slots) place_other(id, Slot::kUnused, spelling, "unused slot");
  for (int32_t id = 0; id < static_cast<int32_t>(slots.size()); ++id) {
    switch (slots[id]) {
      case Slot::kNone:
      case Slot::kUnused: token_bytes.Append({}); break;
      case Slot::kVocab: token_bytes.Append(byte_level::DecodeToken(vocab.Spelling(id))); break;
      case Slot::kAdded:
      case Slot::kSpecial: token_bytes.Append(byte_level::DecodeToken(other_spellings.at(id))); break;
    }
  }
}

std::string Tokenizer::Impl::TokenText(std::optional<int32_t> id, const char* what) const {
  if (!id) return {};
  if (*id < 0 || *id >= static_cast<int32_t>(slots.size()) || slots[*id] == Slot::kNone) {
    throw vt::Error(source + ": the " + what + " id " + std::to_string(*id) + " is not the id of any token");
  }
  return utf8::DecodeLossy(token_bytes[*id]);
}

Tokenizer::Impl::Impl(TokenizerSpec&& spec)
    : source(std::move(spec.source)),
      normalizer(std::move(spec.normalizer)),
      pre_tokenizer(std::move(spec.pre_tokenizer)),
      vocab(spec.vocab, source),
      bpe(vocab, spec.merges, spec.ignore_merges, source),
      prefix_ids(std::move(spec.prefix_ids)),
      suffix_ids(std::move(spec.suffix_ids)),
      bos_id(spec.bos_id),
      eos_id(spec.eos_id),
      pad_id(spec.pad_id),
      chat_template(std::move(spec.chat_template)) {
  PlaceTokens(spec);
  std::vector<AddedToken> raw, normalized;
  for (AddedToken& token : spec.added_tokens) {
    if (token.normalized) {
      // A normalized token is looked for in normalised text, so it is normalised too.
      token.content = NormalizeUnicode(token.content, normalizer);
      normalized.push_back(token);
    } else {
      raw.push_back(token);
    }
  }
  raw_added = AddedTokenMatcher(raw);
  normalized_added = AddedTokenMatcher(normalized);
  // TokenText throws for ids without a token.
  for (int32_t id : prefix_ids) TokenText(id, "post-processor");
  for (int32_t id : suffix_ids) TokenText(id, "post-processor");
  bos_token = TokenText(bos_id, "BOS");
  eos_token = TokenText(eos_id, "EOS");
  pad_token = TokenText(pad_id, "padding");
}

void Tokenizer::Impl::CheckId(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(slots.size())) {
    throw vt::Error("tokenizer (" + source + "): token id " + std::to_string(id) + " is out of range (ids are 0.." +
                    std::to_string(slots.size() - 1) + ")");
  }
  if (slots[id] == Slot::kNone) {
    throw vt::Error("tokenizer (" + source + "): token id " + std::to_string(id) + " has no token");
  }
}

void Tokenizer::Impl::EncodePlain(std::string_view normalized, std::vector<int32_t>& ids) const {
  if (pre_tokenizer.empty()) {
    bpe.Encode(normalized, ids);
    return;
  }
  for (const std::string& piece : pre_tokenizer.Split(normalized)) bpe.Encode(piece, ids);
}

// Text between two raw-matched added tokens: normalised, then searched for normalized
// added tokens, then pre-tokenized and encoded.
void Tokenizer::Impl::EncodeBetweenRawTokens(std::string_view text, std::vector<int32_t>& ids) const {
  const std::string normalized = NormalizeUnicode(text, normalizer);
  if (normalized_added.empty()) {
    EncodePlain(normalized, ids);
    return;
  }
  for (const TextSegment& segment : normalized_added.Split(normalized)) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      EncodePlain(segment.text, ids);
    }
  }
}

Tokenizer::Tokenizer(TokenizerSpec&& spec) : impl_(std::make_shared<const Impl>(std::move(spec))) {}

namespace {

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw vt::Error(path.string() + ": cannot be opened for reading");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw vt::Error(path.string() + ": read failed");
  return contents.str();
}

}  // namespace

Tokenizer Tokenizer::FromHfDirectory(const std::filesystem::path& dir) {
  const std::filesystem::path json_path = dir / "tokenizer.json";
  if (!std::filesystem::is_regular_file(json_path)) {
    throw vt::Error(dir.string() + ": no tokenizer.json in this folder (give an HF model folder or a .gguf file)");
  }
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  const std::string config = std::filesystem::exists(config_path) ? ReadWholeFile(config_path) : std::string();
  TokenizerSpec spec = SpecFromHfJson(ReadWholeFile(json_path), config, dir.string());
  // transformers saves the template in its own file, which then wins over the config's.
  const std::filesystem::path template_path = dir / "chat_template.jinja";
  if (std::filesystem::exists(template_path)) spec.chat_template = ReadWholeFile(template_path);
  return Tokenizer(std::move(spec));
}

Tokenizer Tokenizer::FromPath(const std::filesystem::path& path) {
  const bool embedded = IsEmbeddedFile(path.string());  // the embedded demo model, a GGUF (embedded_files.h)
  if (!embedded) {
    if (std::filesystem::is_directory(path)) return FromHfDirectory(path);
    if (path.filename() == "tokenizer.json") return FromHfDirectory(path.parent_path());
    if (!std::filesystem::exists(path)) throw vt::Error(path.string() + ": no such file or folder");
  }
  if (embedded || path.extension() == ".gguf") {
    return FromGguf(GgufTokenizerDataFromMetadata(GgufFile::Open(path.string()).metadata()));
  }
  throw vt::Error(path.string() + ": not a tokenizer (give an HF model folder with tokenizer.json, or a .gguf file)");
}

Tokenizer Tokenizer::FromHfJson(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                                const std::string& source) {
  return Tokenizer(SpecFromHfJson(tokenizer_json, tokenizer_config_json, source));
}

Tokenizer Tokenizer::FromGguf(const GgufTokenizerData& data) { return Tokenizer(SpecFromGguf(data)); }

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  const Impl& impl = *impl_;
  if (const auto bad = utf8::FindInvalid(text)) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text[*bad]));
    throw vt::Error("tokenizer (" + impl.source + "): the text to encode is not valid UTF-8 (byte " + byte +
                    " at offset " + std::to_string(*bad) + " of " + std::to_string(text.size()) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), impl.prefix_ids.begin(), impl.prefix_ids.end());
  for (const TextSegment& segment : impl.raw_added.Split(text)) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      impl.EncodeBetweenRawTokens(segment.text, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), impl.suffix_ids.begin(), impl.suffix_ids.end());
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    impl.CheckId(id);
    if (skip_special_tokens && impl.slots[id] == Impl::Slot::kSpecial) continue;
    bytes.append(impl.token_bytes[id]);
  }
  return utf8::DecodeLossy(bytes);
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  impl_->CheckId(id);
  return impl_->token_bytes[id];
}

bool Tokenizer::HasToken(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(impl_->slots.size()) && impl_->slots[id] != Impl::Slot::kNone;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  impl_->CheckId(id);
  return impl_->slots[id] == Impl::Slot::kSpecial;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  // Added tokens first, as in HF.
  if (auto it = impl_->other_ids.find(std::string(token)); it != impl_->other_ids.end()) return it->second;
  return impl_->vocab.Find(token);
}

std::string_view Tokenizer::IdToToken(int32_t id) const {
  impl_->CheckId(id);
  if (impl_->slots[id] == Impl::Slot::kVocab) return impl_->vocab.Spelling(id);
  return impl_->other_spellings.at(id);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->slots.size()); }
std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad_id; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::pad_token() const { return impl_->pad_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const std::string& Tokenizer::source() const { return impl_->source; }

ChatTemplateTokens ChatTemplateTokensOf(const Tokenizer& tokenizer) {
  ChatTemplateTokens tokens;
  if (tokenizer.bos_token_id()) tokens.bos_token = tokenizer.bos_token();
  if (tokenizer.eos_token_id()) tokens.eos_token = tokenizer.eos_token();
  if (tokenizer.pad_token_id()) tokens.pad_token = tokenizer.pad_token();
  return tokens;
}

}  // namespace vllm
