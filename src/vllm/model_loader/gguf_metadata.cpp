#include "vllm/model_loader/gguf_metadata.h"

#include <limits>
#include <sstream>

#include "vt/error.h"

namespace vllm {
namespace {

struct IntRange {
  int64_t lo;
  int64_t hi;
};

IntRange RangeOf(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return {0, 255};
    case GgufType::kInt8: return {-128, 127};
    case GgufType::kUint16: return {0, 65535};
    case GgufType::kInt16: return {-32768, 32767};
    case GgufType::kUint32: return {0, 4294967295LL};
    case GgufType::kInt32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case GgufType::kBool: return {0, 1};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

std::string Article(const std::string& word) {
  return (!word.empty() && std::string("aeiou").find(word[0]) != std::string::npos) ? "an " + word : "a " + word;
}

[[noreturn]] void WrongType(const GgufValue& value, const std::string& wanted) {
  throw vt::Error("is " + value.TypeInWords() + ", expected " + wanted);
}

std::string FormatDouble(double v) {
  std::ostringstream out;
  out.precision(9);
  out << v;
  return out.str();
}

// ids and sizes from ggml's type table (gguf-py constants GGML_QUANT_SIZES).
constexpr int64_t kQK = 256;
const GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4, vt::DType::kF32},
    {1, "F16", 1, 2, vt::DType::kF16},
    {2, "Q4_0", 32, 18, vt::DType::kQ4_0},
    {3, "Q4_1", 32, 20, std::nullopt},
    {6, "Q5_0", 32, 22, std::nullopt},
    {7, "Q5_1", 32, 24, std::nullopt},
    {8, "Q8_0", 32, 34, vt::DType::kQ8_0},
    {9, "Q8_1", 32, 40, std::nullopt},
    {10, "Q2_K", kQK, 2 + 2 + kQK / 16 + kQK / 4, std::nullopt},
    {11, "Q3_K", kQK, 2 + kQK / 4 + kQK / 8 + 12, std::nullopt},
    {12, "Q4_K", kQK, 144, vt::DType::kQ4_K},
    {13, "Q5_K", kQK, 176, vt::DType::kQ5_K},
    {14, "Q6_K", kQK, 210, vt::DType::kQ6_K},
    {15, "Q8_K", kQK, 292, vt::DType::kQ8_K},
    {16, "IQ2_XXS", kQK, 2 + kQK / 4, std::nullopt},
    {17, "IQ2_XS", kQK, 2 + kQK / 4 + kQK / 32, std::nullopt},
    {18, "IQ3_XXS", kQK, 2 + kQK / 4 + kQK / 8, std::nullopt},
    {19, "IQ1_S", kQK, 2 + kQK / 8 + kQK / 16, std::nullopt},
    {20, "IQ4_NL", 32, 18, std::nullopt},
    {21, "IQ3_S", kQK, 2 + kQK / 4 + kQK / 8 + kQK / 32 + 4, std::nullopt},
    {22, "IQ2_S", kQK, 2 + kQK / 4 + kQK / 16, std::nullopt},
    {23, "IQ4_XS", kQK, 2 + 2 + kQK / 2 + kQK / 64, std::nullopt},
    {24, "I8", 1, 1, std::nullopt},
    {25, "I16", 1, 2, std::nullopt},
    {26, "I32", 1, 4, vt::DType::kI32},
    {27, "I64", 1, 8, vt::DType::kI64},
    {28, "F64", 1, 8, std::nullopt},
    {29, "IQ1_M", kQK, kQK / 8 + kQK / 16 + kQK / 32, std::nullopt},
    {30, "BF16", 1, 2, vt::DType::kBF16},
    {34, "TQ1_0", kQK, 2 + 4 * 13, std::nullopt},
    {35, "TQ2_0", kQK, 2 + 64, std::nullopt},
    {39, "MXFP4", 32, 17, std::nullopt},
    {40, "NVFP4", 64, 36, std::nullopt},
    {41, "Q1_0", 128, 18, std::nullopt},
};

}  // namespace

const char* GgufTypeName(GgufType type) {
  static const char* const kNames[kNumGgufTypes] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(type);
  return i < kNumGgufTypes ? kNames[i] : "invalid";
}

bool IsGgufIntegerType(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

// ---- GgufValue -------------------------------------------------------------------

GgufValue GgufValue::Int(GgufType type, int64_t value) {
  if (!IsGgufIntegerType(type) && type != GgufType::kBool) {
    throw vt::Error(std::string("GgufValue::Int: ") + GgufTypeName(type) + " is not an integer type");
  }
  const IntRange range = RangeOf(type);
  if (value < range.lo || value > range.hi) {
    throw vt::Error("GgufValue::Int: " + std::to_string(value) + " does not fit a " + GgufTypeName(type));
  }
  GgufValue v;
  v.type_ = type;
  v.int_ = value;
  return v;
}

GgufValue GgufValue::Uint64(uint64_t value) {
  GgufValue v;
  v.type_ = GgufType::kUint64;
  v.int_ = static_cast<int64_t>(value);
  return v;
}

GgufValue GgufValue::Float(GgufType type, double value) {
  if (type != GgufType::kFloat32 && type != GgufType::kFloat64) {
    throw vt::Error(std::string("GgufValue::Float: ") + GgufTypeName(type) + " is not a float type");
  }
  GgufValue v;
  v.type_ = type;
  v.float_ = type == GgufType::kFloat32 ? static_cast<double>(static_cast<float>(value)) : value;
  return v;
}

GgufValue GgufValue::Bool(bool value) { return Int(GgufType::kBool, value ? 1 : 0); }

GgufValue GgufValue::String(std::string value) {
  GgufValue v;
  v.type_ = GgufType::kString;
  v.string_ = std::move(value);
  return v;
}

GgufValue GgufValue::IntArray(GgufType element_type, std::vector<int64_t> values) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  for (int64_t x : values) Int(element_type, x);  // range check (u64 elements take any bit pattern)
  v.ints_ = std::move(values);
  return v;
}

GgufValue GgufValue::FloatArray(GgufType element_type, std::vector<double> values) {
  if (element_type != GgufType::kFloat32 && element_type != GgufType::kFloat64) {
    throw vt::Error(std::string("GgufValue::FloatArray: ") + GgufTypeName(element_type) + " is not a float type");
  }
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  if (element_type == GgufType::kFloat32) {
    for (double& x : values) x = static_cast<float>(x);
  }
  v.floats_ = std::move(values);
  return v;
}

GgufValue GgufValue::StringArray(std::vector<std::string> values) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = GgufType::kString;
  v.strings_ = std::move(values);
  return v;
}

GgufValue GgufValue::ArrayOfArrays(std::vector<GgufValue> values) {
  for (const GgufValue& e : values) {
    if (!e.is_array()) throw vt::Error("GgufValue::ArrayOfArrays: an element is " + e.TypeInWords());
  }
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = GgufType::kArray;
  v.arrays_ = std::move(values);
  return v;
}

int64_t GgufValue::AsInt() const {
  if (!IsGgufIntegerType(type_) && type_ != GgufType::kBool) WrongType(*this, "an integer");
  if (type_ == GgufType::kUint64 && int_ < 0) {
    throw vt::Error("is the u64 " + std::to_string(static_cast<uint64_t>(int_)) + ", beyond the largest supported " +
                    std::to_string(std::numeric_limits<int64_t>::max()));
  }
  return int_;
}

uint64_t GgufValue::AsUint64() const {
  if (type_ == GgufType::kUint64) return static_cast<uint64_t>(int_);
  const int64_t v = AsInt();
  if (v < 0) throw vt::Error("is the negative " + std::string(GgufTypeName(type_)) + " " + std::to_string(v));
  return static_cast<uint64_t>(v);
}

double GgufValue::AsFloat() const {
  if (type_ == GgufType::kFloat32 || type_ == GgufType::kFloat64) return float_;
  if (IsGgufIntegerType(type_)) return static_cast<double>(AsInt());
  WrongType(*this, "a number");
}

bool GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) WrongType(*this, "a bool");
  return int_ != 0;
}

const std::string& GgufValue::AsString() const {
  if (type_ != GgufType::kString) WrongType(*this, "a string");
  return string_;
}

size_t GgufValue::ArraySize() const {
  if (!is_array()) WrongType(*this, "an array");
  switch (element_type_) {
    case GgufType::kString: return strings_.size();
    case GgufType::kArray: return arrays_.size();
    case GgufType::kFloat32:
    case GgufType::kFloat64: return floats_.size();
    default: return ints_.size();
  }
}

std::vector<int64_t> GgufValue::AsIntArray() const {
  if (!is_array() || !(IsGgufIntegerType(element_type_) || element_type_ == GgufType::kBool)) {
    WrongType(*this, "an array of integers");
  }
  if (element_type_ == GgufType::kUint64) {
    for (int64_t x : ints_) {
      if (x < 0) throw vt::Error("holds a u64 element beyond the largest supported integer");
    }
  }
  return ints_;
}

std::vector<double> GgufValue::AsFloatArray() const {
  if (is_array() && (element_type_ == GgufType::kFloat32 || element_type_ == GgufType::kFloat64)) return floats_;
  if (is_array() && IsGgufIntegerType(element_type_)) {
    std::vector<int64_t> ints = AsIntArray();
    return std::vector<double>(ints.begin(), ints.end());
  }
  WrongType(*this, "an array of numbers");
}

const std::vector<std::string>& GgufValue::AsStringArray() const {
  if (!is_array() || element_type_ != GgufType::kString) WrongType(*this, "an array of strings");
  return strings_;
}

const std::vector<GgufValue>& GgufValue::AsArrayOfArrays() const {
  if (!is_array() || element_type_ != GgufType::kArray) WrongType(*this, "an array of arrays");
  return arrays_;
}

std::string GgufValue::TypeInWords() const {
  if (!is_array()) return Article(GgufTypeName(type_));
  if (element_type_ == GgufType::kString) return "an array of strings";
  if (element_type_ == GgufType::kArray) return "an array of arrays";
  return std::string("an array of ") + GgufTypeName(element_type_);
}

std::string GgufValue::ToString(size_t max_elements) const {
  std::ostringstream out;
  if (!is_array()) {
    out << GgufTypeName(type_) << " ";
    if (type_ == GgufType::kString) out << '"' << string_ << '"';
    else if (type_ == GgufType::kBool) out << (int_ ? "true" : "false");
    else if (type_ == GgufType::kUint64) out << static_cast<uint64_t>(int_);
    else if (type_ == GgufType::kFloat32 || type_ == GgufType::kFloat64) out << FormatDouble(float_);
    else out << int_;
    return out.str();
  }
  const size_t n = ArraySize();
  out << "array of " << n << " " << GgufTypeName(element_type_) << " [";
  for (size_t i = 0; i < n && i < max_elements; ++i) {
    out << (i ? ", " : "");
    if (element_type_ == GgufType::kString) out << '"' << strings_[i] << '"';
    else if (element_type_ == GgufType::kArray) out << arrays_[i].ToString(max_elements);
    else if (element_type_ == GgufType::kFloat32 || element_type_ == GgufType::kFloat64) out << FormatDouble(floats_[i]);
    else if (element_type_ == GgufType::kUint64) out << static_cast<uint64_t>(ints_[i]);
    else out << ints_[i];
  }
  if (n > max_elements) out << ", ...";
  out << "]";
  return out.str();
}

// ---- GgufMetadata ----------------------------------------------------------------

void GgufMetadata::Add(const std::string& key, GgufValue value) {
  if (Has(key)) throw vt::Error(source_ + ": metadata key '" + key + "' appears twice");
  index_[key] = entries_.size();
  entries_.emplace_back(key, std::move(value));
}

void GgufMetadata::Set(const std::string& key, GgufValue value) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    Add(key, std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
}

void GgufMetadata::Remove(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].first] = i;
}

const GgufValue* GgufMetadata::Find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const GgufValue& GgufMetadata::Get(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) throw vt::Error(source_ + ": missing metadata key '" + key + "'");
  return *v;
}

template <typename F>
auto GgufMetadata::Typed(const std::string& key, F&& get) const {
  const GgufValue& v = Get(key);
  try {
    return get(v);
  } catch (const vt::Error& e) {
    throw vt::Error(source_ + ": metadata key '" + key + "' " + e.what());
  }
}

int64_t GgufMetadata::GetInt(const std::string& key) const {
  return Typed(key, [](const GgufValue& v) { return v.AsInt(); });
}
double GgufMetadata::GetFloat(const std::string& key) const {
  return Typed(key, [](const GgufValue& v) { return v.AsFloat(); });
}
bool GgufMetadata::GetBool(const std::string& key) const {
  return Typed(key, [](const GgufValue& v) { return v.AsBool(); });
}
std::string GgufMetadata::GetString(const std::string& key) const {
  return Typed(key, [](const GgufValue& v) { return v.AsString(); });
}
std::vector<int64_t> GgufMetadata::GetIntArray(const std::string& key) const {
  return Typed(key, [](const GgufValue& v) { return v.AsIntArray(); });
}

std::optional<int64_t> GgufMetadata::FindInt(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return GetInt(key);
}
std::optional<double> GgufMetadata::FindFloat(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return GetFloat(key);
}
std::optional<bool> GgufMetadata::FindBool(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return GetBool(key);
}
std::optional<std::string> GgufMetadata::FindString(const std::string& key) const {
  if (!Has(key)) return std::nullopt;
  return GetString(key);
}

// ---- ggml types --------------------------------------------------------------------

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (info.id == id) return &info;
  }
  return nullptr;
}

uint32_t GgmlTypeId(vt::DType dtype) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (info.dtype == dtype) return info.id;
  }
  throw vt::Error(std::string("GGUF has no tensor type for vt dtype ") + vt::DTypeName(dtype));
}

std::string SupportedGgmlTypeNames() {
  std::string names;
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (!info.dtype) continue;
    names += (names.empty() ? "" : ", ") + std::string(info.name);
  }
  return names;
}

}  // namespace vllm
