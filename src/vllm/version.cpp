#include "vllm/version.h"

namespace vllm {

const char* Version() { return "0.1.0"; }

}  // namespace vllm
