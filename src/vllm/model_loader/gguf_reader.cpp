// GGUF parsing and validation (see gguf_reader.h for the layout and the checks).
#include "vllm/model_loader/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "byte_reader.h"
#include "vt/error.h"

namespace vllm {
namespace {

using detail::ByteReader;

constexpr int kMaxArrayNesting = 8;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Fewest bytes one entry can occupy; a count that cannot fit in the rest of the file is absurd.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;       // key length, type, a u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, one ne, type, offset

uint64_t AlignUp(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

std::string Hex(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

uint64_t MinValueBytes(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
    default: return 8;
  }
}

void CheckCount(const ByteReader& r, uint64_t count, uint64_t min_bytes, const std::string& what) {
  if (count > r.remaining() / min_bytes) {
    throw vt::Error(r.source() + ": " + what + " is " + std::to_string(count) + ", impossible in a file with " +
                    std::to_string(r.remaining()) + " bytes left (each needs at least " + std::to_string(min_bytes) +
                    " bytes)");
  }
}

GgufType ReadType(ByteReader& r, const std::string& what) {
  const auto id = r.Read<uint32_t>(what);
  if (id >= kNumGgufTypes) {
    throw vt::Error(r.source() + ": " + what + " is " + std::to_string(id) + ", not a GGUF value type (0..12)");
  }
  return static_cast<GgufType>(id);
}

GgufValue ReadScalar(ByteReader& r, GgufType type, const std::string& what) {
  switch (type) {
    case GgufType::kUint8: return GgufValue::Int(type, r.Read<uint8_t>(what));
    case GgufType::kInt8: return GgufValue::Int(type, r.Read<int8_t>(what));
    case GgufType::kUint16: return GgufValue::Int(type, r.Read<uint16_t>(what));
    case GgufType::kInt16: return GgufValue::Int(type, r.Read<int16_t>(what));
    case GgufType::kUint32: return GgufValue::Int(type, r.Read<uint32_t>(what));
    case GgufType::kInt32: return GgufValue::Int(type, r.Read<int32_t>(what));
    case GgufType::kUint64: return GgufValue::Uint64(r.Read<uint64_t>(what));
    case GgufType::kInt64: return GgufValue::Int(type, r.Read<int64_t>(what));
    case GgufType::kFloat32: return GgufValue::Float(type, r.Read<float>(what));
    case GgufType::kFloat64: return GgufValue::Float(type, r.Read<double>(what));
    case GgufType::kBool: {
      const auto b = r.Read<uint8_t>(what);
      if (b > 1) throw vt::Error(r.source() + ": " + what + " is a bool stored as " + std::to_string(b) + ", expected 0 or 1");
      return GgufValue::Bool(b != 0);
    }
    case GgufType::kString: return GgufValue::String(r.ReadString(what));
    default: break;
  }
  throw vt::Error(r.source() + ": " + what + " has unreadable type " + GgufTypeName(type));
}

GgufValue ReadValue(ByteReader& r, GgufType type, int depth, const std::string& what);

GgufValue ReadArray(ByteReader& r, int depth, const std::string& what) {
  if (depth >= kMaxArrayNesting) {
    throw vt::Error(r.source() + ": " + what + " nests arrays deeper than " + std::to_string(kMaxArrayNesting) + " levels");
  }
  const GgufType element = ReadType(r, "the element type of " + what);
  const uint64_t count = r.Read<uint64_t>("the element count of " + what);
  CheckCount(r, count, MinValueBytes(element), "the element count of " + what);
  const std::string element_what = "an element of " + what;
  if (element == GgufType::kString) {
    std::vector<std::string> strings;
    strings.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) strings.push_back(r.ReadString(element_what));
    return GgufValue::StringArray(std::move(strings));
  }
  if (element == GgufType::kArray) {
    std::vector<GgufValue> arrays;
    arrays.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) arrays.push_back(ReadValue(r, element, depth + 1, element_what));
    return GgufValue::ArrayOfArrays(std::move(arrays));
  }
  if (element == GgufType::kFloat32 || element == GgufType::kFloat64) {
    std::vector<double> floats(static_cast<size_t>(count));
    for (double& f : floats) f = ReadScalar(r, element, element_what).AsFloat();
    return GgufValue::FloatArray(element, std::move(floats));
  }
  std::vector<int64_t> ints(static_cast<size_t>(count));
  for (int64_t& v : ints) {
    GgufValue scalar = ReadScalar(r, element, element_what);
    v = element == GgufType::kUint64 ? static_cast<int64_t>(scalar.AsUint64()) : scalar.AsInt();
  }
  return GgufValue::IntArray(element, std::move(ints));
}

GgufValue ReadValue(ByteReader& r, GgufType type, int depth, const std::string& what) {
  return type == GgufType::kArray ? ReadArray(r, depth, what) : ReadScalar(r, type, what);
}

uint32_t ReadVersion(ByteReader& r) {
  const auto magic_word = r.Read<uint32_t>("the magic number");
  uint8_t magic[4];
  std::memcpy(magic, &magic_word, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    throw vt::Error(r.source() + ": not a GGUF file: expected magic \"GGUF\" (47 47 55 46), found " + Hex(magic, 4));
  }
  const auto version = r.Read<uint32_t>("the version");
  if (version == 2 || version == 3) return version;
  const uint32_t swapped = __builtin_bswap32(version);
  if (swapped == 2 || swapped == 3) {
    throw vt::Error(r.source() + ": big-endian GGUF files are not supported (version field reads " +
                    std::to_string(version) + "; expected 2 or 3 little-endian)");
  }
  throw vt::Error(r.source() + ": unsupported GGUF version " + std::to_string(version) + " (expected 2 or 3)");
}

void ReadMetadata(ByteReader& r, uint64_t count, GgufMetadata& metadata) {
  CheckCount(r, count, kMinKeyValueBytes, "the metadata key/value count");
  for (uint64_t i = 0; i < count; ++i) {
    const std::string entry = "metadata entry " + std::to_string(i);
    std::string key = r.ReadString("the key of " + entry);
    const std::string what = "the value of metadata key '" + key + "'";
    const GgufType type = ReadType(r, "the type of metadata key '" + key + "'");
    metadata.Add(key, ReadValue(r, type, 0, what));
  }
}

uint64_t ReadAlignment(const GgufMetadata& metadata) {
  const GgufValue* v = metadata.Find("general.alignment");
  if (!v) return kGgufDefaultAlignment;
  if (v->type() != GgufType::kUint32) {
    throw vt::Error(metadata.source() + ": metadata key 'general.alignment' is " + v->TypeInWords() + ", expected a u32");
  }
  const int64_t a = v->AsInt();
  if (a == 0 || (a & (a - 1)) != 0) {
    throw vt::Error(metadata.source() + ": metadata key 'general.alignment' is " + std::to_string(a) +
                    ", expected a power of two");
  }
  return static_cast<uint64_t>(a);
}

GgufTensorInfo ReadTensorInfo(ByteReader& r, uint64_t index, uint64_t alignment) {
  GgufTensorInfo t;
  t.name = r.ReadString("the name of tensor " + std::to_string(index));
  const std::string what = "tensor '" + t.name + "'";
  const auto n_dims = r.Read<uint32_t>("the dim count of " + what);
  if (n_dims < 1 || n_dims > kMaxDims) {
    throw vt::Error(r.source() + ": " + what + " has " + std::to_string(n_dims) + " dims, expected 1 to 4");
  }
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const auto ne = r.Read<uint64_t>("ne[" + std::to_string(d) + "] of " + what);
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<int64_t>(ne), &numel)) {
      throw vt::Error(r.source() + ": " + what + " has an absurd size: ne[" + std::to_string(d) + "] = " +
                      std::to_string(ne) + " overflows the element count");
    }
    t.ne.push_back(static_cast<int64_t>(ne));
  }
  t.ggml_type = r.Read<uint32_t>("the type of " + what);
  const GgmlTypeInfo* type = FindGgmlType(t.ggml_type);
  if (!type) {
    throw vt::Error(r.source() + ": " + what + " has tensor type " + std::to_string(t.ggml_type) +
                    ", which is not a ggml type");
  }
  if (t.ne[0] % type->block_elems != 0) {
    throw vt::Error(r.source() + ": " + what + " is " + type->name + " with ne[0] = " + std::to_string(t.ne[0]) +
                    ", not a whole number of " + std::to_string(type->block_elems) + "-value blocks");
  }
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(numel / type->block_elems, type->block_bytes, &nbytes)) {
    throw vt::Error(r.source() + ": " + what + " has an absurd byte size (" + std::to_string(numel) + " values)");
  }
  t.nbytes = static_cast<uint64_t>(nbytes);
  t.offset = r.Read<uint64_t>("the data offset of " + what);
  if (t.offset % alignment != 0) {
    throw vt::Error(r.source() + ": " + what + " has data offset " + std::to_string(t.offset) +
                    ", not a multiple of the alignment " + std::to_string(alignment));
  }
  return t;
}

// Every tensor inside the data section, no two sharing a byte.
void CheckTensorData(const std::string& source, const std::vector<GgufTensorInfo>& tensors, uint64_t data_offset,
                     uint64_t file_size) {
  if (tensors.empty()) return;
  if (data_offset > file_size) {
    throw vt::Error(source + ": truncated file: the tensor data should start at offset " + std::to_string(data_offset) +
                    ", but the file has " + std::to_string(file_size) + " bytes");
  }
  const uint64_t data_size = file_size - data_offset;
  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& t : tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      throw vt::Error(source + ": tensor '" + t.name + "' spans data bytes [" + std::to_string(t.offset) + ", " +
                      std::to_string(t.offset + t.nbytes) + "), outside the " + std::to_string(data_size) +
                      "-byte data section (file truncated or offset wrong)");
    }
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = *order[i - 1];
    if (prev.offset + prev.nbytes > order[i]->offset) {
      throw vt::Error(source + ": tensors '" + prev.name + "' and '" + order[i]->name + "' overlap (data bytes [" +
                      std::to_string(prev.offset) + ", " + std::to_string(prev.offset + prev.nbytes) + ") and [" +
                      std::to_string(order[i]->offset) + ", ...))");
    }
  }
}

}  // namespace

int64_t GgufTensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

const GgmlTypeInfo& GgufTensorInfo::Type() const {
  const GgmlTypeInfo* info = FindGgmlType(ggml_type);
  if (!info) throw vt::Error("tensor '" + name + "' has unknown ggml type " + std::to_string(ggml_type));
  return *info;
}

GgufFile GgufFile::Open(const std::string& path, FileResidency residency) {
  return Parse(MappedFile::Open(path, residency));
}

GgufFile GgufFile::Parse(std::shared_ptr<const MappedFile> file) {
  GgufFile g;
  g.file_ = std::move(file);
  g.metadata_.set_source(g.file_->path());
  ByteReader r(g.file_->data(), g.file_->size(), g.file_->path());
  g.version_ = ReadVersion(r);
  const auto tensor_count = r.Read<uint64_t>("the tensor count");
  const auto kv_count = r.Read<uint64_t>("the metadata key/value count");
  ReadMetadata(r, kv_count, g.metadata_);
  g.alignment_ = ReadAlignment(g.metadata_);
  CheckCount(r, tensor_count, kMinTensorInfoBytes, "the tensor count");
  g.tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info = ReadTensorInfo(r, i, g.alignment_);
    if (!g.tensor_index_.emplace(info.name, g.tensors_.size()).second) {
      throw vt::Error(g.path() + ": tensor '" + info.name + "' appears twice");
    }
    g.tensors_.push_back(std::move(info));
  }
  g.data_offset_ = AlignUp(r.pos(), g.alignment_);
  CheckTensorData(g.path(), g.tensors_, g.data_offset_, g.file_->size());
  return g;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

vt::Tensor GgufFile::Tensor(const std::string& name) const {
  const GgufTensorInfo* info = FindTensor(name);
  if (!info) throw vt::Error(path() + ": no tensor named '" + name + "'");
  return Tensor(*info);
}

vt::Tensor GgufFile::Tensor(const GgufTensorInfo& info) const {
  const GgmlTypeInfo& type = info.Type();
  if (!type.dtype) {
    throw vt::Error(path() + ": tensor '" + info.name + "' has ggml type " + type.name +
                    ", which vllm-cpp does not support (supported: " + SupportedGgmlTypeNames() + ")");
  }
  return TensorOverFileBytes(file_, file_->data() + data_offset_ + info.offset, info.Shape(), *type.dtype);
}

vt::Tensor TensorOverFileBytes(const std::shared_ptr<const MappedFile>& file, const uint8_t* data,
                               const vt::Shape& shape, vt::DType dtype) {
  const vt::DTypeInfo& info = vt::Info(dtype);
  // Plain types are read as arrays of their element type; block types start with
  // an f16 scale (Q8_K: an f32 one).
  const uintptr_t alignment = !info.is_quantized ? info.block_bytes : dtype == vt::DType::kQ8_K ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(data) % alignment == 0) {
    return vt::Tensor::FromExternal(const_cast<uint8_t*>(data), shape, dtype, vt::kCpu,
                                    std::const_pointer_cast<MappedFile>(file));
  }
  vt::Tensor copy = vt::Tensor::Empty(shape, dtype, vt::kCpu);
  if (copy.nbytes() > 0) std::memcpy(copy.data(), data, static_cast<size_t>(copy.nbytes()));
  return copy;
}

}  // namespace vllm
