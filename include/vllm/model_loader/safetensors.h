// safetensors: reader (zero-copy tensor views into the mapped file), writer, and a
// checkpoint folder's set of files (single model.safetensors or shards listed in
// model.safetensors.index.json).
//
// Layout: u64 little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "BF16", "shape": [r, c],
//    "data_offsets": [begin, end]}, ...}
// then the data; offsets are relative to the data start (8 + N). Parse() checks
// the header length against the file, the JSON, duplicate names, every dtype,
// shape and offset pair (end - begin = elements x element size, inside the file,
// no two tensors overlapping). Errors are vt::Error naming the file and tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/model_loader/mapped_file.h"
#include "vt/tensor.h"

namespace vllm {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;          // as written in the file: "BF16", "F32", "I64", ...
  std::optional<vt::DType> dtype;  // set for F32, F16, BF16, I32, I64
  vt::Shape shape;
  uint64_t begin = 0;  // byte range within the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  static SafetensorsFile Open(const std::string& path);
  static SafetensorsFile Parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const SafetensorsTensorInfo* FindTensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A CPU view into the file; throws for dtypes vt cannot hold (F64, U8, F8_*, ...).
  vt::Tensor Tensor(const SafetensorsTensorInfo& info) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsWriter {
 public:
  // A contiguous CPU tensor of f32, f16, bf16, i32 or i64.
  void AddTensor(const std::string& name, const vt::Tensor& tensor);
  void SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  void Write(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, vt::Tensor>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The safetensors files of an HF checkpoint folder, as one name -> tensor table.
class SafetensorsCheckpoint {
 public:
  // Reads model.safetensors.index.json (sharded) or model.safetensors (single).
  static SafetensorsCheckpoint Open(const std::string& folder);

  std::vector<std::string> names() const;  // sorted
  bool Has(const std::string& name) const { return where_.count(name) > 0; }
  const SafetensorsTensorInfo& Info(const std::string& name) const;
  const std::string& FileOf(const std::string& name) const;  // the shard's path
  vt::Tensor Tensor(const std::string& name) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  struct Location {
    size_t file;
    size_t tensor;
  };
  const Location& Find(const std::string& name) const;

  std::string folder_;
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, Location> where_;
};

}  // namespace vllm
