#include "json_fields.h"

#include <limits>

#include "vt/error.h"

namespace vllm {
namespace {

using nlohmann::json;

const char* KindName(JsonKind kind) {
  switch (kind) {
    case JsonKind::kObject: return "an object";
    case JsonKind::kArray: return "an array";
    case JsonKind::kString: return "a string";
    case JsonKind::kInteger: return "an integer";
    case JsonKind::kBool: return "a boolean";
  }
  return "?";
}

std::string Join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

json Parse(const std::string& name, std::string_view text) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw vt::Error(name + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace

bool IsKind(const json& value, JsonKind kind) {
  switch (kind) {
    case JsonKind::kObject: return value.is_object();
    case JsonKind::kArray: return value.is_array();
    case JsonKind::kString: return value.is_string();
    case JsonKind::kInteger: return value.is_number_integer();
    case JsonKind::kBool: return value.is_boolean();
  }
  return false;
}

void FailJsonKey(const std::string& file, const std::string& key_path, const std::string& problem) {
  throw vt::Error(file + ": key '" + key_path + "' " + problem);
}

JsonFields::JsonFields(std::string name, std::string_view text) : JsonFields(name, Parse(name, text)) {}

JsonFields::JsonFields(std::string name, json root) : name_(std::move(name)), root_(std::move(root)) {
  if (!root_.is_object()) throw vt::Error(name_ + ": must hold a JSON object, found " + root_.type_name());
}

void JsonFields::Fail(const std::string& key_path, const std::string& problem) const {
  FailJsonKey(name_, key_path, problem);
}

const json* JsonFields::Find(const json& object, const std::string& key) const {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

const json& JsonFields::Get(const json& object, const std::string& path, const std::string& key,
                            JsonKind kind) const {
  if (!object.is_object()) Fail(path, std::string("must be an object, found ") + object.type_name());
  const json* value = Find(object, key);
  if (value == nullptr) Fail(Join(path, key), "is missing");
  if (!IsKind(*value, kind)) {
    Fail(Join(path, key), std::string("must be ") + KindName(kind) + ", found " + value->type_name());
  }
  return *value;
}

std::string JsonFields::GetString(const json& object, const std::string& path, const std::string& key) const {
  return Get(object, path, key, JsonKind::kString).get<std::string>();
}

std::string JsonFields::GetString(const json& object, const std::string& path, const std::string& key,
                                  const std::string& fallback) const {
  return Find(object, key) ? GetString(object, path, key) : fallback;
}

bool JsonFields::GetBool(const json& object, const std::string& path, const std::string& key, bool fallback) const {
  return Find(object, key) ? Get(object, path, key, JsonKind::kBool).get<bool>() : fallback;
}

int32_t JsonFields::GetInt32(const json& value, const std::string& path) const {
  if (!value.is_number_integer()) Fail(path, std::string("must be an integer, found ") + value.type_name());
  const bool fits = value.is_number_unsigned()
                        ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                        : value.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                              value.get<int64_t>() <= std::numeric_limits<int32_t>::max();
  if (!fits) Fail(path, "must fit in 32 bits, found " + value.dump());
  return value.get<int32_t>();
}

}  // namespace vllm
