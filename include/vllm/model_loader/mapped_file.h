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

// Where a file's bytes live once opened.
enum class FileResidency {
  kMapped,  // mmap of the file: pages shared with the page cache, read on first touch
  // Read into anonymous memory on 2 MiB-aligned transparent huge pages (madvise), for
  // a CPU engine that streams every weight per decoded token. The page cache's 4 KiB
  // pages of a file lie scattered in physical memory; on a 2-core Xeon VM a 2-thread
  // AVX-512 read of the 0.81 GB Qwen3.5-0.8B Q8_0 GGUF ran at 18.1 GB/s from the
  // mapping and 28.2 GB/s from such a copy (23.6 from a copy on 4 KiB pages).
  kHugePageCopy,
};

class MappedFile {
 public:
  // Maps `path` read-only (a registered embedded file of that name: its bytes, not
  // copied), or reads it into huge pages (FileResidency). Throws vt::Error naming the
  // path and the OS error.
  static std::shared_ptr<const MappedFile> Open(const std::string& path,
                                                FileResidency residency = FileResidency::kMapped);
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
  bool mapped_ = false;  // munmap(data_, mapped_bytes_) on destruction
  size_t mapped_bytes_ = 0;
  std::vector<uint8_t> owned_;
};

}  // namespace vllm
