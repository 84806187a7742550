// A model file's bytes, read-only: an mmapped file, an owned buffer, or a file
// compiled into the binary (embedded_files.h), which Open serves by its name.
//
// Weight tensors are vt::Tensor views into these bytes (no copies); every such
// tensor holds a shared_ptr to its MappedFile, so the mapping lives as long as any
// weight that points into it. The pages are mapped PROT_READ: writing through a
// weight view is a bug and faults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vllm {

class MappedFile {
 public:
  // Maps `path` read-only (a registered embedded file of that name: its bytes, not
  // copied). Throws vt::Error naming the path and the OS error.
  static std::shared_ptr<const MappedFile> Open(const std::string& path);
  // Owns `bytes`; `name` stands in for the path in error messages (fuzzers, tests).
  static std::shared_ptr<const MappedFile> FromBytes(std::vector<uint8_t> bytes, std::string name);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  bool mapped_ = false;  // munmap on destruction
  std::vector<uint8_t> owned_;
};

}  // namespace vllm
