#include "vllm/model_executor/layers/merged_projection.h"

#include "vt/error.h"
#include "vt/ops.h"

namespace vllm {
namespace {

// One dtype and one K across the parts: then the rows concatenate into one matrix
// (for a block dtype a row is whole blocks, so a row range is a byte range).
bool PartsConcatenate(const std::vector<ProjectionPart>& parts) {
  for (const ProjectionPart& part : parts) {
    if (part.weight.dtype() != parts[0].weight.dtype() || part.weight.size(1) != parts[0].weight.size(1)) {
      return false;
    }
  }
  return parts.size() > 1;
}

// The parts' rows stacked in order, allocated and filled on `device`.
vt::Tensor ConcatenateRows(const std::vector<ProjectionPart>& parts, int64_t rows, vt::Device device) {
  const vt::Tensor& first = parts[0].weight;
  vt::Tensor merged = vt::Tensor::Empty({rows, first.size(1)}, first.dtype(), device);  // [sum N, K]
  int64_t row = 0;
  for (const ProjectionPart& part : parts) {
    merged.Slice(0, row, row + part.weight.size(0)).CopyFrom(part.weight);
    row += part.weight.size(0);
  }
  return merged;
}

}  // namespace

MergedProjection::MergedProjection(const char* op, std::vector<ProjectionPart> parts,
                                   const ProjectionPlacement& placement) {
  if (parts.empty()) throw vt::Error(std::string(op) + ": a projection needs at least one weight");
  bounds_.push_back(0);
  for (const ProjectionPart& part : parts) {
    if (!part.weight.defined() || part.weight.ndim() != 2) {
      throw vt::Error(std::string(op) + ": " + part.name + " must be a [out_features, in_features] matrix, got " +
                      (part.weight.defined() ? part.weight.Describe() : "no tensor"));
    }
    bounds_.push_back(bounds_.back() + part.weight.size(0));
  }
  const bool merge_here = placement.merge == MergePolicy::kAlways || placement.device.type != vt::DeviceType::kCPU;
  if (merge_here && PartsConcatenate(parts)) {
    weights_.push_back(ConcatenateRows(parts, bounds_.back(), placement.device));
    return;
  }
  for (ProjectionPart& part : parts) {
    weights_.push_back(part.weight.device() == placement.device ? std::move(part.weight)
                                                                : part.weight.To(placement.device));
  }
}

vt::Tensor MergedProjection::Columns(const vt::Tensor& out, size_t part) const {
  return out.Slice(1, begin(part), end(part));
}

vt::Tensor MergedProjection::Weight(size_t part) const {
  if (weights_.size() == 1) return weights_[0].Slice(0, begin(part), end(part));
  return weights_.at(part);
}

void MergedProjection::Forward(const vt::Tensor& x, const vt::Tensor& out) const {
  if (weights_.size() == 1) {
    vt::MatMul({.x = x, .w = weights_[0], .out = out});
    return;
  }
  for (size_t i = 0; i < weights_.size(); ++i) vt::MatMul({.x = x, .w = weights_[i], .out = Columns(out, i)});
}

}  // namespace vllm
