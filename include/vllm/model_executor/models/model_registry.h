// ModelRegistry: architecture string -> model, and THE entry from the runner into a
// model (ModelRegistry::Forward). Models register by the architecture strings of
// HF's config.json and of GGUF's general.architecture.
#pragma once

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"

namespace vllm {

class ModelRegistry {
 public:
  // Logits [N, vocab] f32 for batch.logits_indices. Counts a reach of
  // "ModelRegistry::Forward".
  static vt::Tensor Forward(const Model& model, const ForwardBatch& batch, const ModelCaches& caches);
};

}  // namespace vllm
