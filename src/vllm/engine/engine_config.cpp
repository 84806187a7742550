#include "vllm/engine/engine_config.h"

#include <algorithm>
#include <stdexcept>

namespace vllm {

int64_t ResolveCheckpointInterval(const EngineConfig& config) {
  if (config.state_checkpoint_interval != 0) return config.state_checkpoint_interval;
  constexpr int64_t kCpuInterval = 512;
  const int64_t bs = std::max<int64_t>(config.block_size, 1);
  int64_t interval = kCpuInterval;
  if (config.device.type != vt::DeviceType::kCPU) {
    interval = std::max(interval, config.max_num_batched_tokens / bs * bs);
  }
  return (interval + bs - 1) / bs * bs;
}

vt::DType ResolveActivationDtype(const std::string& dtype, const ModelConfig& model, vt::Device device) {
  if (dtype == "auto") {
    // The CPU computes in f32 (as llama.cpp does): weights dominate memory traffic and
    // f32 keeps every op exact to the reference; GPUs use the checkpoint's 16-bit dtype.
    if (device.type == vt::DeviceType::kCPU) return vt::DType::kF32;
    return model.dtype == vt::DType::kF16 || model.dtype == vt::DType::kF32 ? model.dtype : vt::DType::kBF16;
  }
  if (dtype == "float32" || dtype == "float") return vt::DType::kF32;
  if (dtype == "bfloat16") return vt::DType::kBF16;
  if (dtype == "float16" || dtype == "half") return vt::DType::kF16;
  throw std::invalid_argument("--dtype must be auto, float32, bfloat16 or float16, got '" + dtype + "'");
}

}  // namespace vllm
