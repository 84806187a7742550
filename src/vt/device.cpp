#include "vt/device.h"

#include <dlfcn.h>

#include <array>
#include <mutex>
#include <string>

#include "vt/error.h"

namespace vt {
namespace {

struct BackendTable {
  std::mutex mutex;
  std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes> backends;
  std::array<std::string, kNumDeviceTypes> load_errors;
  bool load_attempted = false;
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
  std::string why = !IsBackendBuilt(type) ? "this build does not include it (configure with the " +
                                                std::string(type == DeviceType::kCUDA ? "CUDA" : "ROCm") +
                                                " toolkit installed)"
                                          : BackendLoadError(type);
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

std::vector<std::string> LoadBackends() {
  static std::mutex load_mutex;
  std::lock_guard<std::mutex> load_lock(load_mutex);
  BackendTable& table = Table();
  std::vector<std::string> lines;
  const std::string folder = OwnLibraryFolder();
  for (DeviceType type : kAllDeviceTypes) {
    const char* library = BackendLibraryName(type);
    if (library == nullptr) continue;
    std::string name = DeviceTypeName(type);
    if (!IsBackendBuilt(type)) {
      lines.push_back(name + ": not built");
      continue;
    }
    if (IsBackendLoaded(type)) {
      lines.push_back(name + ": loaded");
      continue;
    }
    if (table.load_attempted) {
      lines.push_back(name + ": failed to load: " + BackendLoadError(type));
      continue;
    }
    // The library's static initialisers register its DeviceBackend and kernels.
    void* handle = dlopen((folder + library).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr || !IsBackendLoaded(type)) {
      std::string error = handle == nullptr ? dlerror() : std::string(library) + " registered no device backend";
      std::lock_guard<std::mutex> lock(table.mutex);
      table.load_errors[static_cast<int>(type)] = error;
      lines.push_back(name + ": failed to load: " + error);
    } else {
      lines.push_back(name + ": loaded");
    }
  }
  table.load_attempted = true;
  return lines;
}

}  // namespace vt
