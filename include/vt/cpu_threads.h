// Per-thread CPU pools, next to vt::SetNumThreads (ops.h), which sizes the process's.
#pragma once

namespace vt {

// CPU kernels called from this thread use a pool of its own with num_threads threads
// (this one included) instead of the process's; 0: the process's again. Engines
// that share a process (data-parallel replicas) run their steps on separate pools,
// which would otherwise take turns (the process's pool runs one region at a time).
// vt::GetNumThreads() then gives this thread's pool size.
void SetNumThreadsForThisThread(int num_threads);

}  // namespace vt
