// vt::HostUpload: staged host data reaches the device tensor after the work queued
// before it, the host does not wait for the copy, and restaging waits until the
// device has read the previous upload (so reusing the staging memory never changes
// what an earlier upload delivers). On every device under test.
#include <gtest/gtest.h>

#include <numeric>

#include "testing/op_testing.h"
#include "vt/host_upload.h"
#include "vt/ops.h"

namespace vt {
namespace {

TEST(HostUploadTest, UploadsArriveInQueueOrderAndRestagingKeepsThem) {
  for (const Device device : testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    HostUpload upload(device);
    std::vector<Tensor> uploaded;
    // Sizes across the staging region's growth, each upload read back only at the end.
    for (const int64_t n : {1, 7, 1000, 300, 250001}) {
      std::span<int32_t> staged = upload.Stage<int32_t>(static_cast<size_t>(n));
      std::iota(staged.begin(), staged.end(), static_cast<int32_t>(n));
      uploaded.push_back(Tensor::Empty({n}, DType::kI32, device));
      upload.Upload(uploaded.back());
    }
    for (const Tensor& t : uploaded) {
      const std::vector<int64_t> got = t.ToIntVector();
      std::vector<int64_t> want(got.size());
      std::iota(want.begin(), want.end(), static_cast<int64_t>(got.size()));
      EXPECT_EQ(got, want) << "the upload of " << got.size() << " values";
    }
  }
}

// An upload queued behind a kernel lands after it: a fill of the destination queued
// first is overwritten, not the other way round.
TEST(HostUploadTest, AnUploadRunsAfterTheWorkQueuedBeforeIt) {
  for (const Device device : testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    const Tensor dst = Tensor::Empty({4099}, DType::kF32, device);
    HostUpload upload(device);
    std::span<float> staged = upload.Stage<float>(4099);
    for (size_t i = 0; i < staged.size(); ++i) staged[i] = static_cast<float>(i) * 0.5f;
    Fill({.dst = dst, .value = -1.0});
    upload.Upload(dst);
    const std::vector<float> got = dst.ToFloatVector();
    for (size_t i = 0; i < got.size(); i += 97) ASSERT_EQ(got[i], static_cast<float>(i) * 0.5f) << i;
  }
}

TEST(HostUploadTest, ADestinationItCannotFillIsAnErrorNamingIt) {
  for (const Device device : testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    HostUpload upload(device);
    upload.Stage<int32_t>(8);
    const Tensor too_large = Tensor::Empty({9}, DType::kI32, device);
    EXPECT_THROW(
        {
          try {
            upload.Upload(too_large);
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("36 bytes"), std::string::npos) << e.what();
            throw;
          }
        },
        Error);
    const Tensor strided = Tensor::Empty({4, 2}, DType::kI32, device).Transpose(0, 1);
    EXPECT_THROW(upload.Upload(strided), Error);
    if (device.type != DeviceType::kCPU) {
      EXPECT_THROW(upload.Upload(Tensor::Empty({2}, DType::kI32, kCpu)), Error);
    }
  }
}

}  // namespace
}  // namespace vt
