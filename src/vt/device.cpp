#include "vt/device.h"

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "vt/backend_abi.h"
#include "vt/error.h"
#include "vt/registry.h"

namespace vt {
namespace {

struct BackendTable {
  std::mutex mutex;
  std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes> backends;
  std::array<std::string, kNumDeviceTypes> load_errors;
  std::array<bool, kNumDeviceTypes> load_attempted = {};
  // While a backend library is being opened, what it registers waits here
  // (LoadBackendLibrary lets it in once the library's ABI is known to match).
  bool staging = false;
  std::vector<std::unique_ptr<DeviceBackend>> staged;
};

BackendTable& Table() {
  static BackendTable* table = new BackendTable();  // outlives static destructors of backends
  return *table;
}

// Folder of the shared object holding this function (libvt.so), with a trailing '/'.
std::string OwnLibraryFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnLibraryFolder), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string Hex(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Why the opened library may not be let in ("" when its ABI matches libvt's).
std::string CheckBackendAbi(void* handle, const std::string& path) {
  auto abi = reinterpret_cast<VtBackendAbiFn>(dlsym(handle, kBackendAbiSymbol));
  if (abi == nullptr) {
    return path + " exports no " + kBackendAbiSymbol + " (not a vt backend library, or one built before backends " +
           "were versioned): rebuild it from the same tree as libvt";
  }
  const VtBackendAbi got = abi();
  if (got.abi_version == kBackendAbiVersion && got.ops_fingerprint == kOpsFingerprint) return "";
  return path + " was built for backend ABI v" + std::to_string(got.abi_version) + " with ops.def fingerprint " +
         Hex(got.ops_fingerprint) + ", but this libvt is ABI v" + std::to_string(kBackendAbiVersion) +
         " with ops.def fingerprint " + Hex(kOpsFingerprint) +
         ": its kernels would bind to the wrong ops; rebuild the backend from the same tree as libvt";
}

// The staged device backend of `type` from the library just opened, or why there is none.
std::unique_ptr<DeviceBackend> TakeStagedBackend(std::vector<std::unique_ptr<DeviceBackend>>& staged,
                                                 DeviceType type, const std::string& path, std::string& error) {
  for (auto& backend : staged) {
    if (backend->type() == type) return std::move(backend);
  }
  error = path + " registered no " + DeviceTypeName(type) + " device backend";
  return nullptr;
}

const char* BackendLibraryName(DeviceType type) {
  switch (type) {
    case DeviceType::kCUDA: return "libvt_cuda.so";
    case DeviceType::kROCM: return "libvt_rocm.so";
    case DeviceType::kCPU: return nullptr;
  }
  return nullptr;
}

}  // namespace

const char* DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda";
    case DeviceType::kROCM: return "rocm";
  }
  return "unknown";
}

std::string Device::ToString() const {
  if (type == DeviceType::kCPU) return "cpu";
  return std::string(DeviceTypeName(type)) + ":" + std::to_string(index);
}

Device ParseDevice(const std::string& text) {
  std::string name = text;
  int index = 0;
  auto colon = text.find(':');
  if (colon != std::string::npos) {
    name = text.substr(0, colon);
    try {
      size_t used = 0;
      index = std::stoi(text.substr(colon + 1), &used);
      if (used != text.size() - colon - 1 || index < 0) throw std::invalid_argument("index");
    } catch (const std::exception&) {
      throw Error("vt: bad device '" + text + "': the index after ':' must be a non-negative integer");
    }
  }
  for (DeviceType type : kAllDeviceTypes) {
    if (name == DeviceTypeName(type)) return Device{type, index};
  }
  throw Error("vt: unknown device '" + text + "' (expected cpu, cuda, cuda:N, rocm or rocm:N)");
}

void RegisterDeviceBackend(std::unique_ptr<DeviceBackend> backend) {
  BackendTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  if (table.staging) {
    table.staged.push_back(std::move(backend));
    return;
  }
  table.backends[static_cast<int>(backend->type())] = std::move(backend);
}

bool IsBackendLoaded(DeviceType type) {
  BackendTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.backends[static_cast<int>(type)] != nullptr;
}

DeviceBackend& GetDeviceBackend(DeviceType type) {
  BackendTable& table = Table();
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    if (auto& backend = table.backends[static_cast<int>(type)]) return *backend;
  }
  if (type != DeviceType::kCPU) {
    LoadBackends();
    std::lock_guard<std::mutex> lock(table.mutex);
    if (auto& backend = table.backends[static_cast<int>(type)]) return *backend;
  }
  const std::string load_error = BackendLoadError(type);
  std::string why = !load_error.empty()     ? load_error
                    : !IsBackendBuilt(type) ? "this build does not include it (configure with the " +
                                                  std::string(type == DeviceType::kCUDA ? "CUDA" : "ROCm") +
                                                  " toolkit installed)"
                                            : "its library was not loaded";
  throw Error(std::string("vt: device ") + DeviceTypeName(type) + " is not available: " + why);
}

bool IsDeviceAvailable(Device device) {
  try {
    return device.index < GetDeviceBackend(device.type).DeviceCount();
  } catch (const Error&) {
    return false;
  }
}

bool IsBackendBuilt(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU: return true;
    case DeviceType::kCUDA:
#ifdef VT_BUILT_CUDA
      return true;
#else
      return false;
#endif
    case DeviceType::kROCM:
#ifdef VT_BUILT_ROCM
      return true;
#else
      return false;
#endif
  }
  return false;
}

std::string BackendLoadError(DeviceType type) {
  BackendTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.load_errors[static_cast<int>(type)];
}

namespace {
std::mutex& LoadMutex() {
  static std::mutex mutex;
  return mutex;
}

// LoadBackendLibrary with the load mutex held.
std::string LoadBackendLibraryLocked(DeviceType type, const std::string& path) {
  BackendTable& table = Table();
  if (IsBackendLoaded(type)) return "";
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    table.load_attempted[static_cast<int>(type)] = true;
    table.staging = true;
    table.staged.clear();
  }
  Registry::Get().BeginStaging();
  // The library's static initialisers register its DeviceBackend and kernels (staged).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string error = handle == nullptr ? std::string(dlerror()) : CheckBackendAbi(handle, path);
  std::vector<std::unique_ptr<DeviceBackend>> staged;
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    table.staging = false;
    staged.swap(table.staged);
  }
  std::unique_ptr<DeviceBackend> backend;
  if (error.empty()) backend = TakeStagedBackend(staged, type, path, error);
  if (error.empty()) {
    try {
      Registry::Get().CommitStaged();
    } catch (const Error& e) {
      error = path + ": " + e.what();
    }
  } else {
    Registry::Get().DiscardStaged();  // a refused library stays mapped but has nothing registered
  }
  std::lock_guard<std::mutex> lock(table.mutex);
  if (error.empty()) table.backends[static_cast<int>(type)] = std::move(backend);
  table.load_errors[static_cast<int>(type)] = error;
  return error;
}
}  // namespace

std::string LoadBackendLibrary(DeviceType type, const std::string& path) {
  if (type == DeviceType::kCPU) throw Error("vt: the cpu backend is built into libvt and loads no library");
  std::lock_guard<std::mutex> load_lock(LoadMutex());
  return LoadBackendLibraryLocked(type, path);
}

std::vector<std::string> LoadBackends() {
  std::lock_guard<std::mutex> load_lock(LoadMutex());
  BackendTable& table = Table();
  std::vector<std::string> lines;
  const std::string folder = OwnLibraryFolder();
  for (DeviceType type : kAllDeviceTypes) {
    const char* library = BackendLibraryName(type);
    if (library == nullptr) continue;
    const std::string name = DeviceTypeName(type);
    bool attempted = false;
    {
      std::lock_guard<std::mutex> lock(table.mutex);
      attempted = table.load_attempted[static_cast<int>(type)];
    }
    if (!IsBackendLoaded(type) && !attempted && IsBackendBuilt(type)) LoadBackendLibraryLocked(type, folder + library);
    if (IsBackendLoaded(type)) {
      lines.push_back(name + ": loaded");
    } else if (!BackendLoadError(type).empty()) {
      lines.push_back(name + ": failed to load: " + BackendLoadError(type));
    } else {
      lines.push_back(name + ": not built");
    }
  }
  return lines;
}

// The defaults of a device whose memory is the host's (the CPU): plain memory, the
// copy made at once, a mark that waits for the whole queue.
namespace {
class SynchronizeMark final : public QueueMark {
 public:
  SynchronizeMark(DeviceBackend& backend, int index) : backend_(backend), index_(index) {}
  void Wait() override { backend_.Synchronize(index_); }

 private:
  DeviceBackend& backend_;
  int index_;
};
}  // namespace

void* DeviceBackend::AllocateHostStaging(size_t bytes, int) {
  return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t{256});
}
void DeviceBackend::FreeHostStaging(void* ptr, int) { ::operator delete(ptr, std::align_val_t{256}); }
void DeviceBackend::QueueCopyFromHostStaging(void* dst, const void* src, size_t bytes, int index) {
  CopyHostToDevice(dst, src, bytes, index);
}
std::unique_ptr<QueueMark> DeviceBackend::MarkQueue(int index) {
  return std::make_unique<SynchronizeMark>(*this, index);
}

}  // namespace vt
