// Files compiled into the binary and read by name where a model path is expected.
//
// The vllm-cpp binary carries the demo model (models/demo converted to GGUF Q8_0 at
// build time, src/vllm/demo_model) and registers it at start-up under kDemoModelName,
// a Hugging Face-style id; `generate`, `serve` and `chat` use it when no model is given,
// and every command accepts the id wherever it takes a model path. MappedFile::Open
// serves a registered name from memory (no copy, like an mmapped file), and the
// loader and the tokenizer treat it as a .gguf file. A registered name wins over a
// file or folder of the same relative path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vllm {

inline constexpr char kDemoModelName[] = "vllm-cpp/demo";

struct EmbeddedFile {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Registers (or replaces) `name`; the bytes must outlive every use (static storage).
void RegisterEmbeddedFile(const std::string& name, const uint8_t* data, size_t size);
// The registered file, or null.
const EmbeddedFile* FindEmbeddedFile(const std::string& name);
inline bool IsEmbeddedFile(const std::string& name) { return FindEmbeddedFile(name) != nullptr; }

}  // namespace vllm
