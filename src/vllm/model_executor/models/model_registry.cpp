#include "vllm/model_executor/models/model_registry.h"


#include "vllm/distributed/communicator.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vt/error.h"
#include "vt/reach.h"

namespace vllm {
namespace {

struct Architecture {
  const char* name;
  ModelFamily family;
};

// HF class names and GGUF general.architecture values, one line each.
constexpr Architecture kArchitectures[] = {
    {"Qwen3_5ForConditionalGeneration", ModelFamily::kQwen3_5},
    {"Qwen3_5ForCausalLM", ModelFamily::kQwen3_5},
    {"Qwen3_5MoeForConditionalGeneration", ModelFamily::kQwen3_5Moe},
    {"Qwen3_5MoeForCausalLM", ModelFamily::kQwen3_5Moe},
    {"Qwen3ForCausalLM", ModelFamily::kQwen3},
    {"qwen35", ModelFamily::kQwen3_5},
    {"qwen35moe", ModelFamily::kQwen3_5Moe},
    {"qwen3", ModelFamily::kQwen3},
};

const Architecture* Find(const std::string& name) {
  for (const Architecture& a : kArchitectures) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

}  // namespace

bool ModelRegistry::IsSupported(const std::string& architecture) { return Find(architecture) != nullptr; }

std::vector<std::string> ModelRegistry::Architectures() {
  std::vector<std::string> names;
  for (const Architecture& a : kArchitectures) names.emplace_back(a.name);
  return names;
}

std::unique_ptr<Model> ModelRegistry::Create(const LoadedModel& loaded, const ModelOptions& options) {
  const Architecture* arch = Find(loaded.config.architecture);
  if (arch == nullptr) {
    std::string list;
    for (const std::string& name : Architectures()) list += (list.empty() ? "" : ", ") + name;
    throw vt::Error(loaded.path + ": unsupported model architecture '" + loaded.config.architecture +
                    "' (supported: " + list + ")");
  }
  if (arch->family != loaded.config.family) {
    throw vt::Error(loaded.path + ": architecture '" + loaded.config.architecture + "' is a " +
                    ModelFamilyName(arch->family) + " model, but its config describes a " +
                    ModelFamilyName(loaded.config.family) + " model");
  }
  ValidateModelConfig(loaded.config, loaded.path);
  // Every supported family is the same decoder stack with different data (decoder_model.h).
  try {
    const Communicator* group = options.tensor_parallel;
    if (options.enable_expert_parallel && (group == nullptr || group->world_size() == 1)) {
      throw vt::Error("--enable-expert-parallel splits the experts over the ranks of --tensor-parallel-size, which is 1");
    }
    if (group != nullptr && group->world_size() > 1) {
      if (options.device.type != vt::DeviceType::kCPU) {
        throw vt::Error("tensor parallelism runs on the CPU backend only (Gloo); NCCL for " +
                        options.device.ToString() + " is not built");
      }
      const TensorParallelShard shard =
          ShardForTensorParallel(loaded.config, loaded.weights, group->rank(), group->world_size(),
                                 options.enable_expert_parallel);
      return std::make_unique<DecoderModel>(shard.config, shard.weights, options);
    }
    return std::make_unique<DecoderModel>(loaded.config, loaded.weights, options);
  } catch (const vt::Error& e) {
    throw vt::Error(loaded.path + ": " + e.what());
  }
}

vt::Tensor ModelRegistry::Forward(const Model& model, const ForwardBatch& batch, const ModelCaches& caches) {
  vt::reach::Hit("ModelRegistry::Forward");
  return model.Forward(batch, caches);
}

}  // namespace vllm
