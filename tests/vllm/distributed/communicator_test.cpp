// The Gloo communicator (distributed/gloo_communicator.h): every collective against
// values computed here, with the ranks as threads of this process (each its own
// TCP endpoints, exactly as separate processes would have), and the error a rank
// gets when a peer is gone.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "vllm/distributed/gloo_communicator.h"
#include "vllm/testing/gloo_ranks.h"
#include "vt/error.h"

namespace vllm {
namespace {

TEST(GlooCommunicatorTest, AllReduceAllGatherBroadcastAndBarrierGiveEveryRankTheSameResult) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  constexpr int kWorld = 3;
  testing::RunRanks(kWorld, [&](int rank, Communicator& group) {
    EXPECT_EQ(group.rank(), rank);
    EXPECT_EQ(group.world_size(), kWorld);
    // f32 [5, 7]: element i of rank r is (r + 1) * i -> the sum is 6 i.
    vt::Tensor x = vt::Tensor::Empty({5, 7}, vt::DType::kF32, vt::kCpu);
    for (int64_t i = 0; i < 35; ++i) x.data_ptr<float>()[i] = static_cast<float>((rank + 1) * i);
    AllReduceSum(group, x);
    for (int64_t i = 0; i < 35; ++i) ASSERT_EQ(x.data_ptr<float>()[i], 6.0f * i) << "element " << i;

    // A strided bf16 view (columns 2..5 of [4, 6]): only the view's elements change.
    vt::Tensor base = vt::Tensor::Empty({4, 6}, vt::DType::kF32, vt::kCpu);
    for (int64_t i = 0; i < 24; ++i) base.data_ptr<float>()[i] = static_cast<float>(i);
    vt::Tensor b16 = vt::Tensor::Empty({4, 6}, vt::DType::kBF16, vt::kCpu);
    b16.CopyFrom(base);
    AllReduceSum(group, b16.Slice(1, 2, 5));
    const std::vector<float> got = b16.ToFloatVector();
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 6; ++c) {
        const float v = static_cast<float>(r * 6 + c);
        EXPECT_EQ(got[r * 6 + c], c >= 2 && c < 5 ? kWorld * v : v) << r << "," << c;
      }
    }

    // [2, 3] per rank -> [2, 9]: rank r's columns at 3r.
    vt::Tensor mine = vt::Tensor::Empty({2, 3}, vt::DType::kF32, vt::kCpu);
    for (int64_t i = 0; i < 6; ++i) mine.data_ptr<float>()[i] = static_cast<float>(100 * rank + i);
    vt::Tensor all = vt::Tensor::Empty({2, 9}, vt::DType::kF32, vt::kCpu);
    AllGatherColumns(group, mine, all);
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t r = 0; r < kWorld; ++r) {
        for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(all.data_ptr<float>()[n * 9 + r * 3 + c], 100 * r + n * 3 + c);
      }
    }

    // No rows: nothing moves (a zero-byte ring inside Gloo would divide by zero).
    AllGatherColumns(group, vt::Tensor::Empty({0, 3}, vt::DType::kF32, vt::kCpu),
                     vt::Tensor::Empty({0, 9}, vt::DType::kF32, vt::kCpu));
    AllReduceSum(group, vt::Tensor::Empty({0, 4}, vt::DType::kF32, vt::kCpu));

    // Root 1's bytes replace everyone's, whatever size each rank had.
    std::vector<uint8_t> bytes(static_cast<size_t>(rank * 5), 7);
    if (rank == 1) bytes = {1, 2, 3, 250};
    BroadcastBytes(group, bytes, 1);
    EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 250}));
    group.Barrier();
  });
}

TEST(GlooCommunicatorTest, ACollectiveWhosePeerHasLeftThrowsNamingItInsteadOfHanging) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  std::string error;
  testing::RunRanks(2, [&](int rank, Communicator& group) {
    group.Barrier();
    if (rank == 1) return;  // leaves: its communicator closes its connections
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<float> x(16, 1.0f);
    try {
      group.AllReduceSum(x.data(), x.size());
    } catch (const vt::Error& e) {
      error = e.what();
    }
  }, std::chrono::milliseconds(5000));
  EXPECT_NE(error.find("all-reduce"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 0 of 2"), std::string::npos) << error;
}

TEST(GlooCommunicatorTest, ARankOutsideTheGroupIsRefused) {
  try {
    CreateGlooCommunicator({.rank = 2, .world_size = 2, .rendezvous_dir = "/tmp"});
    FAIL() << "rank 2 of 2 was accepted";
  } catch (const vt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 is not in [0, world size 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vllm
