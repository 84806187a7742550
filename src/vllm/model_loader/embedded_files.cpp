#include "vllm/model_loader/embedded_files.h"

#include <map>
#include <mutex>


namespace vllm {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, EmbeddedFile>& Registry() {
  static std::map<std::string, EmbeddedFile> files;
  return files;
}

}  // namespace

void RegisterEmbeddedFile(const std::string& name, const uint8_t* data, size_t size) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[name] = EmbeddedFile{data, size};
}

const EmbeddedFile* FindEmbeddedFile(const std::string& name) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  const auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;  // entries are never erased: the pointer stays valid
}

}  // namespace vllm
