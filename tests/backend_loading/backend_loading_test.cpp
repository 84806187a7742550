// Backend libraries are let in only when their versioned entry point reports
// libvt's ABI version and ops.def fingerprint (include/vt/backend_abi.h): a fake
// library built as from another ops.def, and one without the entry point, are
// refused by name, register nothing and leave the backend unavailable with the
// reason; a fake built from this tree loads. Tests run in the order written (the
// accepted fake takes the CUDA slot before anything could load the real one).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "vt/backend_abi.h"
#include "vt/device.h"
#include "vt/error.h"
#include "vt/registry.h"

namespace vt {
namespace {

std::string Hex(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

TEST(BackendLoadingTest, ALibraryBuiltFromThisTreeLoads) {
  const std::string error = LoadBackendLibrary(DeviceType::kCUDA, FAKE_MATCHING_BACKEND);
  EXPECT_EQ(error, "");
  ASSERT_TRUE(IsBackendLoaded(DeviceType::kCUDA));
  EXPECT_EQ(GetDeviceBackend(DeviceType::kCUDA).DeviceName(0), "fake");
  EXPECT_TRUE(Registry::Get().Has(OpId::kFill, DeviceType::kCUDA));
  EXPECT_EQ(BackendLoadError(DeviceType::kCUDA), "");
}

TEST(BackendLoadingTest, ALibraryFromAnotherOpsDefIsRefused) {
  const uint64_t newer = detail::FingerprintOp(kOpsFingerprint, "AddedLater", 64);
  const std::string error = LoadBackendLibrary(DeviceType::kROCM, FAKE_NEWER_OPS_BACKEND);
  EXPECT_NE(error.find(FAKE_NEWER_OPS_BACKEND), std::string::npos) << error;
  EXPECT_NE(error.find("ops.def fingerprint " + Hex(newer)), std::string::npos) << error;
  EXPECT_NE(error.find("ops.def fingerprint " + Hex(kOpsFingerprint)), std::string::npos) << error;
  EXPECT_NE(error.find("ABI v" + std::to_string(kBackendAbiVersion)), std::string::npos) << error;
  EXPECT_FALSE(IsBackendLoaded(DeviceType::kROCM));
  EXPECT_FALSE(Registry::Get().Has(OpId::kFill, DeviceType::kROCM)) << "its kernel was let in";
  EXPECT_EQ(BackendLoadError(DeviceType::kROCM), error);
  try {
    GetDeviceBackend(DeviceType::kROCM);
    ADD_FAILURE() << "the refused backend is available";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(error), std::string::npos) << e.what();
  }
  bool reported = false;
  for (const std::string& line : LoadBackends()) reported |= line == "rocm: failed to load: " + error;
  EXPECT_TRUE(reported) << "LoadBackends (selfcheck's list) does not give the reason";
}

TEST(BackendLoadingTest, ALibraryWithoutTheVersionedEntryPointIsRefused) {
  const std::string error = LoadBackendLibrary(DeviceType::kROCM, FAKE_UNVERSIONED_BACKEND);
  EXPECT_NE(error.find(FAKE_UNVERSIONED_BACKEND), std::string::npos) << error;
  EXPECT_NE(error.find(std::string("exports no ") + kBackendAbiSymbol), std::string::npos) << error;
  EXPECT_FALSE(IsBackendLoaded(DeviceType::kROCM));
  EXPECT_FALSE(Registry::Get().Has(OpId::kFill, DeviceType::kROCM));
}

TEST(BackendLoadingTest, AMissingLibraryIsReportedNotThrown) {
  const std::string error = LoadBackendLibrary(DeviceType::kROCM, "/nonexistent/libvt_rocm.so");
  EXPECT_NE(error.find("/nonexistent/libvt_rocm.so"), std::string::npos) << error;
  EXPECT_THROW(LoadBackendLibrary(DeviceType::kCPU, "/nonexistent/libvt_cpu.so"), Error);
}

// The fingerprint is a compile-time function of ops.def: any change to the list
// (an op added, two swapped, one renamed) or to an op's argument size changes it.
TEST(BackendLoadingTest, TheFingerprintSeesOrderNamesAndArgumentSizes) {
  using detail::FingerprintOp;
  const uint64_t base = detail::kFnvOffset;
  const uint64_t ab = FingerprintOp(FingerprintOp(base, "A", 8), "B", 8);
  EXPECT_NE(ab, FingerprintOp(FingerprintOp(base, "B", 8), "A", 8));
  EXPECT_NE(ab, FingerprintOp(FingerprintOp(base, "A", 8), "C", 8));
  EXPECT_NE(ab, FingerprintOp(FingerprintOp(base, "A", 8), "B", 16));
  EXPECT_NE(ab, FingerprintOp(base, "AB", 8));
  static_assert(kOpsFingerprint != detail::kFnvOffset);
}

}  // namespace
}  // namespace vt
