// Kernel-variant overrides for benchmarks and tests that compare the variants of a
// kernel family inside one process (e.g. two decode GEMV strategies on the same
// model, in the same run, against the same measured bandwidth).
//
// While no override is set, each family's kernel choice function decides (the
// engine never sets one). An override names a variant the family documents next
// to its choice function (src/vt/gpu/matmul_choice.h for "gpu.matmul_skinny"); the
// next dispatch that reads it throws a vt::Error listing the family's variants if
// the name is unknown. Where the variant does not accept a call's shape or dtypes,
// that call keeps the chosen kernel.
//
//   vt::tuning::SetVariant("gpu.matmul_skinny", "loads_in_flight");
//   ... run and time ...
//   vt::tuning::SetVariant("gpu.matmul_skinny", "");  // back to the kernel choice
#pragma once

#include <string>
#include <string_view>

namespace vt::tuning {

// Sets (or, with an empty variant, clears) the override of `family`. Thread-safe.
void SetVariant(std::string_view family, std::string_view variant);

// The override of `family`, or "" when none is set (one atomic load while no
// override has ever been set in the process).
std::string Variant(std::string_view family);

}  // namespace vt::tuning
