// A fake CUDA backend library built from this tree: LoadBackends lets it in.
#include "fake_backend.h"
#include "vt/backend_abi.h"

VT_DEFINE_BACKEND_ABI()

VT_FAKE_BACKEND(kCUDA)
