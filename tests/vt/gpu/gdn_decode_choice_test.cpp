// The GPU GdnDecode kernel choice (src/vt/gpu/gdn_decode_choice.h) at its boundaries,
// without a GPU: head sizes up to 128 fused (the whole-head kernel; column slices
// are forced only, where the device runs clusters, until measured on a GPU), past 128
// the unfused ops; forced variants apply only where the shape and device take them;
// unknown names throw.
#include "vt/gpu/gdn_decode_choice.h"

#include <gtest/gtest.h>

namespace vt::gpu {
namespace {

TEST(GdnDecodeChoiceTest, HeadSizesUpTo128AreFused) {
  EXPECT_EQ(ChooseGdnDecode({128, 128, true}), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode({128, 128, false}), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode({1, 1, true}), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode({100, 70, false}), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode({129, 128, true}), GdnDecodeKernel::kUnfused);
  EXPECT_EQ(ChooseGdnDecode({128, 129, false}), GdnDecodeKernel::kUnfused);
  EXPECT_EQ(ChooseGdnDecode({192, 64, true}), GdnDecodeKernel::kUnfused);
}

TEST(GdnDecodeChoiceTest, ForcedVariantsApplyWhereTheyCan) {
  const GdnDecodeShape hopper{128, 128, true}, other{128, 128, false}, large{192, 64, true};
  EXPECT_EQ(ApplyGdnDecodeVariant(GdnDecodeKernel::kWholeHead, hopper, ""), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ApplyGdnDecodeVariant(GdnDecodeKernel::kWholeHead, hopper, "column_slices"),
            GdnDecodeKernel::kColumnSlices);
  EXPECT_EQ(ApplyGdnDecodeVariant(GdnDecodeKernel::kColumnSlices, hopper, "whole_head"), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ApplyGdnDecodeVariant(GdnDecodeKernel::kWholeHead, other, "column_slices"), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ApplyGdnDecodeVariant(GdnDecodeKernel::kUnfused, large, "whole_head"), GdnDecodeKernel::kUnfused);
  EXPECT_EQ(ApplyGdnDecodeVariant(GdnDecodeKernel::kUnfused, large, "column_slices"), GdnDecodeKernel::kUnfused);
  EXPECT_THROW(ApplyGdnDecodeVariant(GdnDecodeKernel::kWholeHead, other, "slices"), Error);
}

}  // namespace
}  // namespace vt::gpu
