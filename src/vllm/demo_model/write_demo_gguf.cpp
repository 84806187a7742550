// Build-time tool: models/demo/hf -> the GGUF (Q8_0) that embedded_demo_model.cpp
// embeds. The same conversion as `vllm-cpp convert HF OUT --outtype q8_0`, in its own
// small executable because vllm-cpp itself embeds the result.
//   write_demo_gguf HF_FOLDER OUT.gguf
#include <cstdio>
#include <exception>

#include "vllm/model_loader/hf_to_gguf.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_demo_gguf HF_FOLDER OUT.gguf\n");
    return 2;
  }
  try {
    vllm::ConvertHfToGguf(argv[1], argv[2], {.outtype = vllm::GgufOutType::kQ8_0, .copy_tokenizer = true});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_demo_gguf: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
