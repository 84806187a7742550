// The GPU GdnDecode kernel choice (src/vt/gpu/gdn_decode_choice.h) at its boundaries,
// without a GPU: head sizes up to 128 fused, past 128 the unfused ops; column slices
// where the device runs clusters and the whole-head blocks (rows x value heads) fill
// at most a quarter of the multiprocessors, the whole-head kernel otherwise; forced
// variants apply only where the shape and device take them; unknown names throw.
#include "vt/gpu/gdn_decode_choice.h"

#include <gtest/gtest.h>

namespace vt::gpu {
namespace {

GdnDecodeShape Shape(int64_t dk, int64_t dv, bool clusters, int64_t head_rows = 4096, int64_t sms = 132) {
  return {.key_dim = dk, .value_dim = dv, .clusters = clusters, .head_rows = head_rows, .multiprocessors = sms};
}

TEST(GdnDecodeChoiceTest, HeadSizesUpTo128AreFused) {
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, true)), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, false)), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode(Shape(1, 1, true)), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode(Shape(100, 70, false)), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode(Shape(129, 128, true)), GdnDecodeKernel::kUnfused);
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 129, false)), GdnDecodeKernel::kUnfused);
  EXPECT_EQ(ChooseGdnDecode(Shape(192, 64, true, 1)), GdnDecodeKernel::kUnfused);
}

TEST(GdnDecodeChoiceTest, ColumnSlicesWhenWholeHeadsLeaveThreeQuartersIdle) {
  // Batch 1 of Hv = 32 on 132 multiprocessors: 32 whole-head blocks.
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, true, 32, 132)), GdnDecodeKernel::kColumnSlices);
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, true, 33, 132)), GdnDecodeKernel::kColumnSlices);
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, true, 34, 132)), GdnDecodeKernel::kWholeHead);
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, true, 64, 132)), GdnDecodeKernel::kWholeHead);  // batch 2
  EXPECT_EQ(ChooseGdnDecode(Shape(128, 128, false, 32, 132)), GdnDecodeKernel::kWholeHead) << "no clusters";
  EXPECT_EQ(ChooseGdnDecode(Shape(129, 128, true, 32, 132)), GdnDecodeKernel::kUnfused);
}

TEST(GdnDecodeChoiceTest, ForcedVariantsApplyWhereTheyCan) {
  const GdnDecodeShape hopper = Shape(128, 128, true), other = Shape(128, 128, false), large = Shape(192, 64, true);
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
