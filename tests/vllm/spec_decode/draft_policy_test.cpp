// DraftPolicy: alternates runs until both modes are measured in a bucket, then keeps
// the faster one, probing the other one run in kProbeEvery; the step after a switch is
// not counted; batch sizes have their own buckets.
#include <gtest/gtest.h>

#include "vllm/spec_decode/draft_policy.h"

namespace vllm {
namespace {

// Runs `steps` decode steps of `n` requests where a token costs `spec` seconds with
// drafting and `plain` without; returns how many steps drafted.
int64_t Simulate(DraftPolicy& policy, int64_t n, double spec, double plain, int steps, bool& last) {
  int64_t drafting = 0;
  for (int i = 0; i < steps; ++i) {
    const bool draft = policy.ShouldDraft(n);
    policy.Record(n, /*verified=*/last, draft, (draft ? spec : plain) * 10, 10);
    drafting += draft;
    last = draft;
  }
  return drafting;
}

TEST(DraftPolicyTest, KeepsTheFasterModeAndStillProbesTheOther) {
  DraftPolicy policy;
  bool last = false;
  Simulate(policy, 1, 1.0, 2.0, 64, last);  // warm-up: both measured
  EXPECT_DOUBLE_EQ(policy.seconds_per_token(1, true), 1.0);
  EXPECT_DOUBLE_EQ(policy.seconds_per_token(1, false), 2.0);
  const int64_t steps = 64 * DraftPolicy::kRunLength;
  const int64_t drafted = Simulate(policy, 1, 1.0, 2.0, steps, last);
  EXPECT_GT(drafted, steps * 0.85) << "drafting is faster here";
  EXPECT_LT(drafted, steps) << "the other mode is still probed";
  // Batches of 64 have their own bucket, where drafting is slower.
  const int64_t big = Simulate(policy, 64, 3.0, 2.0, steps, last);
  EXPECT_LT(big, steps * 0.25);
  EXPECT_DOUBLE_EQ(policy.seconds_per_token(1, true), 1.0) << "other buckets untouched";
}

TEST(DraftPolicyTest, TheStepAfterASwitchIsNotCounted) {
  DraftPolicy policy;
  policy.Record(1, /*verified=*/true, /*drafted=*/false, 100.0, 1);
  policy.Record(1, /*verified=*/false, /*drafted=*/true, 100.0, 1);
  EXPECT_EQ(policy.seconds_per_token(1, true), 0.0);
  EXPECT_EQ(policy.seconds_per_token(1, false), 0.0);
}

}  // namespace
}  // namespace vllm
