// Shared by the model-file fuzzers: one byte read at each end of every tensor view a
// parsed file hands out, so AddressSanitizer reports a view that leaves the buffer.
// `File` is vllm::GgufFile or vllm::SafetensorsFile (tensors(), Tensor(info)); a view
// refused with vt::Error is a correct rejection.
#pragma once

#include <cstdint>

#include "vt/error.h"
#include "vt/tensor.h"

namespace vllm::fuzz {

inline volatile uint8_t g_sink;

template <typename File>
void TouchTensors(const File& file) {
  for (const auto& info : file.tensors()) {
    try {
      const vt::Tensor t = file.Tensor(info);
      if (t.nbytes() == 0) continue;
      const auto* bytes = static_cast<const uint8_t*>(t.data());
      g_sink = bytes[0];
      g_sink = bytes[t.nbytes() - 1];
    } catch (const vt::Error&) {
    }
  }
}

}  // namespace vllm::fuzz
