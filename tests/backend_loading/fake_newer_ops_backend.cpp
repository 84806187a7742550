// A fake ROCm backend library built as from an ops.def with one more op at its
// end: its fingerprint is libvt's continued by that op (the fingerprint streams
// over the ops in order), so LoadBackends must refuse it.
#include "fake_backend.h"
#include "vt/backend_abi.h"

extern "C" __attribute__((visibility("default"))) VtBackendAbi vt_backend_abi_v1() {
  return VtBackendAbi{vt::kBackendAbiVersion, vt::detail::FingerprintOp(vt::kOpsFingerprint, "AddedLater", 64)};
}

VT_FAKE_BACKEND(kROCM)
