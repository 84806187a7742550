// GGUF reader: parses and validates a GGUF v2/v3 file, then hands out its tensors
// as zero-copy vt::Tensor views into the mapped file.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 key/value
// count, the key/value pairs, the tensor infos (name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset), padding to `general.alignment` (default 32), then
// the tensor data; each tensor's offset is relative to the data start and a
// multiple of the alignment. Shapes: ne[0] is the contiguous dim, so a GGUF
// tensor ne={in, out} is the row-major vt shape [out, in] (Shape() reverses ne).
//
// Parse() checks everything before anything is used: magic, version, counts
// against the bytes that remain, string lengths, value types, array nesting,
// duplicate keys and tensor names, dims (at most 4, whole blocks in ne[0], no
// overflow), type ids, offsets (aligned, inside the file, not overlapping). Every
// failure is a vt::Error naming the file, the key or tensor, and expected vs found.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/model_loader/gguf_metadata.h"
#include "vllm/model_loader/mapped_file.h"
#include "vt/tensor.h"

namespace vllm {

inline constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ne;  // GGUF order: ne[0] contiguous
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;

  vt::Shape Shape() const { return vt::Shape(ne.rbegin(), ne.rend()); }  // row-major
  int64_t NumElements() const;
  const GgmlTypeInfo& Type() const;  // always known after Parse()
};

class GgufFile {
 public:
  static GgufFile Open(const std::string& path, FileResidency residency = FileResidency::kMapped);
  static GgufFile Parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const GgufMetadata& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // The tensor as a CPU view into the file (copied only if its address is not
  // aligned to its element size). Throws for ggml types vt has no dtype for.
  vt::Tensor Tensor(const GgufTensorInfo& info) const;
  vt::Tensor Tensor(const std::string& name) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  GgufMetadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// A tensor view over bytes of `file` (shared by the GGUF and safetensors readers):
// zero-copy when `data` is aligned to the dtype's element alignment, else a copy.
vt::Tensor TensorOverFileBytes(const std::shared_ptr<const MappedFile>& file, const uint8_t* data,
                               const vt::Shape& shape, vt::DType dtype);

}  // namespace vllm
