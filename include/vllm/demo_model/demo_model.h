// The demo model compiled into vllm-cpp: models/demo (a small Qwen3.5 trained on the
// Brown corpus, with its tokenizer, chat template and MTP head; models/demo/README.md)
// converted to GGUF Q8_0 at build time and embedded in the binary's read-only data.
//
//   vllm::RegisterDemoModel();                  // once, at start-up (main, tests)
//   vllm::LoadModel(vllm::kDemoModelName);      // "vllm-cpp/demo": read from memory
#pragma once

#include "vllm/model_loader/embedded_files.h"

namespace vllm {

// Registers the embedded GGUF under kDemoModelName (embedded_files.h).
void RegisterDemoModel();

}  // namespace vllm
