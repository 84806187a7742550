// libFuzzer target: arbitrary bytes through the GGUF parser, then everything a
// loader does with a parsed file: every metadata accessor, ModelConfigFromGguf, and
// one byte read at each end of every tensor view (ASan reports a view that leaves
// the buffer). Any vt::Error is a correct rejection; anything else is a finding.
#include <cstdint>
#include <vector>

#include "touch_tensors.h"
#include "vllm/config/model_config.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vt/error.h"

namespace {

void TouchMetadata(const vllm::GgufMetadata& metadata) {
  for (const auto& [key, value] : metadata.entries()) {
    try {
      value.ToString();
      if (value.is_array()) value.ArraySize();
    } catch (const vt::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vllm::GgufFile file =
        vllm::GgufFile::Parse(vllm::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
    TouchMetadata(file.metadata());
    vllm::fuzz::TouchTensors(file);
    vllm::ModelConfigFromGguf(file, [](const std::string&) {});
  } catch (const vt::Error&) {
  }
  return 0;
}
