// Tensor-core and async-copy building blocks of the CUDA kernels (paged_attention_mma.cu,
// moe_grouped.cu, the int8 matmuls): mma.m16n8k16 with f32 accumulators, ldmatrix and
// cp.async. The fragment layouts they rely on are in docs/gpu_kernels.md §1.1. CUDA
// only: HIP has none of them (files that include this guard it with !VT_GPU_HIP).
#pragma once

#include "gpu_common.cuh"

#if !VT_GPU_HIP
namespace vt::gpu {

// c += a b for a 16 x 16 A and a 16 x 8 B of 16-bit type T (bf16_t or f16_t).
template <typename T>
struct MmaType;
template <>
struct MmaType<bf16_t> {
  static __device__ inline void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // Two floats as the 16-bit pair of an A register (lo in the low half).
  static __device__ inline uint32_t Pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};
template <>
struct MmaType<f16_t> {
  static __device__ inline void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ inline uint32_t Pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

__device__ inline uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without registers (cp.async, sm_80+); valid false fills
// zeros (global unread). A thread's copies are grouped by CommitAsyncCopies and waited
// for by WaitAsyncCopies<n> (all but the n most recent groups landed); other threads
// see them after a barrier.
__device__ inline void CopyAsync16(uint32_t shared_address, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address), "l"(global), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void CopyAsync16(void* shared, const void* global, bool valid) {
  CopyAsync16(SharedAddress(shared), global, valid);
}
__device__ inline void CommitAsyncCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ inline void WaitAsyncCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Four 8 x 8 16-bit matrices from shared memory; lane l gives the row address of
// matrix l / 8 (row l % 8).
__device__ inline void LoadMatrices(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row)));
}
// The same, each matrix transposed.
__device__ inline void LoadMatricesTransposed(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row)));
}

}  // namespace vt::gpu
#endif
