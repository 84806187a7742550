// Programmatic dependent launch (src/vt/gpu/gpu_launch.cuh): on a CUDA device of
// compute capability 9.x a kernel's blocks start while the kernel ahead of it still
// runs, so every kernel must wait before it reads what that kernel writes. Here a
// long GEMV (Q8_0 8192 x 8192: ~20 us on an H200, while the next kernel's blocks are
// scheduled within ~2 us) writes into a NaN-poisoned buffer, and the kernels after it
// read that buffer at once: an Add, then a 16-bit-weight GEMV (which fetches its
// weights before its wait), then another Add. A kernel that read before its wait
// would see NaN. Eager, with the overlap forced off ("gpu.launch" = "serialized"),
// and replayed from a device graph, as decode steps run. Skips itself without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/device_graph.h"
#include "vt/ops.h"
#include "vt/quant.h"
#include "vt/reach.h"
#include "vt/tuning.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::RandomTensor;
using testing::ToDoubles;

Tensor RandomQ8Weights(int64_t n, int64_t k, Device device, std::mt19937& rng) {
  const Tensor values = RandomTensor({n, k}, DType::kF32, kCpu, rng);
  Tensor w = Tensor::Empty({n, k}, DType::kQ8_0);
  for (int64_t r = 0; r < n; ++r) {
    QuantizeRow(values.data_ptr<float>() + r * k, k, static_cast<char*>(w.data()) + r * BytesFor(DType::kQ8_0, k),
                DType::kQ8_0);
  }
  return w.To(device);
}

std::vector<double> Plus(std::vector<double> a, const Tensor& b) {
  const std::vector<double> bd = ToDoubles(b);
  for (size_t i = 0; i < a.size(); ++i) a[i] += bd[i];
  return a;
}

TEST(ProgrammaticLaunchTest, KernelsReadWhatTheKernelAheadOfThemWrote) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  constexpr int64_t kHidden = 8192, kOut = 4096;
  std::mt19937 rng(23);
  for (Device d : gpus) {
    const Tensor w_long = RandomQ8Weights(kHidden, kHidden, d, rng);
    const Tensor w_next = RandomTensor({kOut, kHidden}, DType::kBF16, d, rng);
    const Tensor x = RandomTensor({1, kHidden}, DType::kF32, d, rng);
    const Tensor b = RandomTensor({1, kHidden}, DType::kF32, d, rng);
    const Tensor c = RandomTensor({1, kOut}, DType::kF32, d, rng);
    const std::vector<double> h_ref = testing::MatMulReference(x.To(kCpu), w_long.To(kCpu));
    Tensor h = Tensor::Empty({1, kHidden}, DType::kF32, d);
    Tensor y = Tensor::Empty({1, kHidden}, DType::kF32, d);
    Tensor z = Tensor::Empty({1, kOut}, DType::kF32, d);
    Tensor out = Tensor::Empty({1, kOut}, DType::kF32, d);
    const auto chain = [&] {
      Fill({.dst = h, .value = std::numeric_limits<double>::quiet_NaN()});
      MatMul({.x = x, .w = w_long, .out = h});
      Add({.a = h, .b = b, .out = y});
      MatMul({.x = y, .w = w_next, .out = z});
      Add({.a = z, .b = c, .out = out});
    };
    const auto check = [&](const std::string& how) {
      SCOPED_TRACE(d.ToString() + ", " + how);
      // x is quantized to int8 per 32 values inside the Q8_0 GEMV: ~1e-2 of the scale.
      EXPECT_TRUE(AllClose(Plus(h_ref, b.To(kCpu)), y, 2e-2));
      EXPECT_TRUE(AllClose(Plus(testing::MatMulReference(y.To(kCpu), w_next.To(kCpu)), c.To(kCpu)), out, 1e-3));
    };

    reach::Reset();
    chain();
    check("eager");
    if (d.type == DeviceType::kCUDA && reach::Count("GpuLaunch.programmatic") == 0) {
      std::printf("note: %s launched nothing programmatically (compute capability 9.x only)\n", d.ToString().c_str());
    }

    tuning::SetVariant("gpu.launch", "serialized");
    reach::Reset();
    chain();
    EXPECT_EQ(reach::Count("GpuLaunch.programmatic"), 0u) << "the serialized variant overlapped a launch";
    check("serialized");
    tuning::SetVariant("gpu.launch", "");

    const std::unique_ptr<CapturedGraph> graph = CaptureGraph(d, NewGraphMemory(d), chain);
    for (int replay = 0; replay < 3; ++replay) {
      graph->Replay();
      check("graph replay " + std::to_string(replay));
    }
  }
}

TEST(ProgrammaticLaunchTest, AnUnknownLaunchVariantIsAnError) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(24);
  for (Device d : gpus) {
    const Tensor a = RandomTensor({4, 8}, DType::kF32, d, rng);
    reach::Reset();
    Add({.a = a, .b = a, .out = a});
    if (reach::Count("GpuLaunch.programmatic") == 0) continue;  // the family is read only where the overlap exists
    tuning::SetVariant("gpu.launch", "sideways");
    try {
      Add({.a = a, .b = a, .out = a});
      ADD_FAILURE() << "an unknown gpu.launch variant was accepted on " << d.ToString();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("gpu.launch"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("serialized"), std::string::npos) << e.what();
    }
    tuning::SetVariant("gpu.launch", "");
  }
}

}  // namespace
}  // namespace vt
