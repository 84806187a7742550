// The GGUF bytes of the demo model, placed in .rodata by the assembler's .incbin
// (VLLM_DEMO_GGUF, the file write_demo_gguf produced at build time: CMake makes this
// object depend on it). Page-aligned like an mmapped file, so the GGUF's 32-byte tensor
// alignment holds in memory too.
#include "vllm/demo_model/demo_model.h"

#include <cstdint>

#ifndef VLLM_DEMO_GGUF
#error "VLLM_DEMO_GGUF must name the demo model's GGUF file (src/vllm/CMakeLists.txt)"
#endif

__asm__(
    ".pushsection .rodata.vllm_demo_gguf, \"a\", %progbits\n"
    ".balign 4096\n"
    ".globl vllm_demo_gguf_begin\n"
    "vllm_demo_gguf_begin:\n"
    ".incbin \"" VLLM_DEMO_GGUF "\"\n"
    ".globl vllm_demo_gguf_end\n"
    "vllm_demo_gguf_end:\n"
    ".popsection\n");

extern "C" const uint8_t vllm_demo_gguf_begin[];
extern "C" const uint8_t vllm_demo_gguf_end[];

namespace vllm {

void RegisterDemoModel() {
  RegisterEmbeddedFile(kDemoModelName, vllm_demo_gguf_begin,
                       static_cast<size_t>(vllm_demo_gguf_end - vllm_demo_gguf_begin));
}

}  // namespace vllm
