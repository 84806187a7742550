// vt::tuning: kernel-variant overrides are set, read back and cleared per family.
#include "vt/tuning.h"

#include <gtest/gtest.h>

namespace vt::tuning {
namespace {

TEST(TuningTest, OverridesAreKeptPerFamilyUntilCleared) {
  EXPECT_EQ(Variant("test.family_a"), "");
  SetVariant("test.family_a", "first");
  SetVariant("test.family_b", "second");
  EXPECT_EQ(Variant("test.family_a"), "first");
  EXPECT_EQ(Variant("test.family_b"), "second");
  SetVariant("test.family_a", "third");
  EXPECT_EQ(Variant("test.family_a"), "third");
  SetVariant("test.family_a", "");
  EXPECT_EQ(Variant("test.family_a"), "");
  EXPECT_EQ(Variant("test.family_b"), "second");
  SetVariant("test.family_b", "");
  EXPECT_EQ(Variant("test.family_b"), "");
  SetVariant("test.never_set", "");  // clearing what was never set is allowed
  EXPECT_EQ(Variant("test.never_set"), "");
}

}  // namespace
}  // namespace vt::tuning
