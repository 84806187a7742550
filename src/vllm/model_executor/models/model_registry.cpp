#include "vllm/model_executor/models/model_registry.h"

#include "vt/reach.h"

namespace vllm {

vt::Tensor ModelRegistry::Forward(const Model& model, const ForwardBatch& batch, const ModelCaches& caches) {
  vt::reach::Hit("ModelRegistry::Forward");
  return model.Forward(batch, caches);
}

}  // namespace vllm
