// GGUF metadata: typed values, the key/value table, and the ggml tensor types.
//
// GGUF (llama.cpp's model file) stores a list of key/value pairs whose values are
// one of 13 types (ints of 8..64 bits, f32/f64, bool, string, and arrays of any of
// those, arrays included). GgufValue keeps the exact type so a file written back
// says what it said; the accessors convert where it is lossless (AsInt on any
// integer type, AsFloat on floats and integers) and throw vt::Error otherwise.
// GgufMetadata adds the key and the file to every error:
//   "m.gguf: metadata key 'qwen35.block_count' is a string, expected an integer".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vt/dtype.h"

namespace vllm {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kNumGgufTypes = 13;

const char* GgufTypeName(GgufType type);  // "u32", "string", "array", ...
bool IsGgufIntegerType(GgufType type);    // the eight integer types

class GgufValue {
 public:
  GgufValue() = default;
  // Integer of the given integer type; throws if `value` does not fit it.
  static GgufValue Int(GgufType type, int64_t value);
  static GgufValue Uint64(uint64_t value);
  static GgufValue U32(uint32_t value) { return Int(GgufType::kUint32, value); }
  static GgufValue I32(int32_t value) { return Int(GgufType::kInt32, value); }
  static GgufValue F32(float value) { return Float(GgufType::kFloat32, value); }
  static GgufValue Float(GgufType type, double value);  // kFloat32 or kFloat64
  static GgufValue Bool(bool value);
  static GgufValue String(std::string value);
  // Arrays: integers (any integer type or bool), floats, strings, or arrays.
  static GgufValue IntArray(GgufType element_type, std::vector<int64_t> values);
  static GgufValue FloatArray(GgufType element_type, std::vector<double> values);
  static GgufValue StringArray(std::vector<std::string> values);
  static GgufValue ArrayOfArrays(std::vector<GgufValue> values);

  GgufType type() const { return type_; }
  GgufType element_type() const { return element_type_; }  // arrays only
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalar accessors. Errors say what the value is and what was asked for.
  int64_t AsInt() const;    // any integer type (u64 above 2^63-1 throws) or bool
  uint64_t AsUint64() const;
  double AsFloat() const;   // f32/f64, or an integer
  bool AsBool() const;
  const std::string& AsString() const;

  // Array accessors.
  size_t ArraySize() const;
  std::vector<int64_t> AsIntArray() const;   // integer or bool elements
  std::vector<double> AsFloatArray() const;  // float or integer elements
  const std::vector<std::string>& AsStringArray() const;
  const std::vector<GgufValue>& AsArrayOfArrays() const;
  // Integer/bool elements as stored (u64 elements keep their bit pattern).
  const std::vector<int64_t>& RawIntArray() const { return ints_; }

  // "u32 64", "string \"qwen35\"", "array of 4 i32 [11, 11, 10, 0]", long arrays
  // abbreviated after `max_elements`.
  std::string ToString(size_t max_elements = 8) const;
  // The value's type in words, e.g. "a u32", "an array of strings".
  std::string TypeInWords() const;

  bool operator==(const GgufValue& other) const = default;

 private:
  GgufType type_ = GgufType::kUint8;
  GgufType element_type_ = GgufType::kUint8;
  int64_t int_ = 0;  // integers and bool; u64 stored as its bit pattern
  double float_ = 0;
  std::string string_;
  std::vector<int64_t> ints_;
  std::vector<double> floats_;
  std::vector<std::string> strings_;
  std::vector<GgufValue> arrays_;
};

// Ordered key -> value table; `source` (the file) prefixes every error message.
class GgufMetadata {
 public:
  explicit GgufMetadata(std::string source = "") : source_(std::move(source)) {}

  // Appends a new key; throws if it exists (files must not repeat keys).
  void Add(const std::string& key, GgufValue value);
  // Adds or replaces.
  void Set(const std::string& key, GgufValue value);
  void Remove(const std::string& key);

  bool Has(const std::string& key) const { return index_.count(key) > 0; }
  const GgufValue* Find(const std::string& key) const;
  const GgufValue& Get(const std::string& key) const;  // throws "missing metadata key"

  // Typed getters: throw naming the file and key when missing or of the wrong type.
  int64_t GetInt(const std::string& key) const;
  double GetFloat(const std::string& key) const;
  bool GetBool(const std::string& key) const;
  std::string GetString(const std::string& key) const;
  std::vector<int64_t> GetIntArray(const std::string& key) const;
  // As above, but std::nullopt when the key is absent (still throws on a wrong type).
  std::optional<int64_t> FindInt(const std::string& key) const;
  std::optional<double> FindFloat(const std::string& key) const;
  std::optional<bool> FindBool(const std::string& key) const;
  std::optional<std::string> FindString(const std::string& key) const;

  const std::vector<std::pair<std::string, GgufValue>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  const std::string& source() const { return source_; }
  void set_source(std::string source) { source_ = std::move(source); }

 private:
  template <typename F>
  auto Typed(const std::string& key, F&& get) const;

  std::string source_;
  std::vector<std::pair<std::string, GgufValue>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// ---- ggml tensor types ---------------------------------------------------------

// Every tensor type id ggml has defined (so a file's byte sizes can be checked even
// for types vllm-cpp cannot compute with). `dtype` is set for the ones vt holds.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;     // "F32", "Q4_K", "IQ2_XXS", ...
  int64_t block_elems;  // values per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
  std::optional<vt::DType> dtype;
};

const GgmlTypeInfo* FindGgmlType(uint32_t id);  // nullptr for ids ggml never defined
// The ggml id of a vt dtype (F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, ... BF16 30).
uint32_t GgmlTypeId(vt::DType dtype);
// "F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K" for error messages.
std::string SupportedGgmlTypeNames();

}  // namespace vllm
