// Scalar element conversions for the portable (baseline x86-64) kernel code:
// T = float, BFloat16 or Float16 <-> f32, rounding as vt/dtype.h does.
//
// Only baseline translation units include this header. *_avx2.cpp / *_avx512.cpp
// files use the copies in vec_avx2.h / vec_avx512.h instead: the linker keeps one
// copy of each inline function, and a copy compiled with AVX flags must never be
// the one a CPU without AVX runs.
#pragma once

#include <type_traits>

#include "vt/dtype.h"

namespace vt::cpu::portable {

inline float ToF32(float v) { return v; }
inline float ToF32(BFloat16 v) { return Bf16ToF32(v.bits); }
inline float ToF32(Float16 v) { return F16ToF32(v.bits); }

template <typename T>
inline T FromF32(float v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{F32ToBf16(v)};
  } else if constexpr (std::is_same_v<T, Float16>) {
    return Float16{F32ToF16(v)};
  } else {
    return v;
  }
}

}  // namespace vt::cpu::portable
