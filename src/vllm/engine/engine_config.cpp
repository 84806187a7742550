#include "vllm/engine/engine_config.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace vllm {

SpeculativeConfig ParseSpeculativeConfig(const std::string& text) {
  const std::string what = "--speculative-config";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(what + " must be a JSON object: " + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(what + " must be a JSON object, got " + j.dump());
  SpeculativeConfig c;
  auto integer = [&](const std::string& key, int64_t low, int64_t high) -> int64_t {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() > high) {
      throw std::invalid_argument(what + ": " + key + " must be an integer in [" + std::to_string(low) + ", " +
                                  std::to_string(high) + "], got " + v.dump());
    }
    return v.get<int64_t>();
  };
  bool has_method = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      if (!value.is_string() || value.get<std::string>() != "mtp") {
        throw std::invalid_argument(what + ": method " + value.dump() +
                                    " is not supported (only \"mtp\": the model's own multi-token-prediction module)");
      }
      has_method = true;
    } else if (key == "num_speculative_tokens") {
      c.num_speculative_tokens = integer(key, 1, 16);
    } else if (key == "disable_by_batch_size") {
      c.disable_by_batch_size = integer(key, 0, 1 << 30);
    } else {
      throw std::invalid_argument(what + ": key '" + key +
                                  "' is not supported (supported: method, num_speculative_tokens, "
                                  "disable_by_batch_size)");
    }
  }
  if (!has_method) throw std::invalid_argument(what + " needs \"method\": \"mtp\"");
  if (!j.contains("num_speculative_tokens")) throw std::invalid_argument(what + " needs num_speculative_tokens");
  return c;
}

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
