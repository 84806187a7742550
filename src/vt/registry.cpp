#include "vt/registry.h"

#include <mutex>
#include <string>

#include "vt/error.h"

namespace vt {
namespace {

constexpr const char* kOpNames[] = {
#define VT_OP(name, doc) #name,
#include "vt/ops.def"
#undef VT_OP
};

constexpr const char* kOpDocs[] = {
#define VT_OP(name, doc) doc,
#include "vt/ops.def"
#undef VT_OP
};

std::mutex& RegistryMutex() {
  static std::mutex mutex;
  return mutex;
}

int Index(OpId op) {
  int i = static_cast<int>(op);
  if (i < 0 || i >= kNumOps) throw Error("vt: invalid op id " + std::to_string(i));
  return i;
}

}  // namespace

const char* OpName(OpId op) { return kOpNames[Index(op)]; }
const char* OpDoc(OpId op) { return kOpDocs[Index(op)]; }

std::vector<OpId> AllOps() {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i) ops.push_back(static_cast<OpId>(i));
  return ops;
}

Registry& Registry::Get() {
  static Registry* registry = new Registry();  // never destroyed: kernels of unloaded libraries stay harmless
  return *registry;
}

void Registry::Register(OpId op, DeviceType device, ErasedKernel fn, const char* kernel_name) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (staging_) {
    staged_.push_back({static_cast<int>(op), device, fn, kernel_name});
    return;
  }
  KernelEntry& entry = entries_[Index(op)][static_cast<int>(device)];
  if (entry.fn != nullptr) {
    throw Error(std::string("vt: op ") + OpName(op) + " has two kernels on device " + DeviceTypeName(device) +
                ": " + entry.kernel_name + " and " + kernel_name);
  }
  entry.fn = fn;
  entry.kernel_name = kernel_name;
}

void Registry::DeclareNotProvided(OpId op, DeviceType device, const char* reason) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (staging_) {
    staged_.push_back({static_cast<int>(op), device, nullptr, reason});
    return;
  }
  entries_[Index(op)][static_cast<int>(device)].not_provided = reason;
}

void Registry::BeginStaging() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (staging_) throw Error("vt: registry staging is already under way");
  staging_ = true;
  staged_.clear();
}

void Registry::DiscardStaged() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  staging_ = false;
  staged_.clear();
}

void Registry::CommitStaged() {
  std::vector<Staged> staged;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    staging_ = false;
    staged.swap(staged_);
    std::vector<const char*> taken(static_cast<size_t>(kNumOps) * kNumDeviceTypes, nullptr);
    for (const Staged& s : staged) {  // check everything before changing anything
      const OpId op = static_cast<OpId>(Index(static_cast<OpId>(s.op)));
      if (static_cast<int>(s.device) >= kNumDeviceTypes) {
        throw Error("vt: a registration for op " + std::string(OpName(op)) + " names device type " +
                    std::to_string(static_cast<int>(s.device)) + ", which this libvt does not know");
      }
      if (s.fn == nullptr) continue;
      const char*& name = taken[static_cast<size_t>(s.op) * kNumDeviceTypes + static_cast<int>(s.device)];
      if (name == nullptr) name = Entry(op, s.device).kernel_name;
      if (name != nullptr) {
        throw Error(std::string("vt: op ") + OpName(op) + " has two kernels on device " + DeviceTypeName(s.device) +
                    ": " + name + " and " + s.text);
      }
      name = s.text;
    }
  }
  for (const Staged& s : staged) {
    if (s.fn != nullptr) Register(static_cast<OpId>(s.op), s.device, s.fn, s.text);
    else DeclareNotProvided(static_cast<OpId>(s.op), s.device, s.text);
  }
}

KernelEntry Registry::Unregister(OpId op, DeviceType device) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  KernelEntry& entry = entries_[Index(op)][static_cast<int>(device)];
  KernelEntry old = entry;
  entry = KernelEntry{};
  return old;
}

void Registry::Restore(OpId op, DeviceType device, const KernelEntry& entry) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  entries_[Index(op)][static_cast<int>(device)] = entry;
}

const KernelEntry& Registry::Entry(OpId op, DeviceType device) const {
  return entries_[Index(op)][static_cast<int>(device)];
}

ErasedKernel Registry::Lookup(OpId op, DeviceType device) const {
  const KernelEntry& entry = Entry(op, device);
  if (entry.fn != nullptr) return entry.fn;
  std::string where;
  for (DeviceType other : kAllDeviceTypes) {
    if (Has(op, other)) where += std::string(where.empty() ? "" : ", ") + DeviceTypeName(other);
  }
  std::string message = std::string("vt: no kernel for op ") + OpName(op) + " on device " + DeviceTypeName(device) +
                        " (registered on: " + (where.empty() ? "none" : where) + ")";
  if (entry.not_provided != nullptr) message += std::string("; the ") + DeviceTypeName(device) +
                                                " backend does not provide it: " + entry.not_provided;
  if (!IsBackendLoaded(device)) message += std::string("; the ") + DeviceTypeName(device) + " backend is not loaded";
  throw Error(message);
}

uint64_t Registry::DispatchCount(OpId op, DeviceType device) const {
  return __atomic_load_n(&dispatch_counts_[Index(op)][static_cast<int>(device)], __ATOMIC_RELAXED);
}

void Registry::CountDispatch(OpId op, DeviceType device) {
  __atomic_fetch_add(&dispatch_counts_[Index(op)][static_cast<int>(device)], 1, __ATOMIC_RELAXED);
}

void Registry::ResetDispatchCounts() {
  for (auto& row : dispatch_counts_)
    for (auto& count : row) __atomic_store_n(&count, 0, __ATOMIC_RELAXED);
}

}  // namespace vt
