// The chunked (WY) form of the gated delta rule on the GPU (gdn_chunked.cu): what
// gdn.cu's launcher needs to choose it and run it.
#pragma once

#include <cstdint>

#include "gpu_runtime.h"
#include "vt/op_args.h"

namespace vt::gpu {

// Sequences of at least this many tokens take the chunked kernels; shorter ones the
// token recurrence (one chunk of 64 costs about what ~10 tokens of the recurrence do,
// and a bound on the short sequences bounds the chunk scratch: see LaunchChunkedGdn).
inline constexpr int64_t kChunkedGdnMinTokens = 32;

// Whether the chunked kernels run these head sizes on `device`: Dk, Dv <= 128 and
// ~170 KB of shared memory a block (Hopper; not the A100's 163 KB or gfx90a's 64 KB).
bool ChunkedGdnFits(int64_t key_dim, int64_t value_dim, Device device);

// The gated delta rule of `a` for its sequences of >= kChunkedGdnMinTokens tokens (the
// others are left untouched: no output, no state change), in chunks of 64 on
// `stream`. Requires ChunkedGdnFits.
void LaunchChunkedGdn(const char* op, const GdnArgs& a, gpuStream_t stream);

}  // namespace vt::gpu
