// ModelRegistry: architecture string -> model, and THE entry from the runner into a
// model (ModelRegistry::Forward). Models register by the architecture strings of
// HF's config.json and of GGUF's general.architecture (see kArchitectures in
// model_registry.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/model_loader/model_loader.h"

namespace vllm {

class ModelRegistry {
 public:
  // The model for loaded.config.architecture. Throws vt::Error naming the file and
  // the architecture (listing the supported ones), or the weight that does not
  // match the config.
  static std::unique_ptr<Model> Create(const LoadedModel& loaded, const ModelOptions& options);
  static bool IsSupported(const std::string& architecture);
  static std::vector<std::string> Architectures();

  // Logits [N, vocab] f32 for batch.logits_indices. Counts a reach of
  // "ModelRegistry::Forward".
  static vt::Tensor Forward(const Model& model, const ForwardBatch& batch, const ModelCaches& caches);
};

}  // namespace vllm
