// The registry's dispatch errors, reach counters, and device parsing.
#include <gtest/gtest.h>

#include "vt/ops.h"
#include "vt/reach.h"
#include "vt/registry.h"

namespace vt {
namespace {

TEST(RegistryTest, MissingKernelErrorNamesOpDeviceAndWhereItExists) {
  Registry& registry = Registry::Get();
  KernelEntry saved = registry.Unregister(OpId::kFill, DeviceType::kCPU);
  Tensor t = Tensor::Empty({4}, DType::kF32);
  try {
    Fill({.dst = t, .value = 1.0});
    ADD_FAILURE() << "Fill ran without a kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vt: no kernel for op Fill on device cpu (registered on: "),
              std::string::npos)
        << e.what();
  }
  registry.Restore(OpId::kFill, DeviceType::kCPU, saved);
  EXPECT_NO_THROW(Fill({.dst = t, .value = 1.0}));
}

TEST(RegistryTest, GpuDispatchMissNamesTheOp) {
  try {
    Registry::Get().Lookup(OpId::kAttnGateSplit, DeviceType::kROCM);
    if (!Registry::Get().Has(OpId::kAttnGateSplit, DeviceType::kROCM)) ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel for op AttnGateSplit on device rocm"), std::string::npos);
  }
}

TEST(RegistryTest, DispatchCountsAndReachCounters) {
  Registry& registry = Registry::Get();
  registry.ResetDispatchCounts();
  Tensor t = Tensor::Empty({4}, DType::kF32);
  Fill({.dst = t, .value = 2.0});
  Fill({.dst = t, .value = 3.0});
  EXPECT_EQ(registry.DispatchCount(OpId::kFill, DeviceType::kCPU), 2u);
  reach::Reset();
  reach::Hit("seam");
  reach::Hit("seam", 2);
  EXPECT_EQ(reach::Count("seam"), 3u);
  EXPECT_EQ(reach::Count("other"), 0u);
}

TEST(RegistryTest, OpNamesComeFromOpsDef) {
  EXPECT_STREQ(OpName(OpId::kRmsNorm), "RmsNorm");
  EXPECT_EQ(static_cast<int>(AllOps().size()), kNumOps);
}

TEST(DeviceTest, ParseDevice) {
  EXPECT_EQ(ParseDevice("cpu"), kCpu);
  EXPECT_EQ(ParseDevice("cuda:1"), (Device{DeviceType::kCUDA, 1}));
  EXPECT_EQ(ParseDevice("rocm").type, DeviceType::kROCM);
  EXPECT_THROW(ParseDevice("tpu"), Error);
  EXPECT_THROW(ParseDevice("cuda:x"), Error);
}

TEST(OpValidationTest, ErrorsNameOpDeviceDtypeAndShape) {
  Tensor x = Tensor::Empty({3, 8}, DType::kI32);
  Tensor w = Tensor::Empty({8}, DType::kF32);
  try {
    RmsNorm({.x = x, .weight = w, .out = x, .eps = 1e-6f});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "vt::RmsNorm on cpu: x must be f32, f16 or bf16, got i32 [3, 8] on cpu");
  }
  Tensor a = Tensor::Empty({2, 5}, DType::kF32);
  Tensor b = Tensor::Empty({2, 4}, DType::kF32);
  EXPECT_THROW(Add({.a = a, .b = b, .out = a}), Error);
}

}  // namespace
}  // namespace vt
