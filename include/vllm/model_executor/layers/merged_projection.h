// MergedProjection: several linear projections of the same input computed as one
// MatMul against a row-concatenated weight (vLLM's MergedColumnParallelLinear /
// QKVParallelLinear idea).
//
//   parts   w_0 [N_0, K], w_1 [N_1, K], ...          (all multiply the same x [T, K])
//   merged  w   [N_0 + N_1 + ..., K]                 rows of w_0, then w_1, ...
//   out     [T, N_0 + N_1 + ...]                     part i owns columns [begin(i), end(i))
//
// Each output column is the same dot product either way, so merging changes no
// number; it turns several small launches into one (fewer fixed launch costs and
// wave-quantisation tails on a GPU). Consumers take column views of `out` (rows
// strided by its width), identical whether the parts were merged or not.
//
// When to merge (MergePolicy::kOffCpu, the engine's policy):
//  - only when the target device is not the CPU. Off the CPU the weights are copied
//    to the device anyway, so the merged matrix is built there directly from the
//    host parts at no extra cost. On the CPU the parts are zero-copy views of the
//    mmapped model file; merging would copy every projection weight into memory.
//    (A part that already lives on the device is copied into the merged matrix too;
//    that one-time copy at load is accepted.)
//  - only when all parts share one dtype and one K: a GGUF Q4_K_M file mixes Q4_K
//    and Q6_K per tensor. Otherwise each part runs its own MatMul into its column
//    slice of `out`.
// MergePolicy::kAlways merges on the CPU too (tests compare both paths there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vt/tensor.h"

namespace vllm {

enum class MergePolicy {
  kOffCpu,  // merge when the target device is not the CPU (the engine's choice)
  kAlways,  // merge on any device (tests of the merged path on the CPU)
};

// Where a layer's projection weights live and whether its projections merge.
struct ProjectionPlacement {
  vt::Device device = vt::kCpu;
  MergePolicy merge = MergePolicy::kOffCpu;
};

struct ProjectionPart {
  std::string name;  // as in the layer's shape errors ("in_proj_qkv")
  vt::Tensor weight;  // [N, K], any device (moved to the placement's device)
};

class MergedProjection {
 public:
  MergedProjection() = default;
  // `op` names the owner in errors ("gdn::GdnBlock"). Parts must be 2-D with one K.
  MergedProjection(const char* op, std::vector<ProjectionPart> parts, const ProjectionPlacement& placement);

  // x [T, K] -> out [T, out_features()] (rows may be strided, unit last-dim stride).
  void Forward(const vt::Tensor& x, const vt::Tensor& out) const;

  int64_t out_features() const { return bounds_.empty() ? 0 : bounds_.back(); }
  // Part i's columns of the output: [begin(i), end(i)).
  int64_t begin(size_t part) const { return bounds_.at(part); }
  int64_t end(size_t part) const { return bounds_.at(part + 1); }
  // out.Slice(1, begin(part), end(part)): part i's output, rows strided by out's width.
  vt::Tensor Columns(const vt::Tensor& out, size_t part) const;
  // Part i's weight [N_i, K] on the placement's device: rows of the merged matrix
  // when merged (so consumers that read the parts themselves see one allocation).
  vt::Tensor Weight(size_t part) const;
  bool merged() const { return weights_.size() == 1 && bounds_.size() > 2; }
  size_t num_matmuls() const { return weights_.size(); }

 private:
  std::vector<vt::Tensor> weights_;  // one merged [sum N, K] matrix, or one per part
  std::vector<int64_t> bounds_;      // column boundaries: 0, N_0, N_0 + N_1, ...
};

}  // namespace vllm
