// A fake ROCm backend library without the versioned entry point (as one built
// before backends were versioned): LoadBackends must refuse it.
#include "fake_backend.h"

VT_FAKE_BACKEND(kROCM)
