// When drafting pays (speculative decoding's default policy, used unless
// --speculative-config sets disable_by_batch_size): measured while serving.
//
// Whether drafting makes a step's tokens cheaper depends on the model, the device,
// the acceptance rate and the batch: on a memory-bound GPU step verifying k drafts
// costs little more than a plain decode, on a small model or a full batch it can cost
// more than the accepted drafts save. The policy keeps, per batch size (powers of two:
// 1, 2, 3-4, 5-8, ...), an average of the seconds per produced token of decode-only
// steps with drafting and without, and drafts when drafting's is lower. Until a bucket
// has kMinSamples of both it alternates runs of kRunLength steps; afterwards one run in
// kProbeEvery tries the other mode so that a change (longer contexts, other requests)
// is seen. A step counts for a mode only inside a run of it (the step after a switch
// mixes both: its drafts were proposed, or not, by the step before).
#pragma once

#include <array>
#include <cstdint>

namespace vllm {

class DraftPolicy {
 public:
  static constexpr int kBuckets = 16;
  static constexpr int kMinSamples = 4;
  static constexpr int kRunLength = 4;
  static constexpr int kProbeEvery = 16;  // runs

  // Whether the step after this one should verify drafts, for a batch of `num_running`.
  bool ShouldDraft(int64_t num_running);
  // A decode-only step of `num_running` requests that produced `tokens` in `seconds`;
  // `verified` whether it verified drafts, `drafted` whether it proposed new ones.
  void Record(int64_t num_running, bool verified, bool drafted, double seconds, int64_t tokens);

  // Seconds per token of the bucket of `num_running` (0 until measured), for tests and logs.
  double seconds_per_token(int64_t num_running, bool drafting) const;

 private:
  struct Mode {
    double seconds_per_token = 0;
    int64_t samples = 0;
  };
  struct Bucket {
    Mode plain, drafting;
    bool current = true;  // the mode of the current run
    int64_t run_steps = 0;
    int64_t runs = 0;
  };
  static int BucketOf(int64_t num_running);
  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace vllm
