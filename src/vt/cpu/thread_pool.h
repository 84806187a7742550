// A fixed pool of CPU threads for kernels.
//
// ParallelFor(n, grain, fn) splits [0, n) into chunks of at least `grain` items and
// calls fn(begin, end) on the pool's threads and the caller's; it returns when all
// chunks are done. Calls from inside a pool task run serially (no nested fan-out).
// The pool size is set once through vt::SetNumThreads (default: all hardware threads).
#pragma once

#include <cstdint>
#include <functional>

namespace vt::cpu {

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);
int NumThreads();

}  // namespace vt::cpu
