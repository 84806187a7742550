// Typed access to the keys of a JSON file, with errors that name the file, the key path
// ("model.merges[12]") and what was expected versus found.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace vllm {

enum class JsonKind { kObject, kArray, kString, kInteger, kBool };

bool IsKind(const nlohmann::json& value, JsonKind kind);

// Throws vt::Error "<file>: key '<key_path>' <problem>".
[[noreturn]] void FailJsonKey(const std::string& file, const std::string& key_path, const std::string& problem);

class JsonFields {
 public:
  // Parses `text`; throws vt::Error naming `name` if it is not JSON or not an object.
  JsonFields(std::string name, std::string_view text);
  // An already parsed document; throws if it is not an object.
  JsonFields(std::string name, nlohmann::json root);

  const std::string& name() const { return name_; }
  const nlohmann::json& root() const { return root_; }

  [[noreturn]] void Fail(const std::string& key_path, const std::string& problem) const;

  // `object[key]`, or nullptr when the key is absent or null. `object` must be an object.
  const nlohmann::json* Find(const nlohmann::json& object, const std::string& key) const;
  // `object[key]`, which must be present and of `kind`; `path` is the object's key path.
  const nlohmann::json& Get(const nlohmann::json& object, const std::string& path, const std::string& key,
                            JsonKind kind) const;
  std::string GetString(const nlohmann::json& object, const std::string& path, const std::string& key) const;
  // With a fallback for an absent or null key.
  std::string GetString(const nlohmann::json& object, const std::string& path, const std::string& key,
                        const std::string& fallback) const;
  bool GetBool(const nlohmann::json& object, const std::string& path, const std::string& key, bool fallback) const;
  // An integer value that must fit in int32.
  int32_t GetInt32(const nlohmann::json& value, const std::string& path) const;

 private:
  std::string name_;
  nlohmann::json root_;
};

}  // namespace vllm
