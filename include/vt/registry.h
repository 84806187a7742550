// The op registry: (OpId, DeviceType) -> kernel.
//
// Kernels register themselves with VT_REGISTER_KERNEL in their own .cpp/.cu file;
// a backend also lists, with a reason, each op it deliberately does not provide
// (VT_NOT_PROVIDED). The coverage test checks that every op in ops.def is one or the
// other on every backend that was built. A dispatch miss throws an error that names
// the op, the device and where the op does exist.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vt/device.h"
#include "vt/op_args.h"

namespace vt {

enum class OpId : uint16_t {
#define VT_OP(name, doc) k##name,
#include "vt/ops.def"
#undef VT_OP
};

inline constexpr int kNumOps = 0
#define VT_OP(name, doc) +1
#include "vt/ops.def"
#undef VT_OP
    ;

const char* OpName(OpId op);
const char* OpDoc(OpId op);
std::vector<OpId> AllOps();

// Maps an OpId to its argument struct, so registration and dispatch are typed.
template <OpId id>
struct OpArgsOf;
#define VT_OP(name, doc)                 \
  template <>                            \
  struct OpArgsOf<OpId::k##name> {       \
    using type = name##Args;             \
  };
#include "vt/ops.def"
#undef VT_OP

template <OpId id>
using KernelFnOf = void (*)(const typename OpArgsOf<id>::type&);

using ErasedKernel = void (*)();

struct KernelEntry {
  ErasedKernel fn = nullptr;
  const char* kernel_name = nullptr;   // e.g. "RmsNormCpu"
  const char* not_provided = nullptr;  // reason, when the backend declines the op
};

class Registry {
 public:
  static Registry& Get();

  void Register(OpId op, DeviceType device, ErasedKernel fn, const char* kernel_name);
  void DeclareNotProvided(OpId op, DeviceType device, const char* reason);
  // Removes a registration and returns it (tests use this to prove a kernel is
  // needed); Restore puts it back.
  KernelEntry Unregister(OpId op, DeviceType device);
  void Restore(OpId op, DeviceType device, const KernelEntry& entry);

  // Registrations between BeginStaging and CommitStaged / DiscardStaged are held
  // back, unchecked: LoadBackends opens a backend library in between and lets its
  // registrations in only when the library's ABI matches (backend_abi.h).
  // CommitStaged applies them all or, on a conflict, none (and throws).
  void BeginStaging();
  void CommitStaged();
  void DiscardStaged();

  const KernelEntry& Entry(OpId op, DeviceType device) const;
  bool Has(OpId op, DeviceType device) const { return Entry(op, device).fn != nullptr; }
  // The kernel, or throws "vt: no kernel for op X on device Y (registered on: ...)".
  ErasedKernel Lookup(OpId op, DeviceType device) const;

  // How many times each (op, device) was dispatched since the last reset.
  uint64_t DispatchCount(OpId op, DeviceType device) const;
  void CountDispatch(OpId op, DeviceType device);
  void ResetDispatchCounts();

 private:
  Registry() = default;
  struct Staged {
    int op;  // unchecked until commit: a library built from another ops.def may send anything
    DeviceType device;
    ErasedKernel fn;  // null for a "not provided" entry
    const char* text;  // kernel name or reason
  };
  bool staging_ = false;
  std::vector<Staged> staged_;
  KernelEntry entries_[kNumOps][kNumDeviceTypes] = {};
  uint64_t dispatch_counts_[kNumOps][kNumDeviceTypes] = {};
};

template <OpId id>
ErasedKernel EraseKernel(KernelFnOf<id> fn) {
  return reinterpret_cast<ErasedKernel>(fn);
}

// Called by each public op after validation.
template <OpId id>
void Dispatch(DeviceType device, const typename OpArgsOf<id>::type& args) {
  Registry& registry = Registry::Get();
  auto fn = reinterpret_cast<KernelFnOf<id>>(registry.Lookup(id, device));
  registry.CountDispatch(id, device);
  fn(args);
}

struct KernelRegistrar {
  KernelRegistrar(OpId op, DeviceType device, ErasedKernel fn, const char* name) {
    Registry::Get().Register(op, device, fn, name);
  }
  KernelRegistrar(OpId op, DeviceType device, const char* not_provided_reason) {
    Registry::Get().DeclareNotProvided(op, device, not_provided_reason);
  }
};

}  // namespace vt

#define VT_REGISTRY_CONCAT_INNER(a, b) a##b
#define VT_REGISTRY_CONCAT(a, b) VT_REGISTRY_CONCAT_INNER(a, b)

// VT_REGISTER_KERNEL(RmsNorm, kCPU, RmsNormCpu): FN must be void(const RmsNormArgs&).
#define VT_REGISTER_KERNEL(OP, DEVICE, FN)                                                            \
  static const ::vt::KernelRegistrar VT_REGISTRY_CONCAT(vt_kernel_registrar_, __LINE__)(            \
      ::vt::OpId::k##OP, ::vt::DeviceType::DEVICE, ::vt::EraseKernel<::vt::OpId::k##OP>(&FN), #FN)

// VT_NOT_PROVIDED(GdnChunkedPrefill, kROCM, "why"): an explicit, reasoned gap.
#define VT_NOT_PROVIDED(OP, DEVICE, REASON)                                                           \
  static const ::vt::KernelRegistrar VT_REGISTRY_CONCAT(vt_not_provided_, __LINE__)(                \
      ::vt::OpId::k##OP, ::vt::DeviceType::DEVICE, REASON)
