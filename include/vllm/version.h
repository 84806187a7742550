#pragma once

namespace vllm {

// The project's version string, e.g. "0.1.0".
const char* Version();

}  // namespace vllm
