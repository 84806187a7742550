#include "vllm/model_loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "vllm/model_loader/embedded_files.h"
#include "vt/error.h"

namespace vllm {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// `size` bytes of fd read into fresh anonymous memory, 2 MiB-aligned (a huge page
// maps only an aligned 2 MiB range) and advised to use transparent huge pages, then
// made read-only like the mapping it replaces. Returns the memory and its mapped
// length, or nullptr where the kernel refuses (the caller then maps the file).
const uint8_t* ReadIntoHugePages(int fd, size_t size, const std::string& path, size_t* mapped_bytes) {
  const size_t length = (size + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* raw = ::mmap(nullptr, length + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) ::munmap(raw, aligned - start);
  if (kHugePageBytes > aligned - start) ::munmap(reinterpret_cast<void*>(aligned + length), kHugePageBytes - (aligned - start));
  auto* p = reinterpret_cast<uint8_t*>(aligned);
  ::madvise(p, length, MADV_HUGEPAGE);  // a kernel without THP ignores or refuses it: small pages then
  // Chunks of 64 MiB on up to 8 threads: each fresh huge page is zeroed by the kernel
  // on its first touch, which one thread did at ~0.3-2.5 GB/s on a 2-core VM.
  constexpr size_t kChunk = size_t{64} << 20;
  const size_t chunks = (size + kChunk - 1) / kChunk;
  const size_t threads = std::min<size_t>({chunks, 8, std::max(1u, std::thread::hardware_concurrency())});
  std::atomic<size_t> next{0};
  std::vector<int> errors(threads, 0);
  std::vector<size_t> failed_at(threads, 0);
  const auto read_chunks = [&](size_t t) {
    for (size_t c = next++; c < chunks && errors[t] == 0; c = next++) {
      const size_t end = std::min(size, (c + 1) * kChunk);
      for (size_t done = c * kChunk; done < end;) {
        const ssize_t n = ::pread(fd, p + done, end - done, static_cast<off_t>(done));
        if (n <= 0) {
          errors[t] = n < 0 ? errno : EIO;
          failed_at[t] = done;
          break;
        }
        done += static_cast<size_t>(n);
      }
    }
  };
  {
    std::vector<std::jthread> workers;
    for (size_t t = 1; t < threads; ++t) workers.emplace_back(read_chunks, t);
    read_chunks(0);
  }  // joined
  for (size_t t = 0; t < threads; ++t) {
    if (errors[t] == 0) continue;
    ::munmap(p, length);
    throw vt::Error(path + ": read failed at byte " + std::to_string(failed_at[t]) + ": " + std::strerror(errors[t]));
  }
  ::mprotect(p, length, PROT_READ);
  *mapped_bytes = length;
  return p;
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::Open(const std::string& path, FileResidency residency) {
  if (const EmbeddedFile* embedded = FindEmbeddedFile(path)) {
    std::shared_ptr<MappedFile> file(new MappedFile());
    file->path_ = path;
    file->data_ = embedded->data;
    file->size_ = embedded->size;
    return file;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw vt::Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISDIR(st.st_mode) ? "is a directory" : std::strerror(errno);
    ::close(fd);
    throw vt::Error(path + ": not a readable regular file (" + why + ")");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0 && residency == FileResidency::kHugePageCopy) {
    file->data_ = ReadIntoHugePages(fd, file->size_, path, &file->mapped_bytes_);
    file->mapped_ = file->data_ != nullptr;
  }
  if (file->size_ > 0 && !file->mapped_) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw vt::Error(path + ": mmap of " + std::to_string(file->size_) + " bytes failed: " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->mapped_ = true;
    file->mapped_bytes_ = file->size_;
  }
  ::close(fd);
  return file;
}

std::shared_ptr<const MappedFile> MappedFile::FromBytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->owned_ = std::move(bytes);
  file->data_ = file->owned_.data();
  file->size_ = file->owned_.size();
  file->path_ = std::move(name);
  return file;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), mapped_bytes_);
}

}  // namespace vllm
