#pragma once

namespace vllm {

// The project's version string, e.g. "0.1.0".
const char* Version();

// The commit the binary was built from (`git describe --always --dirty`), or
// "unknown" outside a git checkout.
const char* GitCommit();

}  // namespace vllm
