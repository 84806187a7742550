// HF tokenizer files -> GGUF tokenizer.ggml.* keys (see hf_to_gguf.h).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "vllm/model_loader/hf_to_gguf.h"
#include "vt/error.h"

namespace vllm {
namespace {

using nlohmann::json;

// llama.cpp's token types.
constexpr int64_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw vt::Error(path.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw vt::Error(path.string() + ": not valid JSON: " + e.what());
  }
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
};

void Place(Vocab& v, int64_t id, const std::string& text, int64_t type, const std::string& source) {
  if (id < 0 || id >= static_cast<int64_t>(v.tokens.size())) {
    throw vt::Error(source + ": token '" + text + "' has id " + std::to_string(id) + ", outside the model's vocab_size " +
                    std::to_string(v.tokens.size()));
  }
  if (v.types[id] != kUnused && v.tokens[id] != text) {
    throw vt::Error(source + ": token id " + std::to_string(id) + " is both '" + v.tokens[id] + "' and '" + text + "'");
  }
  v.tokens[id] = text;
  v.types[id] = type;
}

Vocab ReadVocab(const json& tokenizer, int64_t vocab_size, const std::string& source) {
  Vocab v;
  v.tokens.resize(static_cast<size_t>(vocab_size));
  v.types.assign(static_cast<size_t>(vocab_size), kUnused);
  for (int64_t i = 0; i < vocab_size; ++i) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
  const json& model = tokenizer.at("model");
  if (model.value("type", std::string()) != "BPE") {
    throw vt::Error(source + ": tokenizer model type '" + model.value("type", std::string("?")) +
                    "' is not supported for GGUF conversion (expected BPE)");
  }
  for (const auto& [text, id] : model.at("vocab").items()) Place(v, id.get<int64_t>(), text, kNormal, source);
  if (tokenizer.contains("added_tokens")) {
    for (const json& t : tokenizer["added_tokens"]) {
      const int64_t type = t.value("special", false) ? kControl : kUserDefined;
      Place(v, t.at("id").get<int64_t>(), t.at("content").get<std::string>(), type, source);
    }
  }
  return v;
}

std::vector<std::string> ReadMerges(const json& model) {
  std::vector<std::string> merges;
  if (!model.contains("merges")) return merges;
  for (const json& m : model["merges"]) {
    merges.push_back(m.is_array() ? m.at(0).get<std::string>() + " " + m.at(1).get<std::string>() : m.get<std::string>());
  }
  return merges;
}

// tokenizer_config.json's "eos_token": "<|im_end|>" or {"content": "<|im_end|>", ...}.
std::optional<int64_t> SpecialTokenId(const json& config, const char* key, const Vocab& v) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& entry = config[key];
  const std::string text = entry.is_object() ? entry.value("content", std::string()) : entry.get<std::string>();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.types[id] != kUnused && v.tokens[id] == text) return static_cast<int64_t>(id);
  }
  return std::nullopt;
}

std::optional<std::string> ChatTemplate(const std::filesystem::path& folder, const json& config) {
  if (config.contains("chat_template")) {
    const json& t = config["chat_template"];
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array()) {
      for (const json& named : t) {
        if (named.value("name", std::string()) == "default") return named.value("template", std::string());
      }
    }
  }
  const auto jinja = folder / "chat_template.jinja";
  if (!std::filesystem::exists(jinja)) return std::nullopt;
  std::ifstream in(jinja);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void AddTokenizerKeys(const json& tokenizer, const json& config, const std::string& folder,
                      const std::string& pre_tokenizer, int64_t vocab_size, GgufMetadata& m) {
  const std::string source = folder + "/tokenizer.json";
  Vocab vocab = ReadVocab(tokenizer, vocab_size, source);
  m.Set("tokenizer.ggml.model", GgufValue::String("gpt2"));
  m.Set("tokenizer.ggml.pre", GgufValue::String(pre_tokenizer));
  m.Set("tokenizer.ggml.tokens", GgufValue::StringArray(vocab.tokens));
  m.Set("tokenizer.ggml.token_type", GgufValue::IntArray(GgufType::kInt32, vocab.types));
  m.Set("tokenizer.ggml.merges", GgufValue::StringArray(ReadMerges(tokenizer.at("model"))));
  const std::pair<const char*, const char*> ids[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                                     {"eos_token", "tokenizer.ggml.eos_token_id"},
                                                     {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [config_key, gguf_key] : ids) {
    if (auto id = SpecialTokenId(config, config_key, vocab)) m.Set(gguf_key, GgufValue::U32(static_cast<uint32_t>(*id)));
  }
  const json& add_bos = config.contains("add_bos_token") ? config["add_bos_token"] : json(false);
  m.Set("tokenizer.ggml.add_bos_token", GgufValue::Bool(add_bos.is_boolean() && add_bos.get<bool>()));
  if (auto tmpl = ChatTemplate(folder, config)) m.Set("tokenizer.chat_template", GgufValue::String(*tmpl));
}

}  // namespace

bool AddHfTokenizerToGguf(const std::string& hf_folder, const std::string& pre_tokenizer, int64_t vocab_size,
                          GgufMetadata& m) {
  namespace fs = std::filesystem;
  const fs::path tokenizer_path = fs::path(hf_folder) / "tokenizer.json";
  if (!fs::exists(tokenizer_path)) return false;
  const fs::path config_path = fs::path(hf_folder) / "tokenizer_config.json";
  try {
    AddTokenizerKeys(ReadJson(tokenizer_path), fs::exists(config_path) ? ReadJson(config_path) : json::object(),
                     hf_folder, pre_tokenizer, vocab_size, m);
  } catch (const json::exception& e) {
    throw vt::Error(tokenizer_path.string() + " / tokenizer_config.json: unexpected structure: " + e.what());
  }
  return true;
}

}  // namespace vllm
