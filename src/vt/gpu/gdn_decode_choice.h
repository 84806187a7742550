// The one place that picks GdnDecode's kernels for a shape (src/vt/gpu/gdn_decode.cu).
//
//   kColumnSlices  forced only (gpu.gdn_decode = column_slices) until it has run on a
//                  GPU: written and compiled on 2026-12-07, when no device started.
//                  CUDA devices whose kernels carry sm_90 code (thread-block clusters),
//                  Dk and Dv <= 128: a block per (row, value head, 32 state columns),
//                  8 warps splitting the Dk rows (16 state values a thread in
//                  registers), the blocks of one head a cluster that adds up the
//                  gated norm's sum of squares through distributed shared memory. At
//                  batch 1 a Qwen3.5 layer is 128 blocks (32 heads x 4 slices) where
//                  the whole-head kernel has 32 on 132 multiprocessors; at large
//                  batches the small blocks keep several per multiprocessor, so one
//                  block's state loads overlap another's stores.
//   kWholeHead     Dk and Dv <= 128 (the choice on every device for now): a block of
//                  512 threads per (row, value head), its block sum gives the norm.
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
};

inline bool GdnDecodeFused(const GdnDecodeShape& s) {
  return s.key_dim <= kGdnDecodeMaxHeadDim && s.value_dim <= kGdnDecodeMaxHeadDim;
}

inline GdnDecodeKernel ChooseGdnDecode(const GdnDecodeShape& s) {
  return GdnDecodeFused(s) ? GdnDecodeKernel::kWholeHead : GdnDecodeKernel::kUnfused;
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
