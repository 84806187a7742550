#include "vllm/spec_decode/draft_policy.h"

#include <algorithm>

namespace vllm {

int DraftPolicy::BucketOf(int64_t num_running) {
  int b = 0;
  while (b + 1 < kBuckets && (int64_t{1} << b) < num_running) ++b;
  return b;
}

bool DraftPolicy::ShouldDraft(int64_t num_running) {
  Bucket& b = buckets_[BucketOf(num_running)];
  if (++b.run_steps <= kRunLength) return b.current;
  // A run ended: pick the next one's mode.
  b.run_steps = 1;
  ++b.runs;
  if (b.plain.samples < kMinSamples || b.drafting.samples < kMinSamples) {
    b.current = !b.current;  // alternate until both are measured
  } else {
    const bool better = b.drafting.seconds_per_token < b.plain.seconds_per_token;
    b.current = b.runs % kProbeEvery == 0 ? !better : better;
  }
  return b.current;
}

void DraftPolicy::Record(int64_t num_running, bool verified, bool drafted, double seconds, int64_t tokens) {
  if (verified != drafted || tokens <= 0) return;  // the first step of a run mixes both modes
  Mode& m = drafted ? buckets_[BucketOf(num_running)].drafting : buckets_[BucketOf(num_running)].plain;
  const double per_token = seconds / static_cast<double>(tokens);
  // An average of the first samples, then an exponential one that follows changes.
  const double weight = m.samples < 8 ? 1.0 / static_cast<double>(m.samples + 1) : 0.125;
  m.seconds_per_token += weight * (per_token - m.seconds_per_token);
  ++m.samples;
}

double DraftPolicy::seconds_per_token(int64_t num_running, bool drafting) const {
  const Bucket& b = buckets_[BucketOf(num_running)];
  return drafting ? b.drafting.seconds_per_token : b.plain.seconds_per_token;
}

}  // namespace vllm
