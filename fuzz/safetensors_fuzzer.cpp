// libFuzzer target: arbitrary bytes through the safetensors parser, then one byte
// read at each end of every tensor view (ASan reports a view outside the buffer).
// Any vt::Error is a correct rejection; anything else is a finding.
#include <cstdint>
#include <vector>

#include "vllm/model_loader/safetensors.h"
#include "vt/error.h"

namespace {
volatile uint8_t g_sink;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vllm::SafetensorsFile file = vllm::SafetensorsFile::Parse(
        vllm::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"));
    for (const vllm::SafetensorsTensorInfo& info : file.tensors()) {
      try {
        const vt::Tensor t = file.Tensor(info);
        if (t.nbytes() == 0) continue;
        const auto* bytes = static_cast<const uint8_t*>(t.data());
        g_sink = bytes[0];
        g_sink = bytes[t.nbytes() - 1];
      } catch (const vt::Error&) {
      }
    }
  } catch (const vt::Error&) {
  }
  return 0;
}
