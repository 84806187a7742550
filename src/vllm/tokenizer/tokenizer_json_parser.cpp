#include "tokenizer_json_parser.h"

#include <limits>

#include "json_fields.h"
#include "vt/error.h"

namespace vllm {
namespace {

using nlohmann::json;

// A SAX handler that builds the DOM like nlohmann's own parser, except inside
// model.vocab (mode kVocab) and model.merges (kMerges, kMergePair).
class StreamingHandler : public nlohmann::json_sax<json> {
 public:
  StreamingHandler(const std::string& file, BpeTables& tables) : file_(file), tables_(tables) {}
  json TakeRoot() { return std::move(root_); }

  bool null() override { return Scalar(json(nullptr), "null"); }
  bool boolean(bool value) override { return Scalar(json(value), "boolean"); }
  bool number_integer(number_integer_t value) override { return Integer(value, json(value)); }
  bool number_unsigned(number_unsigned_t value) override {
    // Values past int64 are clamped: still out of range for an id, and reported so.
    const auto max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return Integer(static_cast<int64_t>(value > max ? max : value), json(value));
  }
  bool number_float(number_float_t value, const string_t&) override { return Scalar(json(value), "number"); }
  bool binary(binary_t& value) override { return Scalar(json::binary(value), "binary"); }
  bool string(string_t& value) override;
  bool key(string_t& value) override;
  bool start_object(std::size_t) override;
  bool end_object() override;
  bool start_array(std::size_t) override;
  bool end_array() override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw vt::Error(file_ + ": not valid JSON (" + e.what() + ")");
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  std::string MergePath() const { return "model.merges[" + std::to_string(tables_.merges.size()) + "]"; }
  [[noreturn]] void BadVocabEntry(const char* found) const {
    FailJsonKey(file_, "model.vocab[\"" + vocab_key_ + "\"]", std::string("must be an integer, found ") + found);
  }
  [[noreturn]] void BadMerge(const std::string& found) const {
    FailJsonKey(file_, MergePath(), "must be a string \"left right\" or an array of two strings, found " + found);
  }
  bool Scalar(json value, const char* type_name);
  bool Integer(int64_t value, json as_json);
  json& Insert(json value);
  bool AtModelKey(const char* name) const {
    return containers_.size() == 2 && containers_[1]->is_object() && container_keys_[1] == "model" &&
           pending_key_ == name;
  }

  const std::string& file_;
  BpeTables& tables_;
  Mode mode_ = Mode::kDom;
  json root_;
  std::vector<json*> containers_;        // open objects/arrays of the DOM
  std::vector<std::string> container_keys_;  // the key each open container sits under
  std::string pending_key_;
  std::string vocab_key_;
  std::vector<std::string> pair_;  // the strings of a merge written as an array
};

json& StreamingHandler::Insert(json value) {
  if (containers_.empty()) {
    root_ = std::move(value);
    return root_;
  }
  json& parent = *containers_.back();
  if (parent.is_array()) {
    parent.push_back(std::move(value));
    return parent.back();
  }
  json& slot = parent[pending_key_];
  slot = std::move(value);
  return slot;
}

bool StreamingHandler::Scalar(json value, const char* type_name) {
  switch (mode_) {
    case Mode::kDom: Insert(std::move(value)); return true;
    case Mode::kVocab: BadVocabEntry(type_name);
    case Mode::kMerges:
    case Mode::kMergePair: BadMerge(type_name);
  }
  return true;
}

bool StreamingHandler::Integer(int64_t value, json as_json) {
  if (mode_ != Mode::kVocab) return Scalar(std::move(as_json), "number");
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    FailJsonKey(file_, "model.vocab[\"" + vocab_key_ + "\"]", "must fit in 32 bits, found " + as_json.dump());
  }
  tables_.vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(value));
  return true;
}

bool StreamingHandler::string(string_t& value) {
  if (mode_ == Mode::kVocab) BadVocabEntry("string");
  if (mode_ == Mode::kMergePair) {
    if (pair_.size() == 2) BadMerge("an array of more than two strings");
    pair_.push_back(std::move(value));
    return true;
  }
  if (mode_ == Mode::kMerges) {
    // The older spelling "left right": exactly one space, as HF requires.
    const size_t space = value.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == value.size() ||
        value.find(' ', space + 1) != std::string::npos) {
      FailJsonKey(file_, MergePath(), "must be two tokens separated by one space, found '" + value + "'");
    }
    tables_.merges.emplace_back(value.substr(0, space), value.substr(space + 1));
    return true;
  }
  Insert(json(std::move(value)));
  return true;
}

bool StreamingHandler::key(string_t& value) {
  if (mode_ == Mode::kVocab) {
    vocab_key_ = std::move(value);
  } else {
    pending_key_ = std::move(value);
  }
  return true;
}

bool StreamingHandler::start_object(std::size_t) {
  if (mode_ == Mode::kVocab) BadVocabEntry("object");
  if (mode_ != Mode::kDom) BadMerge("object");
  if (AtModelKey("vocab")) {
    mode_ = Mode::kVocab;
    tables_.has_vocab = true;
    tables_.vocab.clear();
    tables_.vocab.reserve(1 << 18);
    return true;
  }
  json& object = Insert(json::object());
  container_keys_.push_back(pending_key_);
  containers_.push_back(&object);
  return true;
}

bool StreamingHandler::end_object() {
  if (mode_ == Mode::kVocab) {
    mode_ = Mode::kDom;
    return true;
  }
  containers_.pop_back();
  container_keys_.pop_back();
  return true;
}

bool StreamingHandler::start_array(std::size_t) {
  if (mode_ == Mode::kVocab) BadVocabEntry("array");
  if (mode_ == Mode::kMergePair) BadMerge("a nested array");
  if (mode_ == Mode::kMerges) {
    mode_ = Mode::kMergePair;
    pair_.clear();
    return true;
  }
  if (AtModelKey("merges")) {
    mode_ = Mode::kMerges;
    tables_.has_merges = true;
    tables_.merges.clear();
    tables_.merges.reserve(1 << 18);
    return true;
  }
  json& array = Insert(json::array());
  container_keys_.push_back(pending_key_);
  containers_.push_back(&array);
  return true;
}

bool StreamingHandler::end_array() {
  if (mode_ == Mode::kMergePair) {
    if (pair_.size() != 2) BadMerge("an array of " + std::to_string(pair_.size()) + " strings");
    tables_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
    mode_ = Mode::kMerges;
    return true;
  }
  if (mode_ == Mode::kMerges) {
    mode_ = Mode::kDom;
    return true;
  }
  containers_.pop_back();
  container_keys_.pop_back();
  return true;
}

}  // namespace

json ParseTokenizerJson(std::string_view text, const std::string& file, BpeTables& tables) {
  StreamingHandler handler(file, tables);
  json::sax_parse(text.begin(), text.end(), &handler);
  return handler.TakeRoot();
}

}  // namespace vllm
