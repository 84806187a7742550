// Device graphs (include/vt/device_graph.h): a recording replays the recorded ops
// on whatever the input tensors hold at replay time, outputs are the tensors the
// recording created, a recording that waits for the device fails with an error
// naming the capture and leaves the device usable, a bad index met by a replayed
// kernel is still reported, and memory of a graph outlives it safely. The CPU has
// no graphs and says so. The GPU tests skip themselves without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/device_graph.h"
#include "vt/ops.h"

namespace vt {
namespace {

using testing::RandomTensor;

TEST(DeviceGraphTest, TheCpuHasNoGraphs) {
  EXPECT_FALSE(GraphsSupported(kCpu));
  try {
    NewGraphMemory(kCpu);
    ADD_FAILURE() << "the CPU made a graph memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not supported on cpu"), std::string::npos) << e.what();
  }
}

// The profiler capture (for `ncu --profile-from-start off`) is a GPU profiler's.
TEST(DeviceGraphTest, TheCpuHasNoProfilerCapture) {
  try {
    SetProfilerCapture(kCpu, true);
    ADD_FAILURE() << "the CPU turned a profiler capture on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu has no profiler capture"), std::string::npos) << e.what();
  }
}

// out = x W^T + x W^T (MatMul then Add), recorded once, replayed on new x.
TEST(DeviceGraphTest, ReplaysRunTheRecordedOpsOnTheInputsOfTheMoment) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(5);
  for (Device d : gpus) {
    SCOPED_TRACE(d.ToString());
    ASSERT_TRUE(GraphsSupported(d));
    const Tensor w = RandomTensor({37, 64}, DType::kBF16, kCpu, rng);
    const Tensor w_d = w.To(d);
    const Tensor x = Tensor::Zeros({3, 64}, DType::kF32, d);  // the input, rewritten before each replay
    Tensor out;
    const std::shared_ptr<GraphMemory> memory = NewGraphMemory(d);
    const std::unique_ptr<CapturedGraph> graph = CaptureGraph(d, memory, [&] {
      const Tensor product = Tensor::Empty({3, 37}, DType::kF32, d);  // freed inside the recording
      MatMul({.x = x, .w = w_d, .out = product});
      out = Tensor::Empty({3, 37}, DType::kF32, d);
      Add({.a = product, .b = product, .out = out});
    });
    for (int replay = 0; replay < 3; ++replay) {
      const Tensor x_host = RandomTensor({3, 64}, DType::kF32, kCpu, rng);
      x.CopyFrom(x_host);
      graph->Replay();
      const Tensor expected = Tensor::Empty({3, 37}, DType::kF32);
      MatMul({.x = x_host, .w = w, .out = expected});
      Add({.a = expected, .b = expected, .out = expected});
      EXPECT_TRUE(testing::AllClose(testing::ToDoubles(expected), out, 1e-5)) << "replay " << replay;
    }
  }
}

TEST(DeviceGraphTest, ARecordingThatWaitsForTheDeviceFailsAndTheDeviceRunsOn) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  for (Device d : gpus) {
    SCOPED_TRACE(d.ToString());
    const Tensor x = Tensor::FromVector(std::vector<float>{1, 2, 3}, {3}).To(d);
    try {
      CaptureGraph(d, NewGraphMemory(d), [&] {
        Add({.a = x, .b = x, .out = x});
        x.To(kCpu);  // a copy to the host waits for the queue
      });
      ADD_FAILURE() << "a recording with a wait was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CaptureGraph"), std::string::npos) << e.what();
    }
    Add({.a = x, .b = x, .out = x});  // the queue runs work again; the recorded Add never ran
    EXPECT_EQ(x.To(kCpu).ToFloatVector(), (std::vector<float>{2, 4, 6}));
  }
}

TEST(DeviceGraphTest, ABadIndexInAReplayIsReportedAtTheNextWait) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  std::mt19937 rng(6);
  for (Device d : gpus) {
    SCOPED_TRACE(d.ToString());
    const Tensor table = RandomTensor({5, 16}, DType::kF32, d, rng);
    const Tensor ids = Tensor::FromVector(std::vector<int32_t>{0, 1}, {2}).To(d);
    const Tensor out = Tensor::Empty({2, 16}, DType::kF32, d);
    const std::unique_ptr<CapturedGraph> graph =
        CaptureGraph(d, NewGraphMemory(d), [&] { GatherRows({.table = table, .ids = ids, .out = out}); });
    graph->Replay();
    EXPECT_NO_THROW(Synchronize(d));
    ids.CopyFrom(Tensor::FromVector(std::vector<int32_t>{4, 9}, {2}));
    graph->Replay();
    try {
      Synchronize(d);
      ADD_FAILURE() << "id 9 of a 5-row table was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ids[1] = 9"), std::string::npos) << e.what();
    }
  }
}

// An output made during the recording may outlive the graph and its memory handle:
// its block is then the device pool's, and freeing it is not an error.
TEST(DeviceGraphTest, OutputsOutliveTheirGraph) {
  const std::vector<Device> gpus = testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  for (Device d : gpus) {
    SCOPED_TRACE(d.ToString());
    const Tensor x = Tensor::FromVector(std::vector<float>{1, 2}, {2}).To(d);
    Tensor out;
    {
      std::unique_ptr<CapturedGraph> graph = CaptureGraph(d, NewGraphMemory(d), [&] {
        out = Tensor::Empty({2}, DType::kF32, d);
        Add({.a = x, .b = x, .out = out});
      });
      graph->Replay();
    }
    EXPECT_EQ(out.To(kCpu).ToFloatVector(), (std::vector<float>{2, 4}));
    EXPECT_NO_THROW(out = Tensor());
  }
}

}  // namespace
}  // namespace vt
