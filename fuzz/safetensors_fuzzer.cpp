// libFuzzer target: arbitrary bytes through the safetensors parser, then one byte
// read at each end of every tensor view (ASan reports a view outside the buffer).
// Any vt::Error is a correct rejection; anything else is a finding.
#include <cstdint>
#include <vector>

#include "touch_tensors.h"
#include "vllm/model_loader/safetensors.h"
#include "vt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vllm::SafetensorsFile file = vllm::SafetensorsFile::Parse(
        vllm::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"));
    vllm::fuzz::TouchTensors(file);
  } catch (const vt::Error&) {
  }
  return 0;
}
