// Test data from outside the repository.
//
// Everything the tests read is in tests/data except the real Qwen3 tokenizer
// (tokenizers/qwen3/tokenizer.json and tokenizer_config.json), which is not part of
// this repository. The tests that need it read it from VT_SHARED_DATA_DIR, which
// tests/CMakeLists.txt points at the shared data folder beside the checkout, and skip
// with this message where a file is absent.
#pragma once

#include <filesystem>
#include <string>

namespace vllm::testing {

// "<file> is missing: ..." naming the file and where it comes from.
inline std::string MissingSharedData(const std::filesystem::path& file) {
  return file.string() +
         " is missing: this test needs the real Qwen3 tokenizer, which is not part of the repository; "
         "it comes from the shared data folder outside it (VT_SHARED_DATA_DIR, set in tests/CMakeLists.txt)";
}

}  // namespace vllm::testing
