// Device graphs: the work host code queues on a device, recorded once and replayed
// with one launch (CUDA graphs / HIP graphs). A decode step is ~500 small kernels;
// launched one by one, their launch gaps cost a large share of the step.
//
// CaptureGraph runs `record` with the device's queue recording instead of running:
// the vt ops it calls are enqueued into the graph and nothing executes. The graph
// keeps the device addresses every recorded op used, so
//   - inputs are tensors allocated before the capture and kept by the caller, whose
//     contents the caller rewrites (a copy from the host) before each Replay;
//   - outputs are tensors `record` created; the caller keeps them and reads them
//     after a Replay;
//   - memory allocated during the capture comes from the GraphMemory given to it
//     and stays reserved for the graph: a block freed during the capture is reused
//     by later allocations of the same capture (its ops run in queue order).
// Several graphs may share one GraphMemory when they never run at the same time
// (every graph of a device replays on its one queue, so they never do).
//
// `record` must not wait for the device (Synchronize, a copy to or from the host):
// the capture then fails with a vt::Error naming it, and nothing is recorded. Kernel
// choices made from shapes at capture time are fixed in the graph: a caller captures
// one graph per shape it replays.
#pragma once

#include <functional>
#include <memory>

#include "vt/device.h"

namespace vt {

// Memory reserved for captured graphs (a pool of the device's allocator of its
// own). Released when the last graph captured into it and the caller's handle are
// gone; tensors still alive then keep their blocks until they are freed.
class GraphMemory {
 public:
  virtual ~GraphMemory() = default;
};

class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  // Enqueues the recorded work on the device's queue (returns without waiting).
  virtual void Replay() = 0;
};

// Whether `device` can capture graphs (CUDA and ROCm devices can; the CPU cannot).
bool GraphsSupported(Device device);

std::shared_ptr<GraphMemory> NewGraphMemory(Device device);

// Records what `record` enqueues on `device` (see the top of this file). Throws a
// vt::Error on a device without graphs, or when `record` throws or waits for the
// device; the device's queue is then back to running work as usual.
std::unique_ptr<CapturedGraph> CaptureGraph(Device device, const std::shared_ptr<GraphMemory>& memory,
                                            const std::function<void()>& record);

}  // namespace vt
