// The one place that picks GdnDecode's kernels for a shape (src/vt/gpu/gdn_decode.cu).
//
//   kColumnSlices  CUDA devices whose kernels carry sm_90 code (thread-block clusters),
//                  Dk and Dv <= 128, when the whole-head kernel's blocks (rows x value
//                  heads) would fill at most a quarter of the multiprocessors: a block
//                  per (row, value head, 32 state columns), 8 warps splitting the Dk
//                  rows (16 state values a thread in registers), the blocks of one
//                  head a cluster that adds up the gated norm's sum of squares through
//                  distributed shared memory. At batch 1 a Qwen3.5 layer is 128 blocks
//                  (32 heads x 4 slices) where the whole-head kernel has 32 on 132
//                  multiprocessors. H100 (vt_gpu_bench, 2026-12-07): 8.2 us against
//                  9.4 at batch 1, Hv 32, Dk = Dv = 128; 174 / 660 us against 137 /
//                  541 at batch 64 / 256, hence the bound.
//   kWholeHead     Dk and Dv <= 128 otherwise: a block of 512 threads per (row, value
//                  head), its block sum gives the norm (0.64-0.65 of the copy
//                  bandwidth at batch 64 and 256 on the H100).
//   kUnfused       head sizes past 128: the unfused ops (CausalConv1dUpdate, L2Norm,
//                  GdnGates, GdnRecurrent, GatedRmsNorm), as the CPU kernel runs them.
// vt::tuning family "gpu.gdn_decode" forces "whole_head" or "column_slices" where the
// shape and device take it. Unit-tested in tests/vt/gpu/gdn_decode_choice_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vt/error.h"

namespace vt::gpu {

enum class GdnDecodeKernel { kUnfused, kWholeHead, kColumnSlices };

inline constexpr int64_t kGdnDecodeMaxHeadDim = 128;
inline constexpr std::string_view kGdnDecodeVariantFamily = "gpu.gdn_decode";

struct GdnDecodeShape {
  int64_t key_dim = 0, value_dim = 0;
  bool clusters = false;  // the device runs thread-block clusters from our kernels' code
  int64_t head_rows = 0;  // batch rows x value heads: the whole-head kernel's blocks
  int64_t multiprocessors = 0;
};

inline bool GdnDecodeFused(const GdnDecodeShape& s) {
  return s.key_dim <= kGdnDecodeMaxHeadDim && s.value_dim <= kGdnDecodeMaxHeadDim;
}

inline GdnDecodeKernel ChooseGdnDecode(const GdnDecodeShape& s) {
  if (!GdnDecodeFused(s)) return GdnDecodeKernel::kUnfused;
  const bool whole_heads_leave_most_idle = 4 * s.head_rows <= s.multiprocessors;
  return s.clusters && whole_heads_leave_most_idle ? GdnDecodeKernel::kColumnSlices : GdnDecodeKernel::kWholeHead;
}

// `chosen` replaced by the forced variant where the shape and device take it; ""
// keeps `chosen`. Throws for an unknown name.
inline GdnDecodeKernel ApplyGdnDecodeVariant(GdnDecodeKernel chosen, const GdnDecodeShape& s,
                                             std::string_view variant) {
  if (variant.empty()) return chosen;
  if (variant == "whole_head") return GdnDecodeFused(s) ? GdnDecodeKernel::kWholeHead : chosen;
  if (variant == "column_slices") return GdnDecodeFused(s) && s.clusters ? GdnDecodeKernel::kColumnSlices : chosen;
  throw Error("vt::GdnDecode: unknown variant '" + std::string(variant) + "' forced for " +
              std::string(kGdnDecodeVariantFamily) + " (known: whole_head, column_slices)");
}

}  // namespace vt::gpu
