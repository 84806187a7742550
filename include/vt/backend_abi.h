// The versioned entry point of a GPU backend library (libvt_cuda.so, libvt_rocm.so).
//
// A backend library registers its kernels by OpId, which is an op's index in
// ops.def, and reads each op's arguments as op_args.h lays them out. A library
// built from another ops.def would bind its kernels to the wrong ops. So every
// backend library exports one C function, vt_backend_abi_v1 (VT_DEFINE_BACKEND_ABI),
// returning the ABI version and the ops.def fingerprint it was compiled with.
// LoadBackends holds back what the library registers while it is opened, compares
// both numbers with libvt's own and lets the registrations in only when they match;
// otherwise the backend is unavailable, with a reason naming both (device.h).
#pragma once

#include <cstdint>

#include "vt/op_args.h"

extern "C" {
// What vt_backend_abi_v1 returns. Its layout is fixed for the function's name: a
// new layout comes with a new name (vt_backend_abi_v2).
struct VtBackendAbi {
  uint32_t abi_version;
  uint64_t ops_fingerprint;
};
using VtBackendAbiFn = VtBackendAbi (*)();
}

namespace vt {

inline constexpr const char* kBackendAbiSymbol = "vt_backend_abi_v1";

// Raised by hand whenever DeviceBackend, the registration calls or anything else a
// backend library relies on in libvt changes in a way the fingerprint cannot see.
inline constexpr uint32_t kBackendAbiVersion = 3;  // 2: DeviceBackend::SetProfilerCapture; 3: host staging, queue marks

// FNV-1a (64-bit) over each op's name with its terminating NUL, then the size of its
// argument struct, in ops.def order: adding, removing, reordering or renaming an op,
// or resizing its arguments, changes it.
namespace detail {
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;
constexpr uint64_t FingerprintOp(uint64_t hash, const char* name, uint64_t args_bytes) {
  for (const char* c = name;; ++c) {
    hash = (hash ^ static_cast<unsigned char>(*c)) * kFnvPrime;
    if (*c == '\0') break;
  }
  for (int shift = 0; shift < 64; shift += 8) hash = (hash ^ ((args_bytes >> shift) & 0xff)) * kFnvPrime;
  return hash;
}
}  // namespace detail

inline constexpr uint64_t kOpsFingerprint = [] {
  uint64_t hash = detail::kFnvOffset;
#define VT_OP(name, doc) hash = detail::FingerprintOp(hash, #name, sizeof(name##Args));
#include "vt/ops.def"
#undef VT_OP
  return hash;
}();

}  // namespace vt

// Defines the library's entry point; one backend library writes it once.
#define VT_DEFINE_BACKEND_ABI()                                                        \
  extern "C" __attribute__((visibility("default"))) VtBackendAbi vt_backend_abi_v1() { \
    return VtBackendAbi{::vt::kBackendAbiVersion, ::vt::kOpsFingerprint};              \
  }
