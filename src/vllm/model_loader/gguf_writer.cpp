#include "vllm/model_loader/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <fstream>

#include "vt/error.h"

namespace vllm {
namespace {

class BinaryFile {
 public:
  explicit BinaryFile(const std::string& path) : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
    if (!out_) throw vt::Error(path + ": cannot open for writing");
  }

  template <typename T>
  void Put(T v) {
    Bytes(&v, sizeof(T));
  }
  void Bytes(const void* p, size_t n) {
    out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    written_ += n;
    if (!out_) throw vt::Error(path_ + ": write failed after " + std::to_string(written_) + " bytes");
  }
  void String(const std::string& s) {
    Put<uint64_t>(s.size());
    Bytes(s.data(), s.size());
  }
  void PadTo(uint64_t alignment) {
    static const char kZeros[64] = {};
    while (written_ % alignment != 0) Bytes(kZeros, std::min<uint64_t>(64, alignment - written_ % alignment));
  }
  uint64_t written() const { return written_; }
  void Close() {
    out_.close();
    if (!out_) throw vt::Error(path_ + ": closing the file failed");
  }

 private:
  std::string path_;
  std::ofstream out_;
  uint64_t written_ = 0;
};

// Integers (and bools) as raw 64-bit values: a u64 keeps its bit pattern.
void PutInt(BinaryFile& f, GgufType type, int64_t raw) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kBool: f.Put<uint8_t>(static_cast<uint8_t>(raw)); break;
    case GgufType::kInt8: f.Put<int8_t>(static_cast<int8_t>(raw)); break;
    case GgufType::kUint16: f.Put<uint16_t>(static_cast<uint16_t>(raw)); break;
    case GgufType::kInt16: f.Put<int16_t>(static_cast<int16_t>(raw)); break;
    case GgufType::kUint32: f.Put<uint32_t>(static_cast<uint32_t>(raw)); break;
    case GgufType::kInt32: f.Put<int32_t>(static_cast<int32_t>(raw)); break;
    default: f.Put<int64_t>(raw); break;
  }
}

void PutScalar(BinaryFile& f, const GgufValue& v) {
  switch (v.type()) {
    case GgufType::kFloat32: f.Put<float>(static_cast<float>(v.AsFloat())); break;
    case GgufType::kFloat64: f.Put<double>(v.AsFloat()); break;
    case GgufType::kString: f.String(v.AsString()); break;
    case GgufType::kUint64: f.Put<uint64_t>(v.AsUint64()); break;
    default: PutInt(f, v.type(), v.AsInt()); break;
  }
}

void PutValue(BinaryFile& f, const GgufValue& v) {
  if (!v.is_array()) {
    PutScalar(f, v);
    return;
  }
  const GgufType element = v.element_type();
  f.Put<uint32_t>(static_cast<uint32_t>(element));
  f.Put<uint64_t>(v.ArraySize());
  switch (element) {
    case GgufType::kString:
      for (const std::string& s : v.AsStringArray()) f.String(s);
      break;
    case GgufType::kArray:
      for (const GgufValue& a : v.AsArrayOfArrays()) PutValue(f, a);  // no type tag: the element type says it
      break;
    case GgufType::kFloat32:
      for (double x : v.AsFloatArray()) f.Put<float>(static_cast<float>(x));
      break;
    case GgufType::kFloat64:
      for (double x : v.AsFloatArray()) f.Put<double>(x);
      break;
    default:
      for (int64_t x : v.RawIntArray()) PutInt(f, element, x);
  }
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment), metadata_("gguf writer") {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw vt::Error("GgufWriter: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  if (alignment != 32) metadata_.Set("general.alignment", GgufValue::U32(alignment));
}

void GgufWriter::AddTensor(const std::string& name, const vt::Tensor& tensor) {
  if (!tensor.defined() || tensor.device() != vt::kCpu || !tensor.is_contiguous()) {
    throw vt::Error("GgufWriter: tensor '" + name + "' must be a contiguous CPU tensor, got " + tensor.Describe());
  }
  AddTensor(name, tensor.dtype(), tensor.shape(), [tensor] { return tensor; });
}

void GgufWriter::AddTensor(const std::string& name, vt::DType dtype, const vt::Shape& shape,
                           std::function<vt::Tensor()> produce) {
  if (HasTensor(name)) throw vt::Error("GgufWriter: tensor '" + name + "' added twice");
  if (shape.empty() || shape.size() > 4) {
    throw vt::Error("GgufWriter: tensor '" + name + "' has " + std::to_string(shape.size()) +
                    " dims; GGUF holds 1 to 4");
  }
  GgmlTypeId(dtype);  // throws for dtypes GGUF cannot hold
  if (shape.back() % vt::Info(dtype).block_elems != 0) {
    throw vt::Error("GgufWriter: tensor '" + name + "' of " + vt::DTypeName(dtype) + " has shape " +
                    vt::ShapeToString(shape) + ", not whole blocks in its last dim");
  }
  entries_.push_back({{name, dtype, shape}, std::move(produce)});
}

void GgufWriter::RemoveTensor(const std::string& name) {
  std::erase_if(entries_, [&](const Entry& e) { return e.planned.name == name; });
}

bool GgufWriter::HasTensor(const std::string& name) const {
  for (const Entry& e : entries_) {
    if (e.planned.name == name) return true;
  }
  return false;
}

std::vector<GgufWriter::PlannedTensor> GgufWriter::tensors() const {
  std::vector<PlannedTensor> out;
  for (const Entry& e : entries_) out.push_back(e.planned);
  return out;
}

void GgufWriter::Write(const std::string& path) const {
  const std::string temp = path + ".partial";
  try {
    BinaryFile f(temp);
    f.Bytes("GGUF", 4);
    f.Put<uint32_t>(3);
    f.Put<uint64_t>(entries_.size());
    f.Put<uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_.entries()) {
      f.String(key);
      f.Put<uint32_t>(static_cast<uint32_t>(value.type()));
      PutValue(f, value);
    }
    uint64_t offset = 0;
    for (const Entry& e : entries_) {
      f.String(e.planned.name);
      f.Put<uint32_t>(static_cast<uint32_t>(e.planned.shape.size()));
      for (auto it = e.planned.shape.rbegin(); it != e.planned.shape.rend(); ++it) f.Put<uint64_t>(*it);
      f.Put<uint32_t>(GgmlTypeId(e.planned.dtype));
      f.Put<uint64_t>(offset);
      offset = AlignUp(offset + vt::BytesFor(e.planned.dtype, vt::NumElements(e.planned.shape)), alignment_);
    }
    f.PadTo(alignment_);
    for (const Entry& e : entries_) {
      vt::Tensor t = e.produce();
      if (!t.defined() || t.dtype() != e.planned.dtype || t.shape() != e.planned.shape || !t.is_contiguous() ||
          t.device() != vt::kCpu) {
        throw vt::Error("GgufWriter: tensor '" + e.planned.name + "' was planned as " + vt::DTypeName(e.planned.dtype) +
                        " " + vt::ShapeToString(e.planned.shape) + " but produced " + t.Describe());
      }
      f.Bytes(t.data(), static_cast<size_t>(t.nbytes()));
      f.PadTo(alignment_);
    }
    f.Close();
  } catch (...) {
    std::remove(temp.c_str());
    throw;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw vt::Error(path + ": cannot rename the written file into place: " + std::strerror(errno));
  }
}

}  // namespace vllm
