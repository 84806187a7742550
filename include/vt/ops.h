// The public ops: one function per line of ops.def, each taking its argument
// struct (see vt/op_args.h for the shape contracts), e.g.
//
//   vt::RmsNorm({.x = hidden, .weight = w, .out = normed, .eps = 1e-6f, .weight_offset = 1});
//
// Each validates shapes, dtypes, strides, devices and aliasing once, then runs the
// kernel registered for the tensors' device. All tensors of one call must be on the
// same device. Errors are vt::Error exceptions naming the op, device, dtype and shape.
#pragma once

#include "vt/error.h"
#include "vt/op_args.h"
#include "vt/registry.h"
#include "vt/tensor.h"

namespace vt {

#define VT_OP(name, doc) void name(const name##Args& args);
#include "vt/ops.def"
#undef VT_OP

// CPU threads used by CPU kernels (a fixed pool); 0 = all hardware threads.
void SetNumThreads(int num_threads);
int GetNumThreads();

// Waits for all queued work on `device`.
void Synchronize(Device device);

}  // namespace vt
