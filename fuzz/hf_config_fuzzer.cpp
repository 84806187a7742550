// libFuzzer target: arbitrary text as config.json through ModelConfigFromHfJson.
// Invalid JSON and every rejected config are vt::Error / JSON parse errors;
// anything else (a crash, an uncaught exception, UB) is a finding.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "vllm/config/model_config.h"
#include "vt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, false);
  if (config.is_discarded()) return 0;
  try {
    vllm::ModelConfigFromHfJson(config, &config, "fuzz/config.json");
  } catch (const vt::Error&) {
  }
  return 0;
}
