#include "vllm/model_loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vllm/model_loader/embedded_files.h"
#include "vt/error.h"

namespace vllm {

std::shared_ptr<const MappedFile> MappedFile::Open(const std::string& path) {
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
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw vt::Error(path + ": mmap of " + std::to_string(file->size_) + " bytes failed: " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->mapped_ = true;
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
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace vllm
